"""Packed reads of a series (telemetry.selectors.packed) come back in step order however the
batches that stored them arrived: the worker processes batches in any order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from telemetry import services as telemetry_services
from telemetry.models import MetricSeries
from telemetry.selectors import packed

START = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.django_db
def test_points_stored_out_of_order_are_read_in_step_order(project):
    # given a run whose last batch (steps 400-419) was stored before the middle one (200-399),
    # as when the worker takes the job's batches out of order
    run = telemetry_services.run_upsert(project=project, name="late-middle")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    for steps in (range(0, 200), range(400, 420), range(200, 400)):
        telemetry_services.metric_points_insert(
            run=run,
            attempt=attempt,
            points=[("tokens_per_s", s, float(s) * 2, START + timedelta(seconds=s)) for s in steps],
        )
    series = MetricSeries.objects.get(run=run, name="tokens_per_s")
    # when the slowdown detector's read packs them
    steps, values, times = packed.series_points_packed(series_ids=[series.pk])[series.pk]
    # then the steps are in order, each with its own value and time
    assert steps.tolist() == list(range(420))
    np.testing.assert_array_equal(values, steps * 2.0)
    np.testing.assert_array_equal(times, START.timestamp() + steps)


@pytest.mark.django_db
def test_step_ends_stored_out_of_order_are_read_in_step_order(project):
    # given step times whose batches were stored last one first (goodput derives step starts
    # from them when a job sends no step_times)
    run = telemetry_services.run_upsert(project=project, name="late-first")
    attempt = telemetry_services.attempt_ensure(run=run, number=1)
    for steps in (range(100, 150), range(0, 100)):
        telemetry_services.metric_points_insert(
            run=run,
            attempt=attempt,
            points=[
                ("step_time_s", s, 1.0 + s / 1000, START + timedelta(seconds=s)) for s in steps
            ],
        )
    # when goodput's read packs them
    pairs, durations = packed.step_ends_with_durations(run=run, metric="step_time_s", numbers=[1])[
        1
    ]
    # then each row is in step order with its own end and duration
    assert pairs[:, 0].tolist() == list(range(150))
    np.testing.assert_array_equal(pairs[:, 1], START.timestamp() + pairs[:, 0])
    np.testing.assert_allclose(durations, 1.0 + pairs[:, 0] / 1000)
