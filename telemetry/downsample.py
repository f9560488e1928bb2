"""Downsampling long series for charts without losing spikes.

For each of `max_points // 2` equal-count buckets the minimum and the maximum are kept (the
W&B approach), never a random sample (TensorBoard) or a stride (which drops single-step
spikes). Non-finite values (a NaN loss is a signal) are kept too: the first of each bucket,
with the bucket count reduced so the result still fits in `max_points`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


def minmax_indices(values: npt.ArrayLike, max_points: int) -> npt.NDArray[np.intp]:
    """Sorted indices of the points to keep from `values` (already in step order)."""
    data = np.asarray(values, dtype=np.float64)
    n = data.size
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    if n <= max_points:
        return np.arange(n)
    finite = np.isfinite(data)
    has_non_finite = not bool(finite.all())
    if max_points < (3 if has_non_finite else 2):
        return _most_telling(data, finite, max_points)
    n_buckets = max(1, max_points // (3 if has_non_finite else 2))
    bucket = (np.arange(n, dtype=np.int64) * n_buckets) // n  # non-decreasing, contiguous
    starts = np.searchsorted(bucket, np.arange(n_buckets), side="left")
    ends = np.searchsorted(bucket, np.arange(n_buckets), side="right") - 1

    # lexsort sorts by the last key first: by bucket, then by value inside each bucket, so a
    # bucket's min is the first of its run and its max the last. Non-finite values are pushed
    # to the far side so they are chosen only when a bucket has nothing finite.
    by_min = np.lexsort((np.where(finite, data, np.inf), bucket))
    by_max = np.lexsort((np.where(finite, data, -np.inf), bucket))
    keep = [by_min[starts], by_max[ends]]
    if has_non_finite:
        non_finite = np.flatnonzero(~finite)
        _, first = np.unique(bucket[non_finite], return_index=True)
        keep.append(non_finite[first])
    return np.unique(np.concatenate(keep))


def _most_telling(
    data: npt.NDArray[np.float64], finite: npt.NDArray[np.bool_], max_points: int
) -> npt.NDArray[np.intp]:
    """For budgets too small for min and max per bucket: the first non-finite value (the
    signal), then the finite value farthest from the median (the spike)."""
    keep: list[int] = []
    if not finite.all():
        keep.append(int(np.flatnonzero(~finite)[0]))
    if finite.any() and len(keep) < max_points:
        finite_idx = np.flatnonzero(finite)
        deviation = np.abs(data[finite_idx] - np.median(data[finite_idx]))
        keep.append(int(finite_idx[np.argmax(deviation)]))
    return np.unique(np.array(keep[:max_points], dtype=np.intp))


def split_budget(counts: list[int], max_points: int) -> list[int]:
    """Share `max_points` between series (one per attempt): first up to 2 each (a series needs
    its min and max), then the rest in proportion to their sizes; never more than a series
    has. The sum stays within `max_points` unless there are more series than points."""
    total = sum(counts)
    if total <= max_points:
        return list(counts)
    floors = [min(2, count) for count in counts]
    if sum(floors) > max_points:
        # Many short attempts and a small budget: one point each still shows every attempt.
        floors = [min(1, count) for count in counts]
    spare = max(0, max_points - sum(floors))
    extra = [count - floor for count, floor in zip(counts, floors, strict=True)]
    extra_total = sum(extra)
    return [
        floor + (spare * more) // extra_total if extra_total else floor
        for floor, more in zip(floors, extra, strict=True)
    ]


# Widths (steps per bucket) of the rollups PostgreSQL keeps for every series
# (telemetry.models.MetricRollup); each is 4 times the one before, so a read picks a width
# giving between 1 and 4 times the buckets it needs. Migration 0005 holds the same list.
ROLLUP_WIDTHS = (16, 64, 256, 1024, 4096, 16384, 65536)


@dataclass(frozen=True)
class ReadPlan:
    """How to draw one series within its budget of points.

    `buckets` output buckets, each keeping its min, its max and its first non-finite value.
    With `width` set, bucket b of that rollup width goes to output bucket
    (b - first_step // width) * buckets // (last_step // width - first_step // width + 1);
    with `width` None the points themselves are read, step s going to
    (s - first_step) * buckets // (last_step - first_step + 1) (every point its own bucket
    when the budget covers them all). `trim` says the budget is smaller than one bucket's
    share: keep the non-finite value, then the extreme farthest from the mean."""

    width: int | None
    buckets: int
    trim: bool = False

    def rows(self, first_step: int, last_step: int) -> int:
        """Rows to group: rollup buckets, or the span of steps when reading points."""
        if self.width is None:
            return last_step - first_step + 1
        return last_step // self.width - first_step // self.width + 1


def read_plan(
    *,
    count: int,
    first_step: int,
    last_step: int,
    budget: int,
    has_non_finite: bool,
    widths: tuple[int, ...] = ROLLUP_WIDTHS,
) -> ReadPlan:
    """The coarsest rollup width that still gives the buckets the budget allows (so a read
    touches at most about 4 rows per output bucket however long the series), or the points
    when the series fits the budget or is too short for the finest width."""
    span = last_step - first_step + 1
    if count <= budget:
        return ReadPlan(None, span)
    per_bucket = 3 if has_non_finite else 2
    buckets = max(1, budget // per_bucket)
    trim = budget < per_bucket
    for width in sorted(widths, reverse=True):
        if last_step // width - first_step // width + 1 >= buckets:
            return ReadPlan(width, buckets, trim)
    return ReadPlan(None, buckets, trim)
