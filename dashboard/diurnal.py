"""Throughput by hour of day (UTC): the Llama 3 paper's diurnal swing (1-2% of throughput with
the day's temperature). Pure: arrays in, a DataFrame out; no database."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import numpy.typing as npt
import pandas as pd

# Below two days each hour of the day is seen once or twice: a swing of 1-2% is lost in the
# run's own changes (warm-up, restarts), so the page does not draw it.
MIN_SPAN = timedelta(hours=48)


def spans_long_enough(times_s: npt.NDArray[np.float64]) -> bool:
    """Whether the points' times (epoch seconds, NaN ignored) cover at least MIN_SPAN."""
    known = times_s[np.isfinite(times_s)]
    return bool(known.size) and float(known.max() - known.min()) >= MIN_SPAN.total_seconds()


def by_hour_of_day(
    times_s: npt.NDArray[np.float64], values: npt.NDArray[np.float64]
) -> pd.DataFrame:
    """The mean of the finite values per UTC hour of day of their times (epoch seconds; a
    point without a time is left out).

    Returns columns hour (0-23, every hour, in order), mean (NaN for an hour with no value)
    and count."""
    keep = np.isfinite(times_s) & np.isfinite(values)
    # Epoch seconds count no leap seconds: a day is 86,400 of them, hour 0 at midnight UTC.
    hours = (np.floor(times_s[keep] / 3600) % 24).astype(int)
    grouped = pd.Series(values[keep]).groupby(hours).agg(["mean", "count"])
    grouped = grouped.reindex(range(24)).rename_axis("hour").reset_index()
    grouped["count"] = grouped["count"].fillna(0).astype(int)
    return grouped
