"""Step starts packed per attempt in chunks of 4,096 steps (telemetry.models.StepStartChunk),
which PostgreSQL keeps as batches arrive: the same steps and times as the table, whatever the
order, overlap or redelivery of the batches, and goodput's first view reads them instead of
the step starts."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.core.cache import cache
from django.core.management import call_command

from telemetry import services as telemetry_services
from telemetry.models import Project, Run, StepStart, StepStartChunk
from telemetry.selectors import packed

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _starts(first: int, count: int, offset_s: float = 0.0) -> list[datetime]:
    return [
        T0 + timedelta(seconds=2.5 * (first + i) + offset_s, microseconds=7) for i in range(count)
    ]


def _run(project: Project, name: str, *, attempts: int, steps: int) -> Run:
    """Attempts resuming half-way, each sending its step starts in batches of 1,000 out of
    order, one batch twice and the first one again with other times (first write wins)."""
    run = telemetry_services.run_upsert(project=project, name=name, info={})
    for number in range(1, attempts + 1):
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(hours=number)
        )
        first = (number - 1) * steps // 2
        batches = [(s, min(1000, first + steps - s)) for s in range(first, first + steps, 1000)]
        for start, count in [*batches[1::2], *batches[::2], batches[0]]:
            telemetry_services.step_starts_record(
                attempt=attempt, first_step=start, start_times=_starts(start, count)
            )
        telemetry_services.step_starts_record(
            attempt=attempt, first_step=first, start_times=_starts(first, 10, offset_s=99.0)
        )
    return run


def _from_the_table(run: Run) -> dict[int, np.ndarray]:
    found: dict[int, list[tuple[float, float]]] = {}
    for number, step, started_at in StepStart.objects.filter(attempt__run=run).values_list(
        "attempt__number", "step", "started_at"
    ):
        found.setdefault(number, []).append((float(step), started_at.timestamp()))
    return {number: np.array(sorted(pairs)) for number, pairs in found.items()}


def _chunks(run: Run) -> list[tuple[int, int, bytes, bytes]]:
    return [
        (c.attempt_id, c.bucket, bytes(c.steps), bytes(c.started_us))
        for c in StepStartChunk.objects.filter(attempt__run=run).order_by("attempt", "bucket")
    ]


@pytest.mark.django_db
def test_packed_step_starts_are_the_table_s_rows(project):
    # given step starts sent out of order, overlapping and twice
    run = _run(project, "packed", attempts=3, steps=9_000)
    kept = _chunks(run)

    # when goodput reads them, and when they are repacked from the table
    read = packed.step_starts_recorded(run=run)
    call_command("rollups_rebuild", "--run", str(run.pk), stdout=io.StringIO())

    # then they are every stored step with its time (first write wins), in step order
    expected = _from_the_table(run)
    assert read.keys() == expected.keys()
    for number, pairs in expected.items():
        assert np.array_equal(read[number], pairs), number
    assert sum(len(pairs) for pairs in read.values()) == 3 * 9_000
    # and the trigger's packing is the rebuild's: nothing missed or counted twice
    assert _chunks(run) == kept


@pytest.mark.django_db
def test_goodput_first_view_reads_the_chunks_not_the_step_starts(client, alice, project, rows_read):
    run = _run(project, "read", attempts=2, steps=6_000)
    client.force_login(alice)
    for url in (f"/runs/{run.pk}/goodput/", f"/api/v1/runs/{run.pk}/goodput"):
        # when the page and its JSON are first viewed, nothing cached
        cache.clear()
        before = rows_read("telemetry_stepstart")
        assert client.get(url).status_code == 200
        # then no step start row was read: the packed chunks hold them
        assert rows_read("telemetry_stepstart") - before == 0
