"""The rank-timings rollup against a plain-Python account of the same raw rows: every
(section, step) distribution, every block of steps and every bucket at every level, after a
first pass, a late rank and a rank sending a step twice, and a second pass; and a bounded
number of queries however many steps and buckets a pass touches."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry import rank_heat
from telemetry.models import Attempt, RankBucket, RankStepBlock, RankStepStats, Run
from telemetry.services import rank_timings
from telemetry.straggler_scores import percentiles

START = datetime(2026, 1, 5, 9, 40, tzinfo=UTC)
RECEIVED = datetime(2026, 1, 5, 14, 0, tzinfo=UTC)


def raw_insert(
    attempt: Attempt,
    *,
    section: str,
    step: int,
    ranks: list[int],
    values: list[float],
    received_at: datetime,
) -> None:
    # Written directly: one test transaction would give every row the same received_at.
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {rank_timings.RAW_TABLE} (received_at, attempt_id, section,"
            " first_step, last_step, recorded_at, ranks, values_s)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s::integer[], %s::real[])",
            [received_at, attempt.pk, section, step, step, START + timedelta(minutes=step % 250),
             ranks, values],
        )  # fmt: skip


def raw_rows(attempt: Attempt) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT section, first_step, recorded_at, ranks, values_s"
            f" FROM {rank_timings.RAW_TABLE} WHERE attempt_id = %s ORDER BY received_at",
            [attempt.pk],
        )
        return cursor.fetchall()


def expected_rows(attempt: Attempt, bucket_s: int) -> dict[str, dict[tuple, tuple]]:
    """What the rollup should keep, computed in Python from all the attempt's raw rows."""
    rows = raw_rows(attempt)
    # Steps: one value per rank, the later one when a rank sent the step twice.
    by_step: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    recorded: dict[tuple[str, int], datetime] = {}
    for section, step, recorded_at, ranks, values in rows:
        by_step[section, step].update(zip(ranks, values, strict=True))
        recorded[section, step] = min(recorded.get((section, step), recorded_at), recorded_at)
    stats = {}
    for key, by_rank in by_step.items():
        ranks_arr = np.array(list(by_rank), dtype=np.int64)
        values_arr = np.array(list(by_rank.values()), dtype=np.float64)
        order = np.argsort(-values_arr, kind="stable")[: rank_timings.SLOWEST_KEPT]
        stats[key] = (
            recorded[key], len(by_rank), *percentiles(values_arr),
            ranks_arr[order].tolist(), values_arr[order].tolist(),
        )  # fmt: skip
    # Blocks of 100 steps from the steps, of 10,000 from those.
    blocks: dict[tuple, tuple] = {}
    members: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    for (section, step), row in stats.items():
        members[section, step // 100 * 100].append((1, *row[2:7], row[7][0]))
    for level in (100, 10_000):
        merged = {}
        for (section, first), parts in members.items():
            count = sum(p[0] for p in parts)
            slowest = max(parts, key=lambda p: p[5])
            merged[section, first] = (
                count, min(p[1] for p in parts), sum(p[2] * p[0] for p in parts) / count,
                max(p[3] for p in parts), max(p[4] for p in parts), slowest[5], slowest[6],
            )  # fmt: skip
            blocks[section, level, first] = merged[section, first]
        members = defaultdict(list)
        for (section, first), row in merged.items():
            members[section, first // 10_000 * 10_000].append(row)
    # Buckets: every raw value of a rank in the bucket (a repeat counts twice here, as the
    # scores read it), then each coarser level weighted by count.
    buckets: dict[tuple, tuple] = {}
    values_in: dict[tuple[str, datetime], dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for section, _, recorded_at, ranks, values in rows:
        start = rank_timings.bucket_start(recorded_at, bucket_s)
        for rank, value in zip(ranks, values, strict=True):
            values_in[section, start][rank].append(value)
    level = {
        key: {r: (float(np.mean(v)), float(np.median(v)), len(v)) for r, v in per_rank.items()}
        for key, per_rank in values_in.items()
    }
    for width in rank_timings.bucket_levels():
        if width != bucket_s:
            coarse: dict[tuple, dict[int, list[tuple]]] = defaultdict(lambda: defaultdict(list))
            for (section, start), per_rank in level.items():
                for rank, triple in per_rank.items():
                    coarse[section, rank_timings.bucket_start(start, width)][rank].append(triple)
            level = {
                key: {
                    r: (
                        sum(m * n for m, _, n in t) / sum(n for *_, n in t),
                        sum(d * n for _, d, n in t) / sum(n for *_, n in t),
                        sum(n for *_, n in t),
                    )
                    for r, t in per_rank.items()
                }
                for key, per_rank in coarse.items()
            }
        for (section, start), per_rank in level.items():
            ranks = sorted(per_rank)
            means = [per_rank[r][0] for r in ranks]
            group = rank_heat.group_ranks_for(max(ranks) + 1)
            slowest_s, slowest_rank = rank_heat.slowest_per_group(ranks, means, group)
            buckets[section, width, start] = (
                ranks, means, [per_rank[r][1] for r in ranks], [per_rank[r][2] for r in ranks],
                group, slowest_s, slowest_rank,
            )  # fmt: skip
    return {"stats": stats, "blocks": blocks, "buckets": buckets}


def stored_rows(attempt: Attempt) -> dict[str, dict[tuple, tuple]]:
    stats = {
        (s.section, s.step): (
            s.recorded_at, s.rank_count, s.min_s, s.median_s, s.p90_s, s.p99_s, s.max_s,
            s.slowest_ranks, s.slowest_s,
        )
        for s in RankStepStats.objects.filter(attempt=attempt)
    }  # fmt: skip
    blocks = {
        (b.section, b.steps, b.first_step): (
            b.step_count, b.min_s, b.median_s, b.p90_s, b.p99_s, b.max_s, b.slowest_rank,
        )
        for b in RankStepBlock.objects.filter(attempt=attempt)
    }  # fmt: skip
    buckets = {
        (b.section, b.bucket_s, b.bucket_start): (
            b.ranks, b.means_s, b.medians_s, b.counts, b.group_ranks, b.group_slowest_s,
            b.group_slowest_rank,
        )
        for b in RankBucket.objects.filter(attempt=attempt)
    }  # fmt: skip
    return {"stats": stats, "blocks": blocks, "buckets": buckets}


def same(stored: Any, expected: Any) -> bool:
    """Equal, floats within float4 rounding (means and medians are stored as real)."""
    if isinstance(expected, list | tuple):
        return len(stored) == len(expected) and all(map(same, stored, expected))
    if isinstance(expected, float):
        return stored == pytest.approx(expected, rel=1e-6)
    return stored == expected


def assert_rows_match(attempt: Attempt, bucket_s: int) -> None:
    stored, expected = stored_rows(attempt), expected_rows(attempt, bucket_s)
    for table in ("stats", "blocks", "buckets"):
        assert stored[table].keys() == expected[table].keys(), table
        wrong = [k for k in expected[table] if not same(stored[table][k], expected[table][k])]
        assert not wrong, (table, wrong[:3], [stored[table][k] for k in wrong[:1]])


@pytest.fixture
def attempt(project: Any) -> Attempt:
    run = Run.objects.create(project=project, name="rollup")
    return run.attempts.create(number=1, started_at=START)


def fill(attempt: Attempt, rng: np.random.Generator) -> None:
    # 250 steps a minute apart (09:40 to 13:50: 10-minute buckets, five hours, two six-hour
    # buckets) and two past step 10,000 (a second block of 10,000); 600 ranks in `step` (the
    # heat map groups them by 4), 40 in `forward`, where rank 7 never sends step 12.
    for step in [*range(250), 10_040, 10_041]:
        step_values = rng.normal(1.0, 0.05, 600).round(4).tolist()
        raw_insert(attempt, section="step", step=step, ranks=list(range(600)),
                   values=step_values, received_at=RECEIVED)  # fmt: skip
        ranks = [r for r in range(40) if not (step == 12 and r == 7)]
        raw_insert(attempt, section="forward", step=step, ranks=ranks,
                   values=rng.normal(0.4, 0.02, len(ranks)).round(4).tolist(),
                   received_at=RECEIVED)  # fmt: skip


@pytest.mark.django_db
def test_rollup_keeps_what_the_raw_rows_say_through_a_late_rank_and_a_repeat(
    attempt: Attempt, settings: Any
) -> None:
    # given: a first pass over every raw row
    bucket_s = settings.RANK_BUCKET_S
    fill(attempt, np.random.default_rng(7))
    first = rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=RECEIVED)
    assert first.steps == 504
    assert_rows_match(attempt, bucket_s)
    # when: rank 7's step 12 arrives late, and rank 3 sends step 5 again (slower, with two
    # ranks at the same time), and only what arrived since is rolled up, twice
    later = RECEIVED + timedelta(minutes=1)
    raw_insert(attempt, section="forward", step=12, ranks=[7], values=[0.9], received_at=later)
    raw_insert(attempt, section="forward", step=5, ranks=[3, 4], values=[1.5, 1.5],
               received_at=later)  # fmt: skip
    again = rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=later)
    rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=later)
    # then: those two steps, their blocks and buckets are redone from all their raw rows
    assert again.steps == 2
    assert_rows_match(attempt, bucket_s)
    late = RankStepStats.objects.get(attempt=attempt, section="forward", step=12)
    repeat = RankStepStats.objects.get(attempt=attempt, section="forward", step=5)
    assert late.rank_count == 40 and late.slowest_ranks[0] == 7
    assert repeat.rank_count == 40 and repeat.slowest_ranks[:2] == [3, 4]
    assert repeat.max_s == pytest.approx(1.5)


@pytest.mark.django_db
def test_a_rollup_takes_a_bounded_number_of_queries(attempt: Attempt) -> None:
    # given: 504 steps over 26 ten-minute buckets in two sections
    fill(attempt, np.random.default_rng(8))
    # when
    with CaptureQueriesContext(connection) as queries:
        rank_timings.rank_timings_rollup(attempt_id=attempt.pk, since=RECEIVED)
    # then: a few statements per level, not one or two per step or bucket
    assert len(queries) <= 20, [q["sql"][:80] for q in queries]
