"""No ingest input gets a 5xx: each field of each MLflow REST operation and each of its GET
parameters bad in turn (with an ingest token), logbook files bad in each way, and
Prometheus text through each of the parser's paths with values, timestamps and GPU indexes
past every range. The sweep's client, demo data and bad values: tests/plugins/input_sweep.py."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from tests.plugins.input_sweep import BAD_VALUES, Tally, _field_sends, _kinds

# The MLflow REST API (not in the schema: MLflow's own), with an ingest token: each field of
# each operation in turn bad, and each GET parameter.
MLFLOW = "/mlflow/api/2.0/mlflow/"


MLFLOW_POSTS = {
    "experiments/create": {"name": "sweep-exp", "artifact_location": "", "tags": [
        {"key": "k", "value": "v"}]},
    "runs/create": {"experiment_id": "@EXP@", "run_name": "sweep-run", "user_id": "u",
                    "start_time": 1_763_700_000_000, "tags": [{"key": "k", "value": "v"}]},
    "runs/update": {"run_id": "@RUN@", "status": "RUNNING", "end_time": 1_763_700_001_000,
                    "run_name": "sweep-run"},
    "runs/log-metric": {"run_id": "@RUN@", "key": "loss", "value": 1.5,
                        "timestamp": 1_763_700_000_000, "step": 3},
    "runs/log-parameter": {"run_id": "@RUN@", "key": "lr", "value": "0.1"},
    "runs/set-tag": {"run_id": "@RUN@", "key": "k", "value": "v"},
    "runs/log-batch": {"run_id": "@RUN@", "metrics": [
        {"key": "loss", "value": 1.5, "timestamp": 1_763_700_000_000, "step": 4}],
        "params": [{"key": "p", "value": "1"}], "tags": [{"key": "t", "value": "1"}]},
}  # fmt: skip


MLFLOW_GETS = {
    "experiments/get": ["experiment_id"],
    "experiments/get-by-name": ["experiment_name"],
    "runs/get": ["run_id", "run_uuid"],
    "metrics/get-history": ["run_id", "metric_key", "max_results", "page_token"],
}


BAD_QUERY = {**BAD_VALUES, "negative": "-1", "int64+1": "9223372036854775808", "1e20": "1e20"}


@pytest.mark.django_db
def test_demo_no_mlflow_field_takes_bad_input_with_a_5xx(
    sweeper: Any, demo: dict[str, str]
) -> None:
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep-mlflow")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    # given an experiment and a run to name
    created = sweeper.post(f"{MLFLOW}experiments/create", data={"name": "sweep-base"},
                           content_type="application/json", **auth)  # fmt: skip
    experiment = created.json()["experiment_id"]
    started = sweeper.post(f"{MLFLOW}runs/create", data={"experiment_id": experiment},
                           content_type="application/json", **auth)  # fmt: skip
    run = started.json()["run"]["info"]["run_id"]
    tally = Tally("MLflow")
    turn = 0
    for operation, template in MLFLOW_POSTS.items():
        body = json.loads(json.dumps(template).replace("@EXP@", experiment).replace("@RUN@", run))
        sends, turn = _field_sends(body, turn)
        for what, data in sends:
            response = sweeper.post(
                f"{MLFLOW}{operation}", data=data, content_type="application/json", **auth
            )
            tally.record(f"POST {operation}", response, what)
    for operation, params in MLFLOW_GETS.items():
        good = {
            "experiment_id": experiment,
            "experiment_name": "sweep-base",
            "run_id": run,
            "run_uuid": run,
            "metric_key": "loss",
            "max_results": "10",
            "page_token": "",
        }
        for param in params:
            for kind, value in _kinds(BAD_QUERY, turn := turn + 1):
                query = "&".join(f"{p}={value if p == param else quote(good[p])}" for p in params)
                response = sweeper.get(f"{MLFLOW}{operation}?{query}", **auth)
                tally.record(f"GET {operation}", response, f"{param}={kind}")
    for kind, value in _kinds(BAD_QUERY, turn):
        tally.record("GET /mlflow/open", sweeper.get(f"/mlflow/open?run={value}"), kind)
    tally.print()
    assert len(tally.requests) == len(MLFLOW_POSTS) + len(MLFLOW_GETS) + 1
    assert tally.failures == []


# Logbook files a user can upload: each bad in one way (NUL, not UTF-8, numbers past any
# column, dates out of range), against the demo run's import.
_ENTRY = (
    "## 2021-11-30 19:24 UTC [on-call: Stephen] Run 12.37: requeue\n\n"
    "- Kind: note\n- Time: @TIME@\n- Attempt: @N@\n- Steps: @N@\n- Count: @N@ restarts\n"
    "- Incident: #@N@\n- Checkpoint: step @N@\n\nBody @TEXT@\n"
)


BAD_LOGBOOKS = {
    "nul": _ENTRY.replace("@TEXT@", "a\x00b"),
    "4301 digits": _ENTRY.replace("@N@", "9" * 4301),
    "past bigint": _ENTRY.replace("@N@", "9223372036854775808"),
    "past integer": _ENTRY.replace("@N@", "2147483648"),
    "time before 1 in UTC": _ENTRY.replace("@TIME@", "0001-01-01T00:00:00+14:00"),
    "time past 9999 in UTC": _ENTRY.replace("@TIME@", "9999-12-31T23:59:59-14:00"),
    "heading year 0": _ENTRY.replace("2021-11-30 19:24", "0000-01-01 00:00"),
    "heading year 10000": _ENTRY.replace("2021-11-30 19:24", "10000-01-01 00:00"),
}


@pytest.mark.django_db
def test_demo_no_logbook_import_gets_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    tally = Tally("logbook import")
    url = f"/runs/{demo['run_id']}/logbook/import/"
    files = {
        kind: text.replace("@TIME@", "2021-11-30T19:24:00+00:00").replace("@N@", "1")
        .replace("@TEXT@", "x").encode()
        for kind, text in BAD_LOGBOOKS.items()
    }  # fmt: skip
    files["not UTF-8"] = _ENTRY.encode().replace(b"Body", b"\xed\xa0\x80\xff")
    for kind, raw in files.items():
        response = sweeper.post(url, {"file": SimpleUploadedFile("log.md", raw)})
        tally.record("POST runs/<run_id>/logbook/import/", response, kind)
        assert response.status_code < 500, kind
    tally.print()
    assert tally.failures == []


# Prometheus text through each of the parser's paths: the exporter's plain rendering, lines
# prometheus_client reads (escaped labels, spaces, other number forms), and the
# Pushgateway path with base64 labels; values, timestamps and GPU indexes past every range.
_PLAIN = 'DCGM_FI_DEV_GPU_TEMP{gpu="@G@",UUID="GPU-sweep",Hostname="h-sweep"} @V@ @T@\n'


_ESCAPED = 'DCGM_FI_DEV_GPU_TEMP{gpu="@G@",UUID="GPU-\\"sweep",Hostname="h-sweep"} @V@ @T@\n'


_SPACED = 'DCGM_FI_DEV_GPU_TEMP { gpu="@G@", UUID="GPU-sweep", Hostname="h-sweep" } @V@ @T@\n'


_XID = 'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-sweep",Hostname="h-sweep",err_msg="@M@"} @V@\n'


PROMETHEUS_VALUES = {
    "309 digits": "9" * 309,
    "4300 digits": "9" * 4300,
    "4301 digits": "9" * 4301,
    "1e309": "1e309",
    "-1e309": "-1e309",
    "NaN": "NaN",
    "int64+1": "9223372036854775808",
}


@pytest.mark.django_db
def test_demo_no_prometheus_push_gets_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep-prom")
    tally = Tally("Prometheus")
    bodies: list[tuple[str, str, bytes]] = []
    for line_name, line in (("plain", _PLAIN), ("escaped", _ESCAPED), ("spaced", _SPACED)):
        for kind, number in PROMETHEUS_VALUES.items():
            for field in ("@V@", "@T@", "@G@"):
                text = line.replace(field, number).replace("@V@", "66").replace("@T@", "")
                text = text.replace("@G@", "0")
                bodies.append((f"{line_name} {field}={kind}", "/api/v1/ingest/prometheus",
                               text.encode()))  # fmt: skip
    for kind, value in (("nul", "a\x00b"), ("4301 digits", "9" * 4301)):
        bodies.append((f"xid err_msg={kind}", "/api/v1/ingest/prometheus",
                       _XID.replace("@M@", value).replace("@V@", "79").encode()))  # fmt: skip
        bodies.append((f"xid value={kind}", "/api/v1/ingest/prometheus",
                       _XID.replace("@M@", "x").replace("@V@", value).encode()))  # fmt: skip
    bodies.append(("not UTF-8", "/api/v1/ingest/prometheus", _PLAIN.encode() + b"\xed\xa0\x80"))
    bodies.append(("nul in the text", "/api/v1/ingest/prometheus", b"\x00" + _PLAIN.encode()))
    plain = _PLAIN.replace("@V@", "66").replace("@T@", "").replace("@G@", "0").encode()
    for kind, path in (
        ("base64 not base64", "job/dcgm/hostname@base64/%%%"),
        ("base64 not UTF-8", "job/dcgm/hostname@base64/7aCA"),
        ("base64 NUL", "job/dcgm/hostname@base64/AA"),
        ("host 4301 digits", "job/dcgm/hostname/" + "9" * 4301),
        ("odd path", "job/dcgm/hostname"),
    ):
        bodies.append((kind, f"/api/v1/ingest/prometheus/metrics/{path}", plain))
    for what, url, body in bodies:
        endpoint = "pushgateway path" if "/metrics/" in url else "ingest/prometheus"
        response = sweeper.post(url, data=body, content_type="text/plain",
                                HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
        tally.record(endpoint, response, what)
    tally.print()
    assert sum(tally.requests.values()) > 60
    assert tally.failures == []
