"""Metric alert conditions (logbook.alert_maths), without a database."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from logbook.alert_maths import (
    ABOVE,
    BELOW,
    MEDIAN_FRACTION,
    NOT_FINITE,
    VALUE,
    RuleSpec,
    breach,
    describe,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SLOWDOWN = RuleSpec(comparison=BELOW, threshold_kind=MEDIAN_FRACTION, threshold=0.9, for_s=120)


def series(values: list[float], every_s: float = 5.0) -> list[tuple[datetime, float]]:
    return [(T0 + timedelta(seconds=every_s * i), v) for i, v in enumerate(values)]


def test_a_job_that_slows_by_20_percent_breaches_after_2_minutes() -> None:
    # given: 10 minutes at 1,000 tokens/s, then 800 (points every 5 s)
    steady = [1000.0] * 120
    points = series(steady + [800.0] * 36)
    # when: judged as the slow points arrive
    first_breach = None
    for n in range(120, len(points) + 1):
        found = breach(points[:n], SLOWDOWN, now=points[n - 1][0])
        if found and first_breach is None:
            first_breach = (n, found)
    # then: the first breach is when 2 minutes of slow points are in (24 intervals of 5 s)
    assert first_breach is not None
    n, found = first_breach
    assert n == 120 + 25
    assert found.since == points[120][0]
    assert found.baseline == 1000.0 and found.limit == 900.0 and found.value == 800.0


def test_a_steady_noisy_job_never_breaches() -> None:
    rng = random.Random(7)
    points = series([1000.0 * (1 + rng.uniform(-0.04, 0.04)) for _ in range(1000)])
    assert all(
        breach(points[: n + 1], SLOWDOWN, now=points[n][0]) is None for n in range(len(points))
    )


def test_a_short_dip_or_a_recovered_job_does_not_breach() -> None:
    dip = series([1000.0] * 120 + [800.0] * 20 + [1000.0] * 5)
    assert breach(dip, SLOWDOWN, now=dip[-1][0]) is None
    assert breach(dip[:140], SLOWDOWN, now=dip[139][0]) is None  # 95 s of slow points


def test_stale_or_thin_data_says_nothing() -> None:
    slow = series([1000.0] * 120 + [800.0] * 36)
    assert breach(slow, SLOWDOWN, now=slow[-1][0] + timedelta(minutes=3)) is None
    thin = series([1000.0] * 5 + [800.0] * 30)  # the breach is most of the data
    assert breach(thin, SLOWDOWN, now=thin[-1][0]) is None


def test_values_and_not_finite() -> None:
    loss = series([2.0] * 10 + [math.nan] * 10, every_s=10)
    nan_rule = RuleSpec(comparison=NOT_FINITE, threshold_kind=VALUE, threshold=0, for_s=60)
    found = breach(loss, nan_rule, now=loss[-1][0])
    assert found is not None and math.isnan(found.value) and found.limit is None
    high = RuleSpec(comparison=ABOVE, threshold_kind=VALUE, threshold=10.0, for_s=0)
    spike = series([1.0, 1.0, 50.0])
    assert breach(spike, high, now=spike[-1][0]) is not None
    # a NaN is not "above" anything
    assert breach(series([1.0, math.nan]), high, now=T0 + timedelta(seconds=5)) is None


def test_describe_reads_as_the_rule_was_written() -> None:
    assert describe(SLOWDOWN, "tokens_per_s") == (
        "tokens_per_s below 90% of its 1-hour median for 2 min"
    )
    nan_rule = RuleSpec(comparison=NOT_FINITE, threshold_kind=VALUE, threshold=0, for_s=30)
    assert describe(nan_rule, "loss") == "loss is NaN or infinite for 30 s"
