"""Failure rates of a run sent after the fact (a backfill): the Llama 3 54-day stream, with
times in 2024, posted through ingest today. Rates count the time the data covers (attempt
ends, the latest event or point time), never when the server received it; liveness keeps
the receive time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ingest.models import IngestBatch
from telemetry.models import Run

START = datetime(2024, 3, 1, tzinfo=UTC)
DAYS = 54
UNEXPECTED = 419
PLANNED = 47
ATTEMPTS = UNEXPECTED + PLANNED + 1  # every interruption starts a new attempt
PER_BATCH = 100  # attempts per batch


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _stream() -> tuple[list[dict[str, Any]], datetime]:
    """The batches of the stream, and the last time its data carries."""
    gap = timedelta(days=DAYS) / ATTEMPTS
    planned_every = ATTEMPTS // PLANNED
    events: list[tuple[int, dict[str, Any]]] = []
    metrics: list[tuple[int, dict[str, Any]]] = []
    planned = 0
    for number in range(1, ATTEMPTS + 1):
        started = START + gap * (number - 1)
        events.append(
            (number, {"type": "attempt_started", "attempt": number, "time": _iso(started)})
        )
        step = number * 100
        metrics.append(
            (number, {"name": "loss", "step": step, "value": 2.0, "time": started.timestamp() + 60})
        )
        if number == ATTEMPTS:
            break  # the last attempt is still running when the stream ends
        is_planned = planned < PLANNED and number % planned_every == 0
        planned += is_planned
        events.append(
            (
                number,
                {
                    "type": "interruption",
                    "attempt": number,
                    "id": f"i{number}",
                    "time": _iso(started + gap - timedelta(minutes=5)),
                    "category": "planned-maintenance" if is_planned else "faulty-gpu",
                    "planned": is_planned,
                },
            )
        )
    last = START + gap * (ATTEMPTS - 1) + timedelta(days=0, seconds=60)
    batches = []
    for first in range(1, ATTEMPTS + 1, PER_BATCH):
        chunk = range(first, first + PER_BATCH)
        batches.append(
            {
                "batch_id": f"backfill-{first}",
                "run": "llama3-backfill",
                "run_info": {"accelerator_type": "H100-SXM", "accelerator_count": 16_384},
                "events": [e for n, e in events if n in chunk],
                "metrics": [m for n, m in metrics if n in chunk],
            }
        )
    assert planned == PLANNED
    return batches, last


@pytest.mark.django_db
def test_backfilled_run_mtbf_counts_the_days_its_data_covers(
    post_batch, process_batch, client, alice
):
    # given the 54-day stream with times in 2024, sent through ingest today
    batches, last_data = _stream()
    for document in batches:
        response = post_batch(document)
        assert response.status_code == 202, response.content
        process_batch(IngestBatch.objects.get(batch_id=document["batch_id"]).pk)
    run = Run.objects.get(name="llama3-backfill")
    client.force_login(alice)

    # when
    rates = client.get("/api/v1/failures", {"run": run.pk}).json()["rates"]

    # then observed time is first attempt start to the last time in the data: 54 days, not
    # the ~2 years to the day it was received, and MTBF is that over the 419 unexpected
    observed_h = (last_data - START).total_seconds() / 3600
    assert observed_h == pytest.approx(DAYS * 24, rel=0.01)
    assert rates["job_mtbf_h"]["inputs"]["unexpected"] == UNEXPECTED
    assert rates["observed_days"]["value"] == pytest.approx(observed_h / 24)
    assert rates["job_mtbf_h"]["value"] == pytest.approx(observed_h / UNEXPECTED)
    assert rates["job_mtbf_h"]["value"] == pytest.approx(3.09, abs=0.01)
    assert rates["failure_rate_per_1000_accelerator_days"]["value"] == pytest.approx(
        1000 * UNEXPECTED / (16_384 * observed_h / 24)
    )
    # liveness keeps the receive time: the run was last seen today
    assert run.last_seen_at > datetime.now(UTC) - timedelta(hours=1)
    assert run.data_until == last_data

    # and the checkpoint advisor's MTBF is the same number
    advisor = client.get(f"/api/v1/runs/{run.pk}/checkpoints").json()
    assert advisor["advisor"]["mtbf_s"]["value"] == pytest.approx(observed_h * 3600 / UNEXPECTED)
