"""Long series are bucketed by PostgreSQL itself, from the rollups: the spikes and NaNs
survive, the budget holds, counts are exact, and the answer keeps every attempt."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from telemetry import services as telemetry_services
from telemetry.selectors import series as selectors

START = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.mark.django_db
def test_a_long_series_is_bucketed_in_postgresql_keeping_spikes_and_nans(project):
    # given 200,000 noisy steps in attempt 1 with one spike, one dip and one NaN, and
    # attempt 2 replaying the last 50,000 steps
    rng = np.random.default_rng(3)
    run = telemetry_services.run_upsert(project=project, name="long")
    first = telemetry_services.attempt_ensure(run=run, number=1)
    second = telemetry_services.attempt_ensure(run=run, number=2)
    values = 2.0 + rng.normal(0, 0.01, 200_000)
    values[123_457] = 40.0
    values[77_777] = -5.0
    values[150_001] = math.nan
    points = [
        ("loss", step, float(values[step]), START + timedelta(seconds=step))
        for step in range(200_000)
    ]
    telemetry_services.metric_points_insert(run=run, attempt=first, points=points)
    telemetry_services.metric_points_insert(
        run=run,
        attempt=second,
        points=[("loss", s, 1.9, None) for s in range(150_000, 200_000)],
    )

    # when the series is read downsampled to 4,000 points
    series = selectors.series_for_run(run=run, name="loss", max_points=4000)

    # then each attempt is there with its exact size, within the budget, spikes kept
    assert [one.attempt for one in series] == [1, 2]
    assert [one.total_points for one in series] == [200_000, 50_000]
    assert sum(one.steps.size for one in series) <= 4000
    one = series[0]
    kept = dict(zip(one.steps.tolist(), one.values.tolist(), strict=True))
    assert kept[123_457] == 40.0
    assert kept[77_777] == -5.0
    assert math.isnan(kept[150_001])
    assert np.all(np.diff(one.steps) > 0)
    # wall times come along with the kept points
    position = one.steps.tolist().index(123_457)
    assert one.wall_times[position] == np.datetime64(
        (START + timedelta(seconds=123_457)).replace(tzinfo=None), "us"
    )
    assert np.isnat(series[1].wall_times).all()
