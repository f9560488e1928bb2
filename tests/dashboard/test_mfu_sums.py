"""The MFU page's figures from the per-attempt throughput sums PostgreSQL keeps
(telemetry.models.ThroughputSum) instead of every point: the same numbers as the pure maths
over the points, sums that survive split, concurrent-looking and redelivered batches, and a
first view that reads what its chart draws, not the run's points."""

from __future__ import annotations

import io
import math
from dataclasses import astuple
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.query import Window
from dashboard.selectors import mfu as mfu_selectors
from telemetry import mfu as mf
from telemetry import services as telemetry_services
from telemetry.models import MetricPoint, Project, Run, ThroughputSum

T0 = datetime(2026, 11, 1, tzinfo=UTC)
H100_PEAK = 989e12
SHAPE = {"parameter_count": 10**9, "n_layers": 2, "n_heads": 4, "head_dim": 8, "seq_len": 16,
         "accelerator_type": "H100", "accelerator_count": 8}  # fmt: skip


def _run(project: Project, name: str, *, attempts: int, steps: int, seed: int = 1) -> Run:
    """Attempts of `steps` steps resuming half-way, with uneven throughput and step times,
    some NaN, infinite, zero and negative values, and a few steps lacking one metric."""
    rng = np.random.default_rng(seed)
    run = telemetry_services.run_upsert(project=project, name=name, info=SHAPE)
    for number in range(1, attempts + 1):
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(hours=number)
        )
        first = (number - 1) * steps // 2
        points = []
        for step in range(first, first + steps):
            moment = T0 + timedelta(hours=number, seconds=2 * (step - first))
            reported = float(rng.uniform(1e5, 4e5))
            timed = float(rng.uniform(0.5, 3.0))
            if step % 17 == 3:
                reported = math.nan
            if step % 23 == 5:
                timed = [math.nan, math.inf, 0.0, -1.0][step % 4]
            if step % 11 != 7:
                points.append(("tokens_per_s", step, reported, moment))
            if step % 13 != 2:
                points.append(("step_time_s", step, timed, moment))
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return run


def _points_by_attempt(run: Run) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each attempt's steps, tokens_per_s and step_time_s (NaN where absent), by the ORM."""
    found: dict[int, dict[str, dict[int, float]]] = {}
    for number, name, step, value in MetricPoint.objects.filter(series__run=run).values_list(
        "series__attempt__number", "series__name", "step", "value"
    ):
        found.setdefault(number, {}).setdefault(name, {})[step] = value
    arrays = {}
    for number, by_name in sorted(found.items()):
        steps = np.array(sorted(set().union(*(set(v) for v in by_name.values()))))
        columns = [
            np.array([by_name.get(name, {}).get(int(s), math.nan) for s in steps], dtype=float)
            for name in ("tokens_per_s", "step_time_s")
        ]
        arrays[number] = (steps, *columns)
    return arrays


def _stored(run: Run) -> dict[int, tuple]:
    return {
        row.attempt.number: tuple(
            getattr(row, f.name) for f in ThroughputSum._meta.fields if f.name != "attempt"
        )
        for row in ThroughputSum.objects.filter(attempt__run=run).select_related("attempt")
    }


@pytest.mark.django_db
def test_the_mfu_page_figures_from_the_sums_are_the_pure_maths_over_the_points(project):
    # given a run of three attempts, the second resized to 4 accelerators
    run = _run(project, "sums", attempts=3, steps=120)
    telemetry_services.attempt_ensure(run=run, number=2, accelerator_count=4)

    # when its MFU is computed (no window: from the stored sums)
    report = mfu_selectors.run_mfu(run=run)

    # then the mean and every attempt's mean are mean_utilisation over the points' MFU,
    # weighted by step time, each attempt on its own accelerator count
    assert report.inputs is not None and report.throughput_source == "tokens_per_s"
    points = _points_by_attempt(run)
    every_mfu, every_weight, per_attempt = [], [], []
    for number, (steps, reported, timed) in points.items():
        n_accelerators = 4 if number == 2 else 8
        mfu = mf.mfu_array(reported, flops_per_token=report.inputs.flops_per_token,
                           n_accelerators=n_accelerators, peak_flops=H100_PEAK)  # fmt: skip
        every_mfu.append(mfu)
        every_weight.append(timed)
        per_attempt.append((number, steps.size, int(steps.min()), int(steps.max()),
                            mf.mean_utilisation(mfu, timed)))  # fmt: skip
    expected = mf.mean_utilisation(np.concatenate(every_mfu), np.concatenate(every_weight))
    assert report.mean == pytest.approx(expected, rel=1e-12)
    got = [tuple(row) for row in report.per_attempt.itertuples(index=False)]
    assert [row[:4] for row in got] == [row[:4] for row in per_attempt]
    assert [row[4] for row in got] == pytest.approx([row[4] for row in per_attempt], rel=1e-12)
    assert report.total_points == sum(steps.size for steps, _, _ in points.values())
    # and a window holding the whole run (read from the points) says the same
    everything = Window(start=T0, end=T0 + timedelta(days=1))
    windowed = mfu_selectors.run_mfu(run=run, window=everything)
    assert windowed.mean == pytest.approx(report.mean, rel=1e-12)
    assert list(windowed.per_attempt["mean"]) == pytest.approx(list(report.per_attempt["mean"]))


@pytest.mark.django_db
def test_mfu_from_step_time_uses_the_sums_as_the_points_would(project):
    # given a run that sends only step_time_s, with tokens_per_step
    run = telemetry_services.run_upsert(project=project, name="timed", info=SHAPE)
    run.tokens_per_step = 4096
    run.save(update_fields=["tokens_per_step"])
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    times = [2.0, 4.0, math.inf, 0.0, 1.0, math.nan]
    points = [("step_time_s", s, t, T0 + timedelta(seconds=s)) for s, t in enumerate(times)]
    telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)

    report = mfu_selectors.run_mfu(run=run)

    # then throughput is tokens_per_step / step time, weighted by step time, as the pure maths
    assert report.throughput_source == "step_time_s" and report.inputs is not None
    throughput = mf.tokens_per_s_from_step_time(times, tokens_per_step=4096)
    mfu = mf.mfu_array(throughput, flops_per_token=report.inputs.flops_per_token,
                       n_accelerators=8, peak_flops=H100_PEAK)  # fmt: skip
    assert report.mean == pytest.approx(mf.mean_utilisation(mfu, times), rel=1e-12)


@pytest.mark.django_db
def test_sums_kept_through_split_and_redelivered_batches_equal_a_rebuild(project):
    # given one attempt's throughput sent in pieces: step times before their tokens_per_s,
    # tokens_per_s before their step times, both in one batch, and a batch sent twice
    run = telemetry_services.run_upsert(project=project, name="split", info=SHAPE)
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)

    def send(name: str, steps: range, value: float) -> None:
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt,
            points=[(name, s, value + s, T0 + timedelta(seconds=s)) for s in steps],
        )  # fmt: skip

    send("step_time_s", range(0, 10), 1.0)
    send("tokens_per_s", range(0, 15), 1000.0)
    send("tokens_per_s", range(20, 30), 1000.0)
    send("step_time_s", range(15, 30), 1.0)
    pairs = (("tokens_per_s", 1000.0), ("step_time_s", 1.0))
    both = [(n, s, v + s, T0 + timedelta(seconds=s)) for s in range(30, 40) for n, v in pairs]
    telemetry_services.metric_points_insert(run=run, attempt=attempt, points=both)
    telemetry_services.metric_points_insert(run=run, attempt=attempt, points=both)
    send("loss", range(0, 40), 3.0)  # not throughput: no change
    kept = _stored(run)

    # when the sums are recomputed from the points
    call_command("rollups_rebuild", "--run", str(run.pk), stdout=io.StringIO())

    # then nothing was counted twice or missed, and they are the pure sums of the points
    assert _stored(run) == kept
    steps, reported, timed = _points_by_attempt(run)[1]
    expected = mf.ThroughputSums.of(steps, reported, timed)
    assert astuple(mfu_selectors._throughput_sums(run)[1]) == pytest.approx(astuple(expected))
    assert expected.steps == 40 and expected.paired_weight_s == pytest.approx(
        sum(1.0 + s for s in [*range(0, 10), *range(20, 30), *range(30, 40)])
    )


@pytest.mark.django_db
def test_the_mfu_first_view_reads_no_more_points_when_the_run_grows(
    client, alice, project, rows_read
):
    small = _run(project, "mfu-small", attempts=2, steps=300)
    big = _run(project, "mfu-big", attempts=2, steps=12_000)
    client.force_login(alice)
    costs = []
    for run in (small, big):
        for url in (f"/runs/{run.pk}/mfu/", f"/api/v1/runs/{run.pk}/mfu"):
            # when the page and its JSON are first viewed, nothing cached
            cache.clear()
            before = rows_read()
            with CaptureQueriesContext(connection) as queries:
                assert client.get(url).status_code == 200
            costs.append((len(queries), rows_read() - before))

    # then the big run (~45,000 points) costs the same queries, and reads about as many
    # point rows as its chart draws (the rest from the rollups), not its points
    assert [q for q, _ in costs[:2]] == [q for q, _ in costs[2:]], costs
    assert all(rows <= 2 * mfu_selectors.CHART_MAX_POINTS for _, rows in costs[2:]), costs
