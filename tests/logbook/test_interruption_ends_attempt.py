"""An interruption ends the attempt it hit, unless the job's own attempt_ended got there
first, even when the two are written by concurrent worker transactions."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from logbook.services.interruptions import interruption_record
from telemetry import services as telemetry_services
from telemetry.models import Attempt

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_an_interruption_ends_a_running_attempt(run: Any) -> None:
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)

    interruption_record(
        run=run, source_key="x", occurred_at=T0 + timedelta(hours=1), attempt=attempt,
        category="Faulty GPU",
    )  # fmt: skip

    attempt.refresh_from_db()
    assert attempt.status == Attempt.Status.FAILED
    assert attempt.end_reason.startswith("Interrupted: ")


@pytest.mark.django_db(transaction=True)
def test_the_jobs_own_end_wins_over_a_concurrent_interruption(run: Any) -> None:
    # given an attempt whose job reports its own end in a transaction still open
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    ended = T0 + timedelta(hours=1)
    locked, release = threading.Event(), threading.Event()

    def job_reports_its_end() -> None:
        try:
            with transaction.atomic():
                telemetry_services.attempt_end(
                    attempt=Attempt.objects.get(pk=attempt.pk), status="failed",
                    ended_at=ended, reason="RuntimeError: boom",
                )  # fmt: skip
                locked.set()
                release.wait(timeout=10)
        finally:
            connection.close()

    job = threading.Thread(target=job_reports_its_end)
    job.start()
    assert locked.wait(timeout=10)

    # when an interruption for the same attempt is recorded meanwhile (it waits on the row)
    recorder = threading.Thread(
        target=lambda: (
            interruption_record(
                run=run, source_key="crash", occurred_at=ended, attempt=attempt,
                category="Faulty GPU",
            ),
            connection.close(),
        )
    )  # fmt: skip
    recorder.start()
    recorder.join(timeout=1)
    assert recorder.is_alive(), "the interruption should wait for the job's transaction"
    release.set()
    job.join(timeout=10)
    recorder.join(timeout=10)

    # then the job's own reason stands
    attempt.refresh_from_db()
    assert (attempt.status, attempt.end_reason) == ("failed", "RuntimeError: boom")
