"""The rank_timings event: validation, storage in the partitioned raw table, the per-step
distributions and per-bucket means that outlive it, and the partitions' upkeep."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from ingest import schema, services
from ingest.models import IngestBatch
from telemetry.models import RankBucket, RankPlacement, RankStepStats, Run
from telemetry.services import rank_timings


def timings_event(
    step: int, times: dict[str, list[float]], *, ranks: list[int] | None = None, **extra: Any
) -> dict[str, Any]:
    count = len(next(iter(times.values())))
    return {
        "type": "rank_timings",
        "time": extra.pop("time", timezone.now().timestamp()),
        "first_step": step,
        "ranks": ranks if ranks is not None else list(range(count)),
        "sections": times,
        **extra,
    }


def batch(batch_id: str, *events: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    return {"batch_id": batch_id, "run": "ranks", "attempt": attempt, "events": list(events)}


def errors_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(schema.BatchError) as caught:
        schema.validate_batch(document, max_metrics=10, max_events=10)
    assert caught.value.status == 400
    return [error["message"] for error in caught.value.errors]


def test_lists_that_do_not_line_up_with_ranks_are_a_400_naming_them() -> None:
    event = timings_event(7, {"step": [1.0, 1.1], "forward": [0.5]}, hosts=["h0"])
    assert errors_of(batch("b", event)) == [
        "events[0].hosts: has 1 items but ranks has 2; they must match",
        "events[0].sections['forward']: has 1 items but ranks has 2; they must match",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ranks": [0, 0]}, "events[0].ranks: must not repeat a rank"),
        ({"ranks": [0, -1]}, "events[0].ranks: item 1 must be >= 0, got -1"),
        (
            {"sections": {"step": [1.0, -2]}},
            "events[0].sections: ['step'][1] must be a finite number >= 0, got -2",
        ),
        ({"sections": {}}, "events[0].sections: must be an object of section name to a list"),
        ({"last_step": 6}, "events[0].last_step: must not be before first_step"),
    ],
)
def test_bad_rank_timings_are_a_400_saying_where(change: dict[str, Any], message: str) -> None:
    event = {**timings_event(7, {"step": [1.0, 1.1]}), **change}
    assert errors_of(batch("b", event))[0].startswith(message)


@pytest.fixture
def token(project: Any) -> Any:
    row, _ = services.token_create(project=project, name="ranks")
    return row


def process(token: Any, document: dict[str, Any]) -> IngestBatch:
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    services.batch_process(batch_pk=acceptance.batch.pk)
    acceptance.batch.refresh_from_db()
    return acceptance.batch


def raw_rows(attempt_id: int) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT section, first_step, ranks, values_s FROM telemetry_ranktiming_raw"
            " WHERE attempt_id = %s ORDER BY first_step, section",
            [attempt_id],
        )
        return cursor.fetchall()


@pytest.mark.django_db
def test_gathered_timings_are_stored_once_with_each_ranks_host(token: Any) -> None:
    # given: rank 0 gathers four ranks' sections for step 10
    event = timings_event(
        10,
        {"step": [1.0, 1.0, 1.5, 1.0], "forward": [0.4, 0.4, 0.6, 0.4]},
        hosts=["h0", "h0", "h1", "h1"],
        devices=["GPU-a", "GPU-b", "GPU-c", "GPU-d"],
    )
    document = batch("timings-10", event)
    # when: it arrives twice (a client retry)
    first = process(token, document)
    again = services.batch_submit(token=token, body=json.dumps(document).encode())
    # then
    assert first.status == IngestBatch.Status.DONE and again.duplicate
    run = Run.objects.get(name="ranks")
    attempt = run.attempts.get()
    assert raw_rows(attempt.pk) == [
        ("forward", 10, [0, 1, 2, 3], [0.4, 0.4, 0.6, 0.4]),
        ("step", 10, [0, 1, 2, 3], [1.0, 1.0, 1.5, 1.0]),
    ]
    assert list(
        RankPlacement.objects.filter(attempt=attempt).values_list("rank", "host", "device")
    ) == [
        (0, "h0", "GPU-a"),
        (1, "h0", "GPU-b"),
        (2, "h1", "GPU-c"),
        (3, "h1", "GPU-d"),
    ]
    assert run.last_step == 10 and run.last_step_at is not None


@pytest.mark.django_db
def test_rollup_keeps_each_steps_distribution_and_slowest_ranks(token: Any) -> None:
    # given: eight ranks each sending their own step 3 (one batch per rank); rank 6 slow
    for rank in range(8):
        value = 1.2 if rank == 6 else 1.0 + rank / 1000
        process(token, batch(f"r{rank}", timings_event(3, {"step": [value]}, ranks=[rank])))
    attempt = Run.objects.get(name="ranks").attempts.get()
    # when: rolled up twice
    since = timezone.now() - timedelta(minutes=1)
    first = rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=since)
    rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=since)
    # then: one row per (section, step), the same after the second pass
    stats = RankStepStats.objects.get(attempt=attempt, section="step", step=3)
    assert first.steps == 1 and RankStepStats.objects.count() == 1
    assert stats.rank_count == 8
    assert stats.min_s == pytest.approx(1.0) and stats.max_s == pytest.approx(1.2)
    assert stats.median_s == pytest.approx(1.0035, abs=1e-6)
    assert stats.slowest_ranks[:2] == [6, 7]
    bucket = RankBucket.objects.get(attempt=attempt, section="step", bucket_s=600)
    assert bucket.ranks == list(range(8)) and bucket.counts == [1] * 8
    assert bucket.means_s[6] == pytest.approx(1.2)
    # and the hour and six-hour buckets above it hold the same single step
    assert sorted(
        RankBucket.objects.filter(attempt=attempt, section="step").values_list(
            "bucket_s", flat=True
        )
    ) == [600, 3600, 21600]


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " JOIN pg_class p ON p.oid = i.inhparent"
            " WHERE p.relname = 'telemetry_ranktiming_raw' ORDER BY 1"
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_partitions_are_made_ahead_and_dropped_whole_after_the_window(settings: Any) -> None:
    settings.RANK_TIMINGS_RAW_WINDOW_S = 3600
    long_ago = datetime(2026, 1, 5, 10, 30, tzinfo=UTC)
    # when: the beat ran back then, and again now
    created_then, _ = rank_timings.rank_partitions_maintain(now=long_ago)
    assert "telemetry_ranktiming_raw_p2026010510" in created_then
    assert "telemetry_ranktiming_raw_p2026010516" in created_then  # six hours ahead
    _, dropped = rank_timings.rank_partitions_maintain(now=long_ago + timedelta(hours=3))
    # then: partitions wholly older than the hour window are gone; later ones stay
    assert "telemetry_ranktiming_raw_p2026010510" in dropped
    assert "telemetry_ranktiming_raw_p2026010511" in dropped
    remaining = partitions()
    assert "telemetry_ranktiming_raw_p2026010512" in remaining
    assert "telemetry_ranktiming_raw_p2026010510" not in remaining
    assert "telemetry_ranktiming_raw_default" in remaining
    # and running it again changes nothing
    assert rank_timings.rank_partitions_maintain(now=long_ago + timedelta(hours=3)) == ([], [])
