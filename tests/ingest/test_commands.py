"""The management commands: load_demo (the demo behind `make demo`) and create_ingest_token."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from demo.batches import DEMO_AGE, RUN, demo_batches
from demo.fleet import eval_job_batches
from demo.triage_history import HISTORY_RUN, triage_history
from ingest.models import IngestBatch, IngestToken
from logbook.models import (
    Checkpoint,
    Interruption,
    LogbookEntry,
    SdcReplay,
    TriageClassifier,
    TriageSuggestion,
)
from telemetry.models import Attempt, MetricPoint, Run


def _run_command(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_demo_loader_stores_the_whole_demo_and_prints_a_working_token(demo_data, client):
    # given the documents the demo is made of, from where its load put it (six days ago)
    start = Attempt.objects.get(run__project__slug="demo", run__name=RUN, number=1).started_at
    assert DEMO_AGE <= timezone.now() - start < DEMO_AGE + timedelta(days=1, hours=1)
    documents = demo_batches(start=start)
    sent_points = sum(len(d.get("metrics", [])) for d in documents)
    sent_interruptions = [
        e for d in documents for e in d.get("events", []) if e["type"] == "interruption"
    ]

    # when the loader has run (the suite loads it once for the tests that read it)
    output = demo_data

    # then every batch went through ingest and was processed
    # (and the fleet's evaluation jobs around it, demo.fleet)
    assert IngestBatch.objects.filter(status="done").count() == len(documents) + len(
        eval_job_batches()
    )
    run = Run.objects.get(project__slug="demo", name="demo-70b-pretrain")
    # steps repeated after a restart are kept per attempt, so nothing is deduplicated away
    assert MetricPoint.objects.filter(series__run=run).count() == sent_points
    assert Attempt.objects.filter(run=run).count() >= 5
    assert Interruption.objects.filter(run=run).count() == len(sent_interruptions)
    categories = set(
        Interruption.objects.filter(run=run).values_list("root_cause__slug", flat=True)
    )
    assert {"faulty-gpu", "gpu-hbm3-memory", "planned-maintenance"} <= categories
    assert "unknown" not in categories
    assert Checkpoint.objects.filter(run=run).count() >= 10
    assert Checkpoint.objects.filter(run=run, restored_count__gte=1).exists()
    assert SdcReplay.objects.filter(run=run).exists()
    assert LogbookEntry.objects.filter(run=run).exists()
    nan_points = [
        v for v in MetricPoint.objects.filter(series__name="loss").values_list("value", flat=True)
    ]
    assert any(math.isnan(v) for v in nan_points)
    # a run of days ago loaded now: last seen when its data ends, not at the load (which
    # would stretch its goodput's elapsed time and observed hours to today)
    data_times = [datetime.fromisoformat(e["time"]) for d in documents for e in d.get("events", [])]
    run.refresh_from_db()
    assert run.last_seen_at == max(data_times)

    # and the token on the last line works for ingest
    token = output.strip().splitlines()[-1]
    response = client.post(
        "/api/v1/ingest",
        data=json.dumps({"batch_id": "after-demo", "run": "demo-70b-pretrain", "metrics": []}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 202
    # and the demo login works
    assert client.login(username="demo", password="chronicle-demo")
    assert client.get(f"/runs/{run.pk}/").status_code == 200


@pytest.mark.django_db
def test_demo_history_trains_the_classifier_and_its_vote_shows_on_the_open_incident(
    demo_data,
):
    # given the demo (the fleet's earlier run, its incidents triaged by the demo on-call)
    history = Run.objects.get(project__slug="demo", name=HISTORY_RUN)
    triaged = Interruption.objects.filter(run=history, triaged_at__isnull=False)
    assert triaged.count() == len(triage_history(hosts=["h"], end=datetime.now(UTC))) - 1
    # and that run is over: its attempt completed, last seen at its last incident
    last = Interruption.objects.filter(run=history).order_by("-occurred_at").first()
    assert list(history.attempts.values_list("status", flat=True)) == ["completed"]
    assert last is not None and history.last_seen_at == last.occurred_at
    # then the project's classifier is trained, with its cross-validated accuracy
    classifier = TriageClassifier.objects.get(project__slug="demo")
    assert classifier.model is not None and "nic" in classifier.model["classes"]
    assert classifier.cv_total and classifier.cv_right / classifier.cv_total >= 0.7
    # and the open timeout on rail mlx5_4 is suggested as NIC, with the vote as evidence
    suggestion = TriageSuggestion.objects.get(
        interruption__run=history, interruption__status="open"
    )
    assert suggestion.root_cause.slug == "nic"
    [line] = [item for item in suggestion.evidence if item["kind"] == "classifier"]
    assert "confirmed incidents with similar messages were NIC" in line["text"]


@pytest.mark.django_db
def test_demo_loader_twice_stores_nothing_twice(demo_data):
    # given the demo, loaded once
    points = MetricPoint.objects.count()

    output = _run_command("load_demo")

    assert MetricPoint.objects.count() == points
    assert "0 new batch(es)" in output
    # the loader's own token is revoked; only the printed ones stay usable
    assert IngestToken.objects.filter(name="demo-loader", revoked_at__isnull=True).count() == 0


@pytest.mark.django_db
def test_create_ingest_token_prints_the_token_last_and_stores_only_its_hash(project):
    output = _run_command("create_ingest_token", project.slug, "--name", "trainer")

    plaintext = output.strip().splitlines()[-1]
    token = IngestToken.objects.get(name="trainer")
    assert plaintext.startswith("chr_") and len(plaintext) > 40
    assert plaintext not in {token.key_hash, token.prefix}
    assert token.project == project


@pytest.mark.django_db
def test_create_ingest_token_for_an_unknown_project_says_so():
    with pytest.raises(CommandError, match="No project 'nope'"):
        _run_command("create_ingest_token", "nope")

    output = _run_command("create_ingest_token", "nope", "--create-project")
    assert output.strip().splitlines()[-1].startswith("chr_")


def test_the_demo_load_processes_a_batch_again_after_a_deadlock(monkeypatch):
    from django.db import OperationalError
    from psycopg import errors

    from ingest import services
    from ingest.management.commands import load_demo

    # given a batch whose processing deadlocks once with the worker's task (rolled back)
    calls: list[int] = []

    def deadlocking(*, batch_pk: int) -> str:
        calls.append(batch_pk)
        if len(calls) == 1:
            raise OperationalError("deadlock detected") from errors.DeadlockDetected()
        return "done"

    monkeypatch.setattr(services, "batch_process", deadlocking)

    # when the demo load processes it, it runs it again
    load_demo.batch_processed(batch_pk=7)
    assert calls == [7, 7]

    # and an error that a second run would not mend is raised at once
    def broken(*, batch_pk: int) -> str:
        calls.append(batch_pk)
        raise OperationalError("connection refused")

    monkeypatch.setattr(services, "batch_process", broken)
    with pytest.raises(OperationalError):
        load_demo.batch_processed(batch_pk=8)
    assert calls == [7, 7, 8]
