"""A web process remembers the run, attempt and series its batches resolve (ingest.batch_ids),
so a live run's next batches skip those lookups; a row deleted since, another project's run
of the same name, a new attempt or metric, and run_info are all still handled as before.

Transactional: what a batch resolved is remembered only once its transaction commits."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import batch_ids
from telemetry.models import Attempt, MetricPoint, MetricSeries, Run

pytestmark = pytest.mark.django_db(transaction=True)


def doc(batch_id: str, first: int, *, attempt: int = 1, names=("loss",), **fields: Any):
    return {
        "batch_id": batch_id,
        "run": "cached",
        "attempt": attempt,
        "metrics": [
            {"name": name, "step": step, "value": float(step)}
            for name in names
            for step in range(first, first + 3)
        ],
        **fields,
    }


def orphan_points() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM telemetry_metricpoint p WHERE NOT EXISTS "
            "(SELECT 1 FROM telemetry_metricseries s WHERE s.id = p.series_id)"
        )
        return cursor.fetchone()[0]


def test_a_live_runs_next_batch_skips_the_lookups(post_batch, project):
    # given a first batch, which looks the run, attempt and series up and creates them
    with CaptureQueriesContext(connection) as first:
        assert post_batch(doc("b-1", 0)).status_code == 202
    remembered = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1)
    assert remembered is not None and set(remembered.series) == {"loss"}

    # when the next one comes
    with CaptureQueriesContext(connection) as second:
        assert post_batch(doc("b-2", 3)).status_code == 202

    # then it reads neither the run, the attempt nor the series, nor counts them for a cap
    def reads(captured: CaptureQueriesContext) -> list[str]:
        return [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"].startswith("SELECT")
            and any(f'FROM "telemetry_{t}"' in q["sql"] for t in ("run", "attempt", "metricseries"))
        ]

    assert reads(first) and not reads(second)
    assert not any(
        "SELECT name FROM telemetry_metricseries" in q["sql"] for q in second.captured_queries
    )
    series = MetricSeries.objects.get(run__name="cached", name="loss")
    assert sorted(series.points.values_list("step", flat=True)) == list(range(6))


def test_a_remembered_series_deleted_between_two_batches(post_batch, project):
    # given a batch remembered, then its series deleted (as the admin does, points first)
    assert post_batch(doc("b-1", 0)).status_code == 202
    old = MetricSeries.objects.get(run__name="cached", name="loss")
    old.delete()

    # when the next batch names it
    response = post_batch(doc("b-2", 3))

    # then it is stored under a series looked up (created) afresh, and nothing is orphaned
    assert response.status_code == 202, response.content
    new = MetricSeries.objects.get(run__name="cached", name="loss")
    assert new.pk != old.pk
    assert sorted(new.points.values_list("step", flat=True)) == [3, 4, 5]
    assert orphan_points() == 0
    remembered = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1)
    assert remembered is not None and remembered.series == {"loss": new.pk}


def test_a_remembered_run_deleted_between_two_batches(post_batch):
    # given a batch remembered, then its whole run deleted
    assert post_batch(doc("b-1", 0)).status_code == 202
    Run.objects.filter(name="cached").delete()

    # when the next batch names it and its metric
    response = post_batch(doc("b-2", 3))

    # then the run, its attempt and series are created again, with the batch's points
    assert response.status_code == 202, response.content
    run = Run.objects.get(name="cached")
    assert run.attempts.get().number == 1
    assert MetricPoint.objects.filter(series__run=run).count() == 3
    assert orphan_points() == 0


def test_a_remembered_attempt_deleted_before_a_batch_of_new_names(post_batch):
    # given a batch remembered, then its attempt deleted
    assert post_batch(doc("b-1", 0)).status_code == 202
    Attempt.objects.filter(run__name="cached").delete()

    # when the next batch names a metric the attempt never had
    response = post_batch(doc("b-2", 3, names=("loss", "grad_norm")))

    # then the attempt and both series are created again (a new name is always looked up)
    assert response.status_code == 202, response.content
    attempt = Attempt.objects.get(run__name="cached")
    assert sorted(attempt.series.values_list("name", flat=True)) == ["grad_norm", "loss"]
    assert MetricPoint.objects.filter(series__attempt=attempt).count() == 6
    assert orphan_points() == 0


def test_metrics_named_in_turn_are_all_remembered(post_batch, project):
    assert post_batch(doc("b-1", 0, names=("loss",))).status_code == 202
    assert post_batch(doc("b-2", 0, names=("eval_loss",))).status_code == 202

    remembered = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1)

    assert remembered is not None and set(remembered.series) == {"loss", "eval_loss"}


def test_two_runs_of_one_name_in_two_projects(client, project, other_project):
    from ingest import services

    tokens = {p.pk: services.token_create(project=p, name="t")[1] for p in (project, other_project)}

    def post(project_id: int, document: dict[str, Any]) -> int:
        return client.post(
            "/api/v1/ingest",
            data=document,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {tokens[project_id]}",
        ).status_code

    # when both projects send two batches of a run named alike, alternating
    answers = [
        post(p.pk, doc(f"b-{first}", first)) for first in (0, 3) for p in (project, other_project)
    ]

    # then each project's run holds its own six points
    assert answers == [202] * 4
    for p in (project, other_project):
        run = Run.objects.get(project=p, name="cached")
        assert MetricPoint.objects.filter(series__run=run).count() == 6
        remembered = batch_ids.batch_ids_get(project_id=p.pk, run_name="cached", number=1)
        assert remembered is not None and remembered.run.pk == run.pk


def test_a_new_attempt_number_is_created_with_its_version_bump(post_batch):
    assert post_batch(doc("b-1", 0)).status_code == 202
    assert post_batch(doc("b-2", 3)).status_code == 202
    before = Run.objects.get(name="cached").data_version

    # when a batch names attempt 2
    assert post_batch(doc("b-3", 6, attempt=2)).status_code == 202

    # then attempt 2 exists with its own series and points, and the run's version moved
    run = Run.objects.get(name="cached")
    second = run.attempts.get(number=2)
    assert MetricPoint.objects.filter(series__attempt=second).count() == 3
    assert MetricPoint.objects.filter(series__attempt__number=1).count() == 6
    assert run.data_version > before


def test_a_new_name_in_a_remembered_attempt_meets_the_series_cap(post_batch, settings):
    settings.INGEST_MAX_SERIES_PER_RUN = 1
    assert post_batch(doc("b-1", 0)).status_code == 202

    refused = post_batch(doc("b-2", 3, names=("loss", "grad_norm")))

    assert refused.status_code == 422
    assert "INGEST_MAX_SERIES_PER_RUN" in refused.json()["detail"]
    assert post_batch(doc("b-3", 3)).status_code == 202


def test_run_info_is_applied_though_the_run_is_remembered(post_batch, project):
    assert post_batch(doc("b-1", 0)).status_code == 202

    response = post_batch(doc("b-2", 3, run_info={"accelerator_count": 64}))

    assert response.status_code == 202
    assert Run.objects.get(name="cached").accelerator_count == 64
    remembered = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1)
    assert remembered is not None and remembered.run.accelerator_count == 64


def test_the_memory_is_bounded(post_batch, project, monkeypatch):
    monkeypatch.setattr(batch_ids, "MAX_ENTRIES", 2)

    for number in (1, 2, 3):
        assert post_batch(doc(f"b-{number}", 0, attempt=number)).status_code == 202

    def remembered(number: int) -> bool:
        found = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=number)
        return found is not None

    assert [remembered(n) for n in (1, 2, 3)] == [False, True, True]


def test_an_entry_is_read_again_after_its_ttl(post_batch, project, monkeypatch):
    # given a remembered run whose deterministic metrics another process changed since
    assert post_batch(doc("b-1", 0)).status_code == 202
    Run.objects.filter(name="cached").update(deterministic_metrics=["grad_norm"])

    # when its entry is older than TTL_S
    later = batch_ids.monotonic() + batch_ids.TTL_S + 1
    monkeypatch.setattr(batch_ids, "monotonic", lambda: later)

    # then it is not used, and the next batch reads the run (and its new list) again
    assert batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1) is None
    assert post_batch(doc("b-2", 3)).status_code == 202
    remembered = batch_ids.batch_ids_get(project_id=project.pk, run_name="cached", number=1)
    assert remembered is not None and remembered.run.deterministic_metrics == ["grad_norm"]
