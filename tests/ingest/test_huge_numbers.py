"""Numbers too large for a float (≥ 1e309 as a JSON integer) or for Python's integer parsing
(over 4,300 digits) are a 400 naming the field, on every ingest path: never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ingest.models import IngestToken
from ingest.services import mlflow as mlflow_writes

# A JSON integer past the largest double (1.8e308), and one past Python's 4,300-digit limit
# on int("...") that json.loads applies (orjson refuses both: the fallback parses them).
PAST_DOUBLE = "1" + "0" * 400
PAST_DIGITS = "9" * 4301
HUGE = [PAST_DOUBLE, f"-{PAST_DOUBLE}", PAST_DIGITS]
TS_S = 1_763_700_000
TS_MS = TS_S * 1000


def _body(template: dict[str, Any], number: str) -> bytes:
    """`template` as JSON with the string "HUGE" replaced by `number` as a bare literal."""
    return json.dumps(template).replace('"HUGE"', number).encode()


METRIC = {"name": "loss", "step": 1, "value": 1.0, "time": TS_S}
BATCH_FIELDS = [
    ("metrics[0].time", {"metrics": [{**METRIC, "time": "HUGE"}]}),
    ("metrics[0].value", {"metrics": [{**METRIC, "value": "HUGE"}]}),
    ("metrics[0].step", {"metrics": [{**METRIC, "step": "HUGE"}]}),
    ("attempt", {"attempt": "HUGE", "metrics": [METRIC]}),
    ("rank", {"rank": "HUGE", "metrics": [METRIC]}),
    (
        "series[0].times",
        {"series": [{"name": "loss", "steps": [1], "values": [1.0], "times": ["HUGE"]}]},
    ),
    ("series[0].values", {"series": [{"name": "loss", "steps": [1], "values": ["HUGE"]}]}),
    ("series[0].steps", {"series": [{"name": "loss", "steps": ["HUGE"], "values": [1.0]}]}),
    (
        "events[0].start",
        {"events": [{"kind": "interval", "type": "checkpoint", "start": "HUGE", "end": TS_S}]},
    ),
    (
        "events[0].end",
        {"events": [{"kind": "interval", "type": "checkpoint", "start": TS_S, "end": "HUGE"}]},
    ),
    ("run_info.flops_per_token", {"run_info": {"flops_per_token": "HUGE"}, "metrics": [METRIC]}),
]


@pytest.mark.parametrize("number", HUGE, ids=["1e400", "-1e400", "4301-digits"])
@pytest.mark.parametrize(("field", "template"), BATCH_FIELDS, ids=[f for f, _ in BATCH_FIELDS])
@pytest.mark.django_db
def test_ingest_refuses_a_huge_number_naming_the_field(post_batch, field, template, number):
    document = {"batch_id": "huge", "run": "huge-run", **template}

    response = post_batch(_body(document, number))

    assert response.status_code == 400, response.content[:300]
    assert field.split(".")[-1].split("[")[0] in response.content.decode()


@pytest.mark.parametrize("number", HUGE, ids=["1e400", "-1e400", "4301-digits"])
@pytest.mark.parametrize("field", ["timestamp", "value", "step"])
@pytest.mark.django_db
def test_mlflow_log_metric_refuses_a_huge_number_naming_the_field(
    client, project, ingest_token, field, number
):
    token = IngestToken.objects.get(project=project)
    run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="huge", start_time_ms=TS_MS
    )
    metric = {"run_id": run.run_uuid, "key": "loss", "value": 1.5, "timestamp": TS_MS, "step": 1}

    response = client.post(
        "/mlflow/api/2.0/mlflow/runs/log-metric",
        data=_body({**metric, field: "HUGE"}, number),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )

    assert response.status_code == 400, response.content[:300]
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert field in response.json()["message"] or "loss" in response.json()["message"]


@pytest.mark.parametrize("number", HUGE, ids=["1e400", "-1e400", "4301-digits"])
@pytest.mark.parametrize("where", ["value", "timestamp"])
@pytest.mark.django_db
def test_prometheus_push_refuses_a_huge_number(client, ingest_token, where, number):
    sample = f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",Hostname="h1"}} {number if where == "value" else 40}'
    if where == "timestamp":
        sample += f" {number}"

    response = client.post(
        "/api/v1/ingest/prometheus",
        data=(sample + "\n").encode(),
        content_type="text/plain; version=0.0.4",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )

    assert response.status_code < 500, response.content[:300]


def _metric(**fields: Any) -> dict[str, Any]:
    return {"metrics": [{"key": "loss", "value": 1, "timestamp": TS_MS, **fields}]}


MLFLOW_FIELDS = [
    ("runs/create", "start_time", {"experiment_id": "0", "start_time": "HUGE"}),
    ("runs/update", "end_time", {"status": "FINISHED", "end_time": "HUGE"}),
    ("runs/log-batch", "value", _metric(value="HUGE")),
    ("runs/log-batch", "timestamp", _metric(timestamp="HUGE")),
    ("runs/log-batch", "step", _metric(step="HUGE")),
]


@pytest.mark.parametrize("number", HUGE, ids=["1e400", "-1e400", "4301-digits"])
@pytest.mark.parametrize(
    ("endpoint", "field", "template"), MLFLOW_FIELDS, ids=[f"{e}:{f}" for e, f, _ in MLFLOW_FIELDS]
)
@pytest.mark.django_db
def test_every_mlflow_numeric_field_refuses_a_huge_number(
    client, project, ingest_token, endpoint, field, template, number
):
    token = IngestToken.objects.get(project=project)
    run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="huge", start_time_ms=TS_MS
    )

    response = client.post(
        f"/mlflow/api/2.0/mlflow/{endpoint}",
        data=_body({"run_id": run.run_uuid, **template}, number),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )

    assert response.status_code == 400, response.content[:300]
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"


@pytest.mark.parametrize("number", HUGE, ids=["1e400", "-1e400", "4301-digits"])
@pytest.mark.django_db
def test_mlflow_get_history_refuses_a_huge_max_results(client, project, ingest_token, number):
    token = IngestToken.objects.get(project=project)
    run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="huge", start_time_ms=TS_MS
    )

    response = client.get(
        "/mlflow/api/2.0/mlflow/metrics/get-history",
        {"run_id": run.run_uuid, "metric_key": "loss", "max_results": number},
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )

    assert response.status_code == 400, response.content[:300]
    assert "max_results" in response.json()["message"]
