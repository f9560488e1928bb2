"""The heat map at any length of run: each rank bucket's row of groups (the slowest rank of
every 64), the hour and six-hour buckets made from the ten-minute ones, and the page's read
choosing the level that fits, never reading the per-rank arrays."""

from __future__ import annotations

import importlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest import services
from telemetry import rank_heat
from telemetry.models import RankBucket, RankStepBlock, RankStepStats, Run
from telemetry.selectors import ranks as rank_selectors
from telemetry.services import rank_timings

# --- Pure arithmetic ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("span", "group"), [(1, 1), (256, 1), (257, 2), (1000, 4), (16_384, 64), (16_385, 128)]
)
def test_groups_are_the_smallest_power_of_two_that_fits_256_rows(span: int, group: int) -> None:
    assert rank_heat.group_ranks_for(span) == group
    assert -(-span // group) <= rank_heat.MAX_ROWS


def test_each_group_keeps_its_slowest_rank_and_a_gap_where_none_reported() -> None:
    ranks = [0, 1, 2, 3, 9, 8]
    means = [1.0, 1.5, 1.1, 0.9, 2.0, 1.0]
    maxes, slowest = rank_heat.slowest_per_group(ranks, means, 4)
    # groups 0-3, 4-7 (nobody), 8-11
    assert maxes == [1.5, None, 2.0] and slowest == [1, None, 9]


def test_regrouping_merges_neighbouring_groups_to_their_slowest() -> None:
    values, ranks = rank_heat.regroup([1.0, 3.0, None, 2.0, 5.0], [0, 1, None, 3, 4], 2)
    assert values[:2].tolist() == [3.0, 2.0] and ranks[:2].tolist() == [1, 3]
    assert values[2] == 5.0 and ranks[2] == 4  # the odd group out stands alone


@pytest.mark.parametrize(
    ("days", "width"), [(0.5, 600), (2, 600), (3, 3600), (12, 3600), (13, 21600), (54, 21600)]
)
def test_the_finest_level_under_300_columns_is_drawn(days: float, width: int) -> None:
    assert rank_heat.level_for_span(days * 86_400, [600, 3600, 21600]) == width


# --- Stored levels -----------------------------------------------------------------------------


def rank_event(moment: datetime, step: int, values: list[float]) -> dict[str, Any]:
    return {
        "type": "rank_timings",
        "time": moment.isoformat(),
        "first_step": step,
        "ranks": list(range(len(values))),
        "hosts": [f"n{rank // 4}" for rank in range(len(values))],
        "sections": {"step": values},
    }


@pytest.mark.django_db
def test_hour_and_six_hour_buckets_are_the_count_weighted_means_of_the_ten_minute_ones(
    project: Any,
) -> None:
    # given: 300 ranks (groups of 2), three steps in two ten-minute buckets of one hour;
    # rank 201 slow in the second bucket only
    token, _ = services.token_create(project=project, name="heat")
    hour = datetime(2026, 3, 1, 5, tzinfo=UTC)
    flat = [1.0 + rank / 10_000 for rank in range(300)]
    slow = [3.0 if rank == 201 else value for rank, value in enumerate(flat)]
    events = [
        rank_event(hour + timedelta(minutes=1), 1, flat),
        rank_event(hour + timedelta(minutes=2), 2, flat),
        rank_event(hour + timedelta(minutes=15), 3, slow),
    ]
    body = json.dumps({"batch_id": "h", "run": "heat", "attempt": 1, "events": events})
    services.batch_process(batch_pk=services.batch_submit(token=token, body=body.encode()).batch.pk)
    attempt = Run.objects.get(name="heat").attempts.get()
    # when
    rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=hour - timedelta(days=999))
    # then: two ten-minute buckets, one hour, one six hours (00:00-06:00 holds 05:00)
    rows = {(b.bucket_s, b.bucket_start): b for b in RankBucket.objects.filter(attempt=attempt)}
    assert sorted(rows) == [
        (600, hour),
        (600, hour + timedelta(minutes=10)),
        (3600, hour),
        (21600, hour - timedelta(hours=5)),
    ]
    hourly = rows[(3600, hour)]
    # rank 201: two steps at 1.0201, one at 3.0 -> weighted by count, not by bucket
    assert hourly.counts[201] == 3
    assert hourly.means_s[201] == pytest.approx((2 * 1.0201 + 3.0) / 3, rel=1e-6)
    assert hourly.means_s[5] == pytest.approx(1.0005, rel=1e-6)
    assert rows[(21600, hour - timedelta(hours=5))].means_s == pytest.approx(hourly.means_s)
    # each row carries its heat-map row: 150 groups of 2, the slowest of each
    assert hourly.group_ranks == 2 and len(hourly.group_slowest_s) == 150
    assert hourly.group_slowest_rank[100] == 201
    assert hourly.group_slowest_s[100] == pytest.approx(hourly.means_s[201], rel=1e-6)
    assert rows[(600, hour)].group_slowest_rank[100] == 201  # 1.0201 > 1.0200
    assert rows[(600, hour)].group_slowest_s[100] == pytest.approx(1.0201, rel=1e-6)


def fill_buckets(attempt: Any, *, width: int, days: range, ranks: int, slow: int) -> None:
    """Buckets of one level over the given days since 2026-01-01, synthetic, with rank
    `slow` 20% slower throughout (the bench's way to make 54 days without 54 days of ingest)."""
    means = np.full(ranks, 6.0)
    means[slow] *= 1.2
    group = rank_heat.group_ranks_for(ranks)
    slowest_s, slowest_rank = rank_heat.slowest_per_group(range(ranks), means, group)
    RankBucket.objects.bulk_create(
        [
            RankBucket(
                attempt=attempt, section="step", bucket_s=width,
                bucket_start=DAY0 + timedelta(days=day, seconds=width * index),
                ranks=list(range(ranks)), means_s=means.tolist(), medians_s=means.tolist(),
                counts=[100] * ranks, group_ranks=group,
                group_slowest_s=slowest_s, group_slowest_rank=slowest_rank,
            )
            for day in days
            for index in range(86_400 // width)
        ],
        batch_size=200,
    )  # fmt: skip


DAY0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.django_db
def test_a_54_day_heat_map_reads_the_six_hour_rows_and_names_the_slow_rank(project: Any) -> None:
    # given: 54 days of 512 ranks (2 per row), rank 301 slow, on host n75; the ten-minute
    # rows only on the first, fourth and last day (the span and the one-day view need no more)
    run = Run.objects.create(project=project, name="long")
    attempt = run.attempts.create(number=1)
    fill_buckets(attempt, width=21600, days=range(54), ranks=512, slow=301)
    fill_buckets(attempt, width=600, days=range(0, 54, 53), ranks=512, slow=301)
    fill_buckets(attempt, width=600, days=range(3, 4), ranks=512, slow=301)
    attempt.rank_placements.create(rank=301, host="n75", device="GPU-301")
    # when
    with CaptureQueriesContext(connection) as queries:
        heatmap = rank_selectors.rank_heatmap(run=run, section="step")
    # then: 216 columns of 6 h, 256 rows of 2 ranks, the slow rank's row lit and named
    assert heatmap is not None and heatmap.bucket_s == 21600
    assert len(heatmap.times) == 216 and len(heatmap.row_labels) == 256
    assert heatmap.ranks_per_row == 2 and heatmap.row_labels[150] == "300-301"
    assert heatmap.values_s[150][0] == pytest.approx(7.2) and heatmap.values_s[0][0] == 6.0
    assert heatmap.ranks[150][100] == 301 and heatmap.hosts[150][100] == "n75"
    # and no query touched the per-rank arrays (16,384 long in a frontier job)
    assert not [q["sql"] for q in queries.captured_queries if "means_s" in q["sql"]]
    # when: a day of it is asked for, the ten-minute rows are drawn
    day = rank_selectors.rank_heatmap(
        run=run, section="step", since=DAY0 + timedelta(days=3), until=DAY0 + timedelta(days=4)
    )
    assert day is not None and day.bucket_s == 600 and len(day.times) == 144
    assert day.times[0] == DAY0 + timedelta(days=3)


@pytest.mark.django_db
def test_attempts_that_share_a_bucket_share_its_column(project: Any) -> None:
    # given: attempt 1 ends and attempt 2 starts in the same hour, rank 3 slow only in 2
    run = Run.objects.create(project=project, name="restarted")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    first, second = run.attempts.create(number=1), run.attempts.create(number=2)
    for attempt, slow in ((first, 0), (second, 3)):
        means = [1.0] * 8
        means[slow] = 2.0 if attempt == second else 1.0
        slowest_s, slowest_rank = rank_heat.slowest_per_group(range(8), means, 1)
        RankBucket.objects.create(
            attempt=attempt, section="step", bucket_s=600, bucket_start=at,
            ranks=list(range(8)), means_s=means, medians_s=means, counts=[1] * 8,
            group_ranks=1, group_slowest_s=slowest_s, group_slowest_rank=slowest_rank,
        )  # fmt: skip
    second.rank_placements.create(rank=3, host="late-host")
    heatmap = rank_selectors.rank_heatmap(run=run, section="step")
    assert heatmap is not None and len(heatmap.times) == 1
    assert heatmap.values_s[3] == [2.0] and heatmap.hosts[3] == ["late-host"]


@pytest.mark.django_db
def test_the_migration_gives_existing_buckets_their_rows_and_coarse_levels(project: Any) -> None:
    # given: two ten-minute buckets stored before the heat-map rows existed
    from django.apps import apps

    backfill = importlib.import_module("telemetry.migrations.0012_rank_heat_levels").backfill
    run = Run.objects.create(project=project, name="old")
    attempt = run.attempts.create(number=1)
    for minutes, slow_mean in ((0, 4.0), (10, 1.0)):
        RankBucket.objects.create(
            attempt=attempt, section="step", bucket_s=600,
            bucket_start=DAY0 + timedelta(minutes=minutes), ranks=[0, 1, 2],
            means_s=[1.0, slow_mean, 1.0], medians_s=[1.0, slow_mean, 1.0], counts=[1, 3, 1],
        )  # fmt: skip
    # when
    with connection.schema_editor() as editor:
        backfill(apps, editor)
    # then: groups filled, and the hour and six hours made, weighted by count
    fine = RankBucket.objects.get(attempt=attempt, bucket_s=600, bucket_start=DAY0)
    assert fine.group_slowest_s == [1.0, 4.0, 1.0] and fine.group_slowest_rank == [0, 1, 2]
    for width in (3600, 21600):
        coarse = RankBucket.objects.get(attempt=attempt, bucket_s=width, bucket_start=DAY0)
        assert coarse.counts == [2, 6, 2]
        assert coarse.means_s[1] == pytest.approx(2.5) and coarse.group_slowest_rank[1] == 1


@pytest.mark.django_db
def test_the_spread_of_a_long_run_reads_blocks_of_steps_with_the_same_figures(
    project: Any, query_budget: Any
) -> None:
    # given: 250 steps of 8 ranks; rank 5 slowest at step 130, rank 2 at every other step
    token, _ = services.token_create(project=project, name="blocks")
    at = datetime(2026, 3, 1, tzinfo=UTC)
    events = []
    for step in range(250):
        values = [1.0 + step / 1000 + rank / 100 for rank in range(8)]
        values[2] += 0.5
        if step == 130:
            values[5] = 9.0
        events.append(rank_event(at + timedelta(seconds=6 * step), step, values))
    body = json.dumps({"batch_id": "b", "run": "blocks", "attempt": 1, "events": events})
    services.batch_process(batch_pk=services.batch_submit(token=token, body=body.encode()).batch.pk)
    run = Run.objects.get(name="blocks")
    attempt = run.attempts.get()
    # when
    rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=at - timedelta(days=999))
    # then: blocks of 100 (100, 100, 50 steps) and one of 10,000 (250 steps)
    blocks = {(b.steps, b.first_step): b for b in RankStepBlock.objects.filter(attempt=attempt)}
    assert {key: b.step_count for key, b in blocks.items()} == {
        (100, 0): 100, (100, 100): 100, (100, 200): 50, (10_000, 0): 250,
    }  # fmt: skip
    stats = list(RankStepStats.objects.filter(attempt=attempt, section="step"))
    whole = blocks[(10_000, 0)]
    assert whole.max_s == pytest.approx(9.0) and whole.slowest_rank == 5
    assert whole.median_s == pytest.approx(np.mean([s.median_s for s in stats]))
    assert whole.min_s == pytest.approx(min(s.min_s for s in stats))

    # and the spread drawn in 2 points reads the blocks of 100 (2 per point): steps 0-199
    # and 200-249, the same figures as merging the steps themselves
    def spread() -> list[Any]:
        return rank_selectors.rank_spread(run=run, section="step", max_points=2)

    small = query_budget.count(spread)
    points = spread()
    assert [p.step for p in points] == [0, 200]
    first = [s for s in stats if s.step < 200]
    assert points[0].max_s == pytest.approx(9.0) and points[0].slowest_rank == 5
    assert points[0].median_s == pytest.approx(np.mean([s.median_s for s in first]))
    assert points[0].p99_s == pytest.approx(max(s.p99_s for s in first))
    assert points[1].slowest_rank == 2 and points[1].min_s == pytest.approx(1.2)
    # while a short spread still draws every step
    assert len(rank_selectors.rank_spread(run=run, section="step")) == 250
    # and the spread costs the same queries (constant in the steps) after 250 steps more
    more = [
        rank_event(at + timedelta(seconds=6 * step), step, [1.0] * 8) for step in range(250, 500)
    ]
    body = json.dumps({"batch_id": "c", "run": "blocks", "attempt": 1, "events": more})
    services.batch_process(batch_pk=services.batch_submit(token=token, body=body.encode()).batch.pk)
    rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=at - timedelta(days=999))
    assert len(rank_selectors.rank_spread(run=run, section="step")) > 250
    query_budget.constant(small=small, big=query_budget.count(spread), guards="the steps")
