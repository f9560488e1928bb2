"""The MLflow-compatible endpoints and writes without the mlflow client: log-batch metrics
written in the request like native ones, a batch sent twice stored once, each metric checked
as the contract does, the statements a log-batch and the reads cost, history pages, the
OpenAPI schema, and MLflow's limits."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ingest import mlflow_checks
from ingest import services as ingest_services
from ingest.models import IngestBatch, IngestToken, MlflowRun
from ingest.services import mlflow as mlflow_writes
from telemetry.models import MetricPoint
from tests.ingest.mlflow_points import API, TS_MS, chronicle_points


@pytest.mark.django_db(transaction=True)
def test_log_batch_metrics_are_written_in_the_request_like_native_ones(
    project, ingest_token, monkeypatch
):
    # given a run, and a batch processor that would fail if anything reached it
    token = IngestToken.objects.get(project=project)
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="lean", start_time_ms=TS_MS
    )

    def no_processing(**_: Any) -> str:
        raise AssertionError("log-batch metrics went through the batch processor")

    monkeypatch.setattr(ingest_services, "batch_process", no_processing)

    # when log-batch sends points, NaN among them
    mlflow_writes.mlflow_run_log(
        token=token,
        run_id=mlflow_run.run_uuid,
        metrics=[
            mlflow_checks.MetricValue("loss", 2.5, TS_MS, 1),
            mlflow_checks.MetricValue("loss", math.nan, TS_MS + 1, 2),
        ],
    )

    # then they are stored, in a batch that is done, the way a native metric-only batch is
    batch = IngestBatch.objects.get(
        batch_id__startswith=f"mlflow:{mlflow_run.run_uuid}:", metric_count=2
    )
    assert batch.status == IngestBatch.Status.DONE and batch.attempt_number == 1
    points = chronicle_points(mlflow_run.run, "loss")
    assert [(attempt, step) for attempt, step, _ in points] == [(1, 1), (1, 2)]
    assert points[0][2] == 2.5 and (points[1][2] is None or math.isnan(points[1][2]))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("at_once", [True, False])
def test_log_batch_sent_twice_stores_one_batch_on_both_paths(
    project, ingest_token, settings, at_once
):
    # given a run, with metric batches written in the request or handed to the processor
    settings.INGEST_WRITE_METRICS_AT_ONCE = at_once
    token = IngestToken.objects.get(project=project)
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="twice", start_time_ms=TS_MS
    )
    metrics = [
        mlflow_checks.MetricValue("loss", 2.5, TS_MS, 1),
        mlflow_checks.MetricValue("loss", math.inf, TS_MS + 1, 2),
        mlflow_checks.MetricValue("lr", 1e-4, TS_MS, 1),
    ]

    # when log-batch sends the same points twice, then another value at a new step
    for _ in range(2):
        mlflow_writes.mlflow_run_log(token=token, run_id=mlflow_run.run_uuid, metrics=metrics)
    mlflow_writes.mlflow_run_log(
        token=token,
        run_id=mlflow_run.run_uuid,
        metrics=[mlflow_checks.MetricValue("loss", 2.4, TS_MS + 2, 3)],
    )

    # then the repeat mapped to the first batch (stored once, done), its id hashing the points
    batches = IngestBatch.objects.filter(
        batch_id__startswith=f"mlflow:{mlflow_run.run_uuid}:", event_count=0
    ).order_by("received_at")
    assert [b.metric_count for b in batches] == [3, 1]
    assert {b.status for b in batches} == {IngestBatch.Status.DONE}
    assert batches[0].batch_id != batches[1].batch_id
    # the body is kept only for the processor, which parsed it
    assert (bytes(batches[0].body) == b"") == at_once
    assert chronicle_points(mlflow_run.run, "loss") == [(1, 1, 2.5), (1, 2, math.inf), (1, 3, 2.4)]
    assert chronicle_points(mlflow_run.run, "lr") == [(1, 1, 1e-4)]


@pytest.mark.django_db
def test_log_batch_checks_each_metric_as_the_contract_does(client, project, ingest_token):
    # given a run
    token = IngestToken.objects.get(project=project)
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="checked", start_time_ms=TS_MS
    )

    def log_batch(*metrics: dict[str, Any]) -> Any:
        return client.post(
            f"{API}/runs/log-batch",
            data=json.dumps({"run_id": mlflow_run.run_uuid, "metrics": list(metrics)}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )

    good = {"key": "loss", "value": 2.5, "timestamp": TS_MS, "step": 1}
    # when a batch holds one bad metric beside good ones, then it is refused whole
    for bad in [
        {"key": "loss", "value": 1.0, "timestamp": 4_102_444_800_000, "step": 2},  # year 2100
        {"key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 2**63},  # past int64
        {"key": "lo\u0000ss", "value": 1.0, "timestamp": TS_MS, "step": 2},
        {"key": "x" * 201, "value": 1.0, "timestamp": TS_MS, "step": 2},
        {"key": "loss", "value": True, "timestamp": TS_MS, "step": 2},
        {"key": "loss", "value": 1.0, "timestamp": -1, "step": 2},
    ]:
        response = log_batch(good, bad)
        assert response.status_code == 400, bad
        assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE", bad
    assert not MetricPoint.objects.filter(series__run=mlflow_run.run).exists()
    # when the metrics come in MLflow's other spellings (strings, no step), then they are
    # stored as the plain ones would be
    response = log_batch(
        good,
        {"key": "loss", "value": "NaN", "timestamp": str(TS_MS + 1000), "step": "2"},
        {"key": "lr", "value": 3, "timestamp": TS_MS},
    )
    assert response.status_code == 200, response.content
    loss = chronicle_points(mlflow_run.run, "loss")
    assert [(step, value) for _, step, value in loss][:1] == [(1, 2.5)]
    assert loss[1][1] == 2 and (loss[1][2] is None or math.isnan(loss[1][2]))
    assert chronicle_points(mlflow_run.run, "lr") == [(1, 0, 3.0)]
    stored = MetricPoint.objects.get(series__run=mlflow_run.run, series__name="loss", step=2)
    assert stored.wall_time.timestamp() * 1000 == TS_MS + 1000


@pytest.mark.django_db
def test_the_usual_log_batch_refuses_a_run_id_postgresql_cannot_store(client, ingest_token):
    # given the usual request (run_id and metrics only), whose fields are checked as decoded
    metrics = [{"key": "loss", "value": 2.5, "timestamp": TS_MS, "step": 1}]
    for run_id, status in [("run\u0000id", 400), ("0" * 32, 404)]:
        # when its run id holds a NUL, or names no run, then the answer says so (not a 500)
        response = client.post(
            f"{API}/runs/log-batch",
            data=json.dumps({"run_id": run_id, "metrics": metrics}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )
        assert response.status_code == status, response.content
        assert response.json()["error_code"] in {
            "INVALID_PARAMETER_VALUE",
            "RESOURCE_DOES_NOT_EXIST",
        }


def _log_batch(client: Any, ingest_token: str, mlflow_run: MlflowRun, step: int) -> Any:
    metrics = [{"key": "loss", "value": 2.5, "timestamp": TS_MS, "step": step}]
    return client.post(
        f"{API}/runs/log-batch",
        data=json.dumps({"run_id": mlflow_run.run_uuid, "metrics": metrics}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )


@pytest.mark.django_db(transaction=True)
def test_a_metric_only_log_batch_is_one_transaction_with_one_lock(client, project, ingest_token):
    # given a run that has logged a batch already (its ids remembered by this process)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    token = IngestToken.objects.get(project=project)
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name="one-read", start_time_ms=TS_MS
    )
    assert _log_batch(client, ingest_token, mlflow_run, 1).status_code == 200
    # when it logs the next one
    with CaptureQueriesContext(connection) as captured:
        assert _log_batch(client, ingest_token, mlflow_run, 2).status_code == 200
    # then the batch's own transaction opens with one statement that share-locks the MLflow
    # run (ingest's tables only): no transaction around it (its savepoint cost two round
    # trips), and nothing reads the Chronicle run's name again
    sqls = [q["sql"] for q in captured.captured_queries]
    stored = next(
        i for i, sql in enumerate(sqls) if sql.startswith('INSERT INTO "ingest_ingestbatch"')
    )
    assert sqls[0] == "BEGIN" and len(sqls[1:stored]) == 1
    assert "FOR SHARE" in sqls[1] and "telemetry_" not in sqls[1]
    assert [sql for sql in sqls if "FOR SHARE" in sql] == sqls[1:2]
    assert not [sql for sql in sqls if sql.startswith("SELECT name FROM telemetry_run")]
    assert [step for _, step, _ in chronicle_points(mlflow_run.run, "loss")] == [1, 2]


def _run_remembered(
    client: Any, project: Any, ingest_token: str, name: str
) -> tuple[IngestToken, MlflowRun]:
    """A new run that has logged one batch (its target remembered by this process)."""
    token = IngestToken.objects.get(project=project)
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name=name, start_time_ms=TS_MS
    )
    assert _log_batch(client, ingest_token, mlflow_run, 1).status_code == 200
    return token, mlflow_run


@pytest.mark.django_db(transaction=True)
def test_a_log_batch_after_another_process_restarted_the_run_goes_to_the_new_attempt(
    client, project, ingest_token
):
    # given a run whose attempt 1 this process remembers from its first batch
    token, mlflow_run = _run_remembered(client, project, ingest_token, "restarted")
    # when the run is finished and started again (attempt 2) and the process is not told
    for status in ("FINISHED", "RUNNING"):
        mlflow_writes.mlflow_run_update(token=token, run_id=mlflow_run.run_uuid, status=status)
    assert MlflowRun.objects.get(pk=mlflow_run.pk).attempt_number == 2
    assert _log_batch(client, ingest_token, mlflow_run, 2).status_code == 200
    # then the lock's check saw the moved attempt: the new point is attempt 2's
    assert chronicle_points(mlflow_run.run, "loss") == [(1, 1, 2.5), (2, 2, 2.5)]


@pytest.mark.django_db(transaction=True)
def test_a_log_batch_for_a_deleted_run_is_404_though_the_process_remembers_it(
    client, project, ingest_token
):
    _, mlflow_run = _run_remembered(client, project, ingest_token, "gone")
    MlflowRun.objects.filter(pk=mlflow_run.pk).delete()
    response = _log_batch(client, ingest_token, mlflow_run, 2)
    assert (response.status_code, response.json()["error_code"]) == (
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )


def _run_with_points(project: Any, token: Any, *, metrics: int, steps: int) -> MlflowRun:
    mlflow_run = mlflow_writes.mlflow_run_create(
        token=token, experiment_id="0", run_name=f"big-{metrics}-{steps}", start_time_ms=TS_MS
    )
    for first in range(0, steps, 1000 // metrics):
        mlflow_writes.mlflow_run_log(
            token=token,
            run_id=mlflow_run.run_uuid,
            metrics=[
                mlflow_checks.MetricValue(f"m{index}", float(step), TS_MS + step, step)
                for index in range(metrics)
                for step in range(first, min(first + 1000 // metrics, steps))
            ],
        )
    return mlflow_run


@pytest.mark.django_db(transaction=True)
def test_reads_cost_the_same_queries_whatever_the_points(client, project, query_budget):
    token, plaintext = ingest_services.token_create(project=project, name="reads")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}

    def read(path: str, params: dict[str, str]) -> tuple[int, Any]:
        """The queries of a read made warm: the token's first use reads it and records its
        use (then cached for INGEST_TOKEN_CACHE_S, touched once a minute), a cost of the
        token, not of the points, so each size is read once before it is counted."""
        client.get(f"{API}/{path}", params, **headers)
        return query_budget.run(lambda: client.get(f"{API}/{path}", params, **headers))

    costs: dict[str, list[int]] = {"get": [], "history": []}
    for steps in (10, 2000):
        # given a run with 4 metrics of `steps` points each
        mlflow_run = _run_with_points(project, token, metrics=4, steps=steps)
        # when runs/get and get-history are read
        params = {"run_id": mlflow_run.run_uuid}
        cost, response = read("runs/get", params)
        costs["get"].append(cost)
        cost, answer = read(
            "metrics/get-history", {**params, "metric_key": "m0", "max_results": "1000"}
        )
        costs["history"].append(cost)
        # then each answers for all its points
        assert response.status_code == 200
        metrics = {m["key"]: m for m in response.json()["run"]["data"]["metrics"]}
        assert metrics["m3"]["value"] == float(steps - 1) and metrics["m3"]["step"] == steps - 1
        body = answer.json()
        assert len(body["metrics"]) == min(steps, 1000)
        assert ("next_page_token" in body) == (steps > 1000)
    # and the queries are constant in the points (10 and 2,000 a metric)
    for call, (small, big) in costs.items():
        query_budget.constant(small=small, big=big, guards=f"the points ({call})")


@pytest.mark.django_db(transaction=True)
def test_history_pages_cover_every_point_once(client, project):
    # given 2,500 points of one metric
    token, plaintext = ingest_services.token_create(project=project, name="pages")
    mlflow_run = _run_with_points(project, token, metrics=1, steps=2500)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    # when the history is read 1,000 at a time following next_page_token
    steps: list[int] = []
    token_value = None
    for _ in range(5):
        params = {"run_id": mlflow_run.run_uuid, "metric_key": "m0", "max_results": "1000"}
        if token_value:
            params["page_token"] = token_value
        body = client.get(f"{API}/metrics/get-history", params, **headers).json()
        steps += [m["step"] for m in body["metrics"]]
        token_value = body.get("next_page_token")
        if not token_value:
            break
    # then every step comes once, in order, in three pages
    assert steps == list(range(2500))


@pytest.mark.django_db
def test_mlflow_endpoints_are_not_in_the_openapi_schema(client, alice):
    client.force_login(alice)
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert "/api/v1/ingest" in response.content.decode()
    assert "/mlflow/" not in response.content.decode()


def test_limits_match_mlflow() -> None:
    # MLflow's published limits (mlflow/utils/validation.py)
    assert mlflow_checks.MAX_METRICS_PER_BATCH == 1000
    assert mlflow_checks.MAX_PARAMS_TAGS_PER_BATCH == 100
    with pytest.raises(mlflow_checks.MlflowError) as refused:
        mlflow_checks.check_batch_limits(metrics=0, params=101, tags=0)
    assert refused.value.status == 400
    assert mlflow_checks.json_float(math.nan) == "NaN"
    assert mlflow_checks.json_float(-math.inf) == "-Infinity"
    assert mlflow_checks.check_value("Infinity", key="x") == math.inf
    assert mlflow_checks.check_int("12", what="step") == 12
