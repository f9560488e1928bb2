"""The MLflow-compatible endpoints driven by the real `mlflow` client (mlflow-skinny) against
a live test server: the fluent API, log_batch at MLflow's limit, a failed and resumed run,
write-once params, MLflow's error shape, Bearer and Basic token auth. Every write is checked
in Chronicle's own tables too (runs, attempts, series, points, interruptions)."""

from __future__ import annotations

import base64
import json
import math
import os

import pytest

# Before mlflow is imported: no usage telemetry leaves the machine during tests.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import mlflow
import requests
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ingest import services as ingest_services
from ingest.models import IngestBatch, MlflowExperiment, MlflowRun
from logbook.models import Interruption
from logbook.services import autotriage as autotriage_services
from telemetry.models import Attempt, MetricSeries, Run
from tests.ingest.mlflow_points import TS_MS, chronicle_points


@pytest.fixture
def tracking(mlflow_tracking: str) -> str:
    return mlflow_tracking


def same(a: float | None, b: float) -> bool:
    return (a is not None and math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.django_db(transaction=True)
def test_fluent_api_logs_to_chronicle_and_reads_back(tracking, project):
    # given an experiment and a run started the way a training script does
    mlflow.set_experiment("sft-sweep")
    with mlflow.start_run(run_name="sft-lr-3e-4") as active:
        run_id = active.info.run_id
        # when the script logs params, metrics (NaN and ±inf among them) and tags
        mlflow.log_param("lr", "0.0003")
        mlflow.log_params({"batch_size": 32, "optimizer": "adamw"})
        mlflow.log_metric("loss", 2.5, step=0, timestamp=TS_MS)
        mlflow.log_metrics({"loss": 2.0, "acc": 0.5}, step=1, timestamp=TS_MS + 1000)
        mlflow.log_metric("loss", math.nan, step=2, timestamp=TS_MS + 2000)
        mlflow.log_metric("grad_norm", math.inf, step=2, timestamp=TS_MS + 2000)
        mlflow.log_metric("grad_norm", -math.inf, step=3, timestamp=TS_MS + 3000)
        mlflow.set_tag("team", "infra")
        mlflow.set_tags({"stage": "sft", "team": "post-training"})
        client = MlflowClient()
        history = client.get_metric_history(run_id, "loss")
        fetched = client.get_run(run_id)

    # then MLflow reads back what it wrote, through Chronicle
    assert [(m.step, m.timestamp) for m in history] == [
        (0, TS_MS),
        (1, TS_MS + 1000),
        (2, TS_MS + 2000),
    ]
    assert [m.value for m in history[:2]] == [2.5, 2.0] and math.isnan(history[2].value)
    assert fetched.info.run_name == "sft-lr-3e-4"
    assert fetched.data.params == {"lr": "0.0003", "batch_size": "32", "optimizer": "adamw"}
    assert fetched.data.tags["team"] == "post-training"  # tags overwrite
    assert fetched.data.tags["stage"] == "sft"
    assert fetched.data.tags["mlflow.runName"] == "sft-lr-3e-4"
    # run.data.metrics is the latest value per key (the highest step)
    assert fetched.data.metrics["acc"] == 0.5
    assert math.isnan(fetched.data.metrics["loss"])
    assert fetched.data.metrics["grad_norm"] == -math.inf
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"

    # and the points landed in Chronicle's own tables, under the run and attempt 1
    run = Run.objects.get(project=project, name="sft-lr-3e-4")
    assert MlflowRun.objects.get(run_uuid=run_id).run == run
    assert MlflowExperiment.objects.get(project=project, name="sft-sweep")
    expected = [(1, 0, 2.5), (1, 1, 2.0), (1, 2, math.nan)]
    stored = chronicle_points(run, "loss")
    assert [p[:2] for p in stored] == [p[:2] for p in expected]
    assert all(same(s[2], e[2]) for s, e in zip(stored, expected, strict=True))
    assert chronicle_points(run, "grad_norm") == [(1, 2, math.inf), (1, 3, -math.inf)]
    assert MetricSeries.objects.filter(run=run, attempt__number=1).count() == 3
    attempt = Attempt.objects.get(run=run, number=1)
    assert attempt.status == Attempt.Status.COMPLETED and attempt.ended_at is not None
    # params are shown with the run's config
    assert run.__class__.objects.get(pk=run.pk).config["lr"] == "0.0003"


@pytest.mark.django_db(transaction=True)
def test_non_finite_values_travel_as_strings_on_the_wire(tracking, ingest_token):
    # given a run with NaN and ±Infinity logged
    with mlflow.start_run(run_name="wire") as active:
        run_id = active.info.run_id
        for step, value in enumerate([math.nan, math.inf, -math.inf]):
            mlflow.log_metric("x", value, step=step, timestamp=TS_MS)
    # when the history is read as raw JSON
    response = requests.get(
        f"{tracking}/api/2.0/mlflow/metrics/get-history",
        params={"run_id": run_id, "metric_key": "x"},
        headers={"Authorization": f"Bearer {ingest_token}"},
        timeout=30,
    )
    # then it is strict JSON with MLflow's string spellings
    assert response.status_code == 200
    body = json.loads(response.text, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert [m["value"] for m in body["metrics"]] == ["NaN", "Infinity", "-Infinity"]


@pytest.mark.django_db(transaction=True)
def test_log_batch_takes_1000_metrics_and_refuses_1001(tracking, project):
    # given a run
    client = MlflowClient()
    experiment_id = client.create_experiment("batch-limits")
    run_id = client.create_run(experiment_id, run_name="batch").info.run_id

    # when MlflowClient.log_batch sends MLflow's maximum, 1,000 metrics, with params and tags
    client.log_batch(
        run_id,
        metrics=[Metric("loss", 1.0 / (step + 1), TS_MS + step, step) for step in range(1000)],
        params=[Param("seed", "7")],
        tags=[RunTag("kind", "batch")],
    )

    # then all 1,000 points are stored under attempt 1, and read back by MLflow
    run = Run.objects.get(project=project, name="batch")
    stored = chronicle_points(run, "loss")
    assert len(stored) == 1000
    assert stored[999] == (1, 999, 1.0 / 1000)
    assert len(client.get_metric_history(run_id, "loss")) == 1000

    # when 1,001 metrics are sent in one request (the store, unlike MlflowClient, does not
    # split them)
    store = client._tracking_client.store
    with pytest.raises(MlflowException) as refused:
        store.log_batch(
            run_id,
            metrics=[Metric("too_many", 0.0, TS_MS, step) for step in range(1001)],
            params=[],
            tags=[],
        )
    # then MLflow's 400 INVALID_PARAMETER_VALUE comes back, and nothing of it is stored
    assert refused.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "at most 1000 metrics" in refused.value.message
    assert not MetricSeries.objects.filter(run=run, name="too_many").exists()


@pytest.mark.django_db(transaction=True)
def test_a_retried_log_batch_stores_nothing_twice(tracking, ingest_token, project):
    # given a run and one log-batch body
    client = MlflowClient()
    run_id = client.create_run("0", run_name="retry").info.run_id
    body = {
        "run_id": run_id,
        "metrics": [{"key": "loss", "value": 3.0, "timestamp": TS_MS, "step": 5}],
    }
    headers = {"Authorization": f"Bearer {ingest_token}"}
    url = f"{tracking}/api/2.0/mlflow/runs/log-batch"
    batches_before = IngestBatch.objects.count()

    # when the client sends it twice (a retry after a lost answer)
    first = requests.post(url, json=body, headers=headers, timeout=30)
    second = requests.post(url, json=body, headers=headers, timeout=30)

    # then both succeed and one batch, one point is stored
    assert (first.status_code, first.json()) == (200, {})
    assert (second.status_code, second.json()) == (200, {})
    assert IngestBatch.objects.count() == batches_before + 1
    batch = IngestBatch.objects.latest("received_at")
    assert batch.batch_id.startswith(f"mlflow:{run_id}:")
    assert batch.status == IngestBatch.Status.DONE and batch.metric_count == 1
    assert chronicle_points(Run.objects.get(project=project, name="retry"), "loss") == [(1, 5, 3.0)]


@pytest.mark.django_db(transaction=True)
def test_failed_run_opens_an_interruption_and_resume_is_a_new_attempt(tracking, project):
    # given a run that logs three steps, then fails
    mlflow.set_experiment("pretrain")
    with mlflow.start_run(run_name="resumable") as active:
        run_id = active.info.run_id
        for step in range(3):
            mlflow.log_metric("loss", 3.0 - step, step=step, timestamp=TS_MS + step)
    # (the context manager would say FINISHED; the job crashed instead)
    MlflowClient().set_terminated(run_id, status="FAILED")
    run = Run.objects.get(project=project, name="resumable")

    # then the failure is an interruption of attempt 1, which ended failed, at its last step
    interruption = Interruption.objects.get(run=run)
    assert interruption.attempt.number == 1
    assert "FAILED at step 2" in interruption.message
    assert interruption.step == 2
    assert Attempt.objects.get(run=run, number=1).status == Attempt.Status.FAILED
    # and auto-triage suggests like for any other incident: nothing explains it, so where to
    # look (the job's log around step 2)
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None and suggestion.root_cause.slug == "unknown"
    assert "job's own log" in suggestion.note
    assert (
        suggestion.evidence[0]["text"]
        == "MLflow set the run to FAILED at step 2 and gives no reason"
    )
    # and the MLflow experiment is the run's label, which the run list filters by
    assert "experiment=pretrain" in run.tags

    # when the job resumes the same MLflow run and logs on
    with mlflow.start_run(run_id=run_id):
        mlflow.log_metric("loss", 0.5, step=3, timestamp=TS_MS + 3)
        mlflow.log_metric("loss", 0.25, step=4, timestamp=TS_MS + 4)
        assert MlflowClient().get_run(run_id).info.status == "RUNNING"

    # then the resumed points went to attempt 2, which finished
    assert chronicle_points(run, "loss") == [
        (1, 0, 3.0),
        (1, 1, 2.0),
        (1, 2, 1.0),
        (2, 3, 0.5),
        (2, 4, 0.25),
    ]
    assert list(run.attempts.order_by("number").values_list("number", "status")) == [
        (1, Attempt.Status.FAILED),
        (2, Attempt.Status.COMPLETED),
    ]
    assert Interruption.objects.filter(run=run).count() == 1
    # and MLflow sees one run with the whole history
    history = MlflowClient().get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [
        (0, 3.0),
        (1, 2.0),
        (2, 1.0),
        (3, 0.5),
        (4, 0.25),
    ]
    assert MlflowRun.objects.get(run_uuid=run_id).attempt_number == 2


@pytest.mark.django_db(transaction=True)
def test_killed_run_opens_an_interruption_once(tracking, project):
    # given a running run
    client = MlflowClient()
    run_id = client.create_run("0", run_name="to-kill").info.run_id

    # when it is killed, and the client repeats the update
    client.set_terminated(run_id, status="KILLED")
    client.set_terminated(run_id, status="KILLED")

    # then one interruption, and attempt 1 ended killed
    run = Run.objects.get(project=project, name="to-kill")
    assert Interruption.objects.filter(run=run, attempt__number=1).count() == 1
    assert Attempt.objects.get(run=run, number=1).status == Attempt.Status.KILLED
    assert client.get_run(run_id).info.status == "KILLED"


@pytest.mark.django_db(transaction=True)
def test_a_changed_param_is_refused_and_the_same_value_is_fine(tracking):
    with mlflow.start_run(run_name="params") as active:
        mlflow.log_param("lr", "0.1")
        mlflow.log_param("lr", "0.1")  # re-logging the same value is allowed
        with pytest.raises(MlflowException) as refused:
            mlflow.log_param("lr", "0.2")
        assert refused.value.error_code == "INVALID_PARAMETER_VALUE"
        assert "Changing param values is not allowed" in refused.value.message
        assert MlflowRun.objects.get(run_uuid=active.info.run_id).params == {"lr": "0.1"}


@pytest.mark.django_db(transaction=True)
def test_run_name_comes_from_the_tag_and_names_stay_apart(tracking, project):
    # given Lightning's way: no run_name, only the mlflow.runName tag, in the Default
    # experiment "0" no one created
    client = MlflowClient()
    first = client.create_run("0", tags={"mlflow.runName": "pl-run", "owner": "me"})
    # when a second MLflow run takes the same name
    second = client.create_run("0", run_name="pl-run")

    # then both are called pl-run in MLflow, and are two Chronicle runs
    assert first.info.run_name == second.info.run_name == "pl-run"
    assert client.get_run(first.info.run_id).data.tags["owner"] == "me"
    assert MlflowRun.objects.get(run_uuid=first.info.run_id).run.name == "pl-run"
    assert (
        MlflowRun.objects.get(run_uuid=second.info.run_id).run.name
        == f"pl-run-{second.info.run_id[:8]}"
    )
    assert client.get_experiment("0").name == "Default"
    assert client.get_experiment_by_name("Default").experiment_id == "0"


@pytest.mark.django_db(transaction=True)
def test_set_experiment_twice_reuses_the_experiment(tracking, project):
    first = mlflow.set_experiment("shared")
    second = mlflow.set_experiment("shared")
    assert first.experiment_id == second.experiment_id
    assert MlflowExperiment.objects.filter(project=project, name="shared").count() == 1
    with pytest.raises(MlflowException) as exists:
        MlflowClient().create_experiment("shared")
    assert exists.value.error_code == "RESOURCE_ALREADY_EXISTS"


@pytest.mark.django_db(transaction=True)
def test_unknown_endpoints_answer_a_json_404(tracking, ingest_token):
    headers = {"Authorization": f"Bearer {ingest_token}"}
    for method, path in [
        ("GET", "/api/2.0/mlflow/runs/search"),
        ("POST", "/api/2.0/mlflow/runs/delete"),
        ("PUT", "/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts/model.pt"),
        ("GET", "/api/3.0/mlflow/traces/tr-1"),
        ("GET", "/api/2.0/mlflow/runs/create"),  # a known path, wrong method
    ]:
        response = requests.request(method, f"{tracking}{path}", headers=headers, timeout=30)
        assert response.status_code == 404, path
        assert response.headers["Content-Type"].startswith("application/json"), path
        assert response.json()["error_code"] == "ENDPOINT_NOT_FOUND", path
    # and an artifact upload (unsupported) fails loudly instead of writing to local disk
    with mlflow.start_run(run_name="artifacts"), pytest.raises(requests.HTTPError) as failed:
        mlflow.log_text("hello", "notes.txt")
    assert "ENDPOINT_NOT_FOUND" in str(failed.value)


@pytest.mark.django_db(transaction=True)
def test_a_wrong_token_is_401_in_mlflow_shape(tracking, monkeypatch):
    # when the client sends an unknown token
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "chr_not-a-real-token")
    with pytest.raises(MlflowException) as refused:
        mlflow.set_experiment("nope")
    # then MLflow's UNAUTHENTICATED comes back
    assert refused.value.error_code == "UNAUTHENTICATED"
    # and on the wire: 401 with {"error_code", "message"}, with a token or none at all
    url = f"{tracking}/api/2.0/mlflow/experiments/get-by-name"
    for headers in ({"Authorization": "Bearer chr_wrong"}, {}, {"Authorization": "Token x"}):
        response = requests.get(url, params={"experiment_name": "x"}, headers=headers, timeout=30)
        assert response.status_code == 401
        body = response.json()
        assert body["error_code"] == "UNAUTHENTICATED" and body["message"]
    assert not MlflowExperiment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_basic_auth_with_the_token_as_password(tracking, ingest_token, monkeypatch, project):
    # given only MLFLOW_TRACKING_USERNAME / _PASSWORD (the client sends Basic)
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "trainer")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ingest_token)
    # when the job logs
    mlflow.set_experiment("basic")
    with mlflow.start_run(run_name="basic-auth"):
        mlflow.log_metric("loss", 1.5, step=0, timestamp=TS_MS)
    # then it is stored
    assert chronicle_points(Run.objects.get(project=project, name="basic-auth"), "loss") == [
        (1, 0, 1.5)
    ]
    # and a wrong password is refused
    wrong = base64.b64encode(b"trainer:chr_wrong").decode()
    response = requests.get(
        f"{tracking}/api/2.0/mlflow/experiments/get",
        params={"experiment_id": "0"},
        headers={"Authorization": f"Basic {wrong}"},
        timeout=30,
    )
    assert response.status_code == 401
    assert response.json()["error_code"] == "UNAUTHENTICATED"


@pytest.mark.django_db(transaction=True)
def test_another_projects_token_sees_nothing(tracking, other_project, project):
    # given a run and experiment of the project
    client = MlflowClient()
    experiment_id = client.create_experiment("private")
    run_id = client.create_run(experiment_id, run_name="private-run").info.run_id
    _, outsider = ingest_services.token_create(project=other_project, name="outsider")
    headers = {"Authorization": f"Bearer {outsider}"}
    # when another project's token reads or writes them
    reads = [
        ("experiments/get", {"experiment_id": experiment_id}),
        ("experiments/get-by-name", {"experiment_name": "private"}),
        ("runs/get", {"run_id": run_id}),
        ("metrics/get-history", {"run_id": run_id, "metric_key": "loss"}),
    ]
    for path, params in reads:
        response = requests.get(f"{tracking}/api/2.0/mlflow/{path}", params=params,
                                headers=headers, timeout=30)  # fmt: skip
        # then they do not exist for it
        assert response.status_code == 404, path
        assert response.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST", path
    write = requests.post(
        f"{tracking}/api/2.0/mlflow/runs/log-metric",
        json={"run_id": run_id, "key": "loss", "value": 1.0, "timestamp": TS_MS, "step": 0},
        headers=headers,
        timeout=30,
    )
    assert write.status_code == 404
    assert not MetricSeries.objects.filter(run__name="private-run").exists()


@pytest.mark.django_db(transaction=True)
def test_invalid_metrics_are_400_in_mlflow_shape(tracking, ingest_token):
    client = MlflowClient()
    run_id = client.create_run("0", run_name="bad-input").info.run_id
    headers = {"Authorization": f"Bearer {ingest_token}"}
    url = f"{tracking}/api/2.0/mlflow/runs/log-metric"
    for body in [
        {"run_id": run_id, "key": "loss", "value": "abc", "timestamp": TS_MS},
        {"run_id": run_id, "key": "loss", "value": 1.0},  # no timestamp
        {"run_id": run_id, "key": "../etc", "value": 1.0, "timestamp": TS_MS},
        {"run_id": run_id, "key": "loss", "value": 1.0, "timestamp": TS_MS, "step": -1},
    ]:
        response = requests.post(url, json=body, headers=headers, timeout=30)
        assert response.status_code == 400, body
        assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE", body
    missing = requests.post(
        url,
        json={"run_id": "0" * 32, "key": "loss", "value": 1.0, "timestamp": TS_MS},
        headers=headers,
        timeout=30,
    )
    assert (missing.status_code, missing.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")


@pytest.mark.django_db(transaction=True)
def test_log_batch_refuses_deep_nesting_wherever_it_is(tracking, ingest_token):
    # log-batch skips the whole-body depth walk for its metrics (the common shape holds only
    # scalars where it is read): nesting anywhere else, or in a metric not of that shape,
    # must still be a 400 that says so, never a 500.
    client = MlflowClient()
    run_id = client.create_run("0", run_name="deep-input").info.run_id
    headers = {"Authorization": f"Bearer {ingest_token}", "Content-Type": "application/json"}
    url = f"{tracking}/api/2.0/mlflow/runs/log-batch"
    deep = "[" * 900 + "]" * 900
    metric = f'{{"key": "loss", "value": 1.0, "timestamp": {TS_MS}, "step": 1}}'
    deep_metric = f'{{"key": "loss", "value": {deep}, "timestamp": {TS_MS}}}'
    start = f'{{"run_id": "{run_id}", "metrics": [{metric}'
    for body in [
        f'{start}], "params": [{{"key": "a", "value": {deep}}}]}}',
        f"{start}, {deep_metric}]}}",
        f"{start}, {deep}]}}",
    ]:
        response = requests.post(url, data=body.encode(), headers=headers, timeout=30)
        assert response.status_code == 400, body[:80]
        assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
        assert "deep" in response.json()["message"], response.json()
    # and the common shape still goes in
    ok = f'{{"run_id": "{run_id}", "metrics": [{metric}]}}'
    assert requests.post(url, data=ok.encode(), headers=headers, timeout=30).status_code == 200
