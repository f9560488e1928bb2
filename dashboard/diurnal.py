"""Throughput by hour of day (UTC): the Llama 3 paper's diurnal swing (1-2% of throughput with
the day's temperature), from a run's hour sums (telemetry.models.MetricHourSum: finite points
and their sum per UTC clock hour). Pure: numbers in, a DataFrame out; no database."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

# Below two days each hour of the day is seen once or twice: a swing of 1-2% is lost in the
# run's own changes (warm-up, restarts), so the page does not draw it. The sums know a
# point's clock hour, not its minute, so only the whole hours between the first hour and the
# last are sure to be covered: 48 of them, and the data certainly spans 48 hours.
MIN_SPAN_HOURS = 48


def spans_long_enough(hours: Sequence[int]) -> bool:
    """Whether data in these clock hours (hours since the epoch) certainly spans
    MIN_SPAN_HOURS: whole hours strictly between the first and the last."""
    return bool(hours) and max(hours) - min(hours) - 1 >= MIN_SPAN_HOURS


def by_hour_of_day(
    hours: Sequence[int],
    counts: Sequence[int],
    sums: Sequence[float],
    *,
    inverted: bool = False,
) -> pd.DataFrame:
    """Each UTC hour of day's mean over every clock hour that fell in it: Σ sums / Σ counts,
    exactly the mean of its points. With `inverted` (a step-time series) the pace instead,
    Σ counts / Σ sums: steps per second of the steps run in that hour of day.

    hours are hours since the epoch (a day is 24 of them: epoch seconds count no leap
    seconds), counts the finite points of each and sums their total. Returns columns hour
    (0-23, every hour, in order), value (NaN for an hour of day without a point) and points."""
    frame = pd.DataFrame(
        {
            "hour": np.asarray(hours, dtype=np.int64) % 24,
            "points": np.asarray(counts, dtype=np.int64),
            "total": np.asarray(sums, dtype=np.float64),
        }
    )
    grouped = frame.groupby("hour")[["points", "total"]].sum().reindex(range(24), fill_value=0)
    points, total = grouped["points"].to_numpy(), grouped["total"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        value = points / total if inverted else total / points
    value = np.where(points > 0, value, np.nan)
    return pd.DataFrame({"hour": range(24), "value": value, "points": points})
