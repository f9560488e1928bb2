"""Caps on series per run and runs per project: refused with a 422 naming the cap and its
setting when the batch arrives, on the at-once and the worker path, and in MLflow's shape."""

from __future__ import annotations

from typing import Any

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ingest.models import IngestBatch
from telemetry.models import MetricSeries, Run


def batch(batch_id: str, run: str, names: list[str], **fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "batch_id": batch_id,
        "run": run,
        "attempt": 1,
        "metrics": [{"name": name, "step": 0, "value": 1.0} for name in names],
    }
    document.update(fields)
    return document


@pytest.mark.django_db
def test_series_past_the_cap_are_refused_at_once_naming_the_setting(post_batch, settings):
    settings.INGEST_MAX_SERIES_PER_RUN = 3
    assert post_batch(batch("a", "r", ["loss", "lr"])).status_code == 202

    # known names never count again; one new name still fits
    assert post_batch(batch("b", "r", ["loss", "lr", "acc"])).status_code == 202
    refused = post_batch(batch("c", "r", ["loss", "grad_norm"]))

    assert refused.status_code == 422
    assert "INGEST_MAX_SERIES_PER_RUN" in refused.json()["detail"]
    assert "maximum of 3 series" in refused.json()["detail"]
    assert not IngestBatch.objects.filter(batch_id="c").exists()
    assert set(MetricSeries.objects.values_list("name", flat=True)) == {"loss", "lr", "acc"}
    # another run has its own allowance
    assert post_batch(batch("d", "other", ["grad_norm"])).status_code == 202


@pytest.mark.django_db
def test_worker_path_batch_past_the_series_cap_is_refused_before_its_202(post_batch, settings):
    # events send a batch to the worker: the cap is checked when it arrives, never later
    settings.INGEST_MAX_SERIES_PER_RUN = 1
    event = {"type": "checkpoint_saved", "time": 1_763_700_000, "step": 0}

    refused = post_batch(batch("w", "r", ["loss", "lr"], events=[event]))

    assert refused.status_code == 422
    assert "INGEST_MAX_SERIES_PER_RUN" in refused.json()["detail"]
    assert not IngestBatch.objects.exists()


@pytest.mark.django_db
def test_a_new_run_past_the_runs_cap_is_refused_and_existing_runs_still_take_data(
    post_batch, settings
):
    settings.INGEST_MAX_RUNS_PER_PROJECT = 2
    assert post_batch(batch("1", "r1", ["loss"])).status_code == 202
    assert post_batch(batch("2", "r2", ["loss"])).status_code == 202

    refused = post_batch(batch("3", "r3", ["loss"]))

    assert refused.status_code == 422
    assert "INGEST_MAX_RUNS_PER_PROJECT" in refused.json()["detail"]
    assert "maximum of 2 runs" in refused.json()["detail"]
    assert not Run.objects.filter(name="r3").exists()
    assert post_batch(batch("4", "r1", ["lr"])).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_mlflow_api_refuses_past_the_caps_in_mlflows_error_shape(tracking_caps, settings):
    settings.INGEST_MAX_SERIES_PER_RUN = 1
    settings.INGEST_MAX_RUNS_PER_PROJECT = 1
    client = MlflowClient()
    experiment = client.create_experiment("caps")
    run_id = client.create_run(experiment).info.run_id
    client.log_metric(run_id, "loss", 1.0, step=0)

    with pytest.raises(MlflowException) as series:
        client.log_metric(run_id, "lr", 1.0, step=0)
    with pytest.raises(MlflowException) as runs:
        client.create_run(experiment)

    assert series.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "INGEST_MAX_SERIES_PER_RUN" in series.value.message
    assert runs.value.error_code == "INVALID_PARAMETER_VALUE"
    assert "INGEST_MAX_RUNS_PER_PROJECT" in runs.value.message
    assert Run.objects.count() == 1


@pytest.fixture
def tracking_caps(mlflow_tracking: str) -> str:
    return mlflow_tracking


@pytest.mark.django_db
def test_a_known_runs_batch_checks_its_caps_in_one_query(project, query_budget):
    from ingest.caps import batch_caps_check
    from ingest.schema import validate_batch
    from telemetry import services as telemetry_services

    costs: dict[str, list[int]] = {"new": [], "steady": []}
    for size in (1, 20):
        # given a run that already holds `size` of the batch's series
        name = f"r{size}"
        known = [f"m{index}" for index in range(size)]
        run = telemetry_services.run_upsert(project=project, name=name)
        attempt = telemetry_services.attempt_ensure(run=run, number=1)
        telemetry_services.series_ensure(run=run, attempt=attempt, names=known)
        batch_in = validate_batch(
            batch(f"k{size}", name, [*known, "lr"]), max_metrics=50, max_events=10
        )
        steady = validate_batch(batch(f"s{size}", name, known), max_metrics=50, max_events=10)
        # when its caps are checked: the known names (and so the run), and the count for
        # the new "lr"; a batch of known series only, the names alone
        costs["new"].append(
            query_budget.count(
                lambda b=batch_in: batch_caps_check(project_id=project.pk, batch_in=b)
            )
        )
        costs["steady"].append(
            query_budget.count(lambda b=steady: batch_caps_check(project_id=project.pk, batch_in=b))
        )
    # then both cost the same queries (constant in the run's series), the steady one fewer
    for kind, (small, big) in costs.items():
        query_budget.constant(small=small, big=big, guards=f"the series ({kind} batch)")
    assert costs["steady"][0] < costs["new"][0]
