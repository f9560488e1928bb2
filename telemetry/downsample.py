"""Downsampling long series for charts without losing spikes.

For each of `max_points // 2` equal-count buckets the minimum and the maximum are kept (the
W&B approach), never a random sample (TensorBoard) or a stride (which drops single-step
spikes). Non-finite values (a NaN loss is a signal) are kept too: the first of each bucket,
with the bucket count reduced so the result still fits in `max_points`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def minmax_indices(values: npt.ArrayLike, max_points: int) -> npt.NDArray[np.intp]:
    """Sorted indices of the points to keep from `values` (already in step order)."""
    data = np.asarray(values, dtype=np.float64)
    n = data.size
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    if n <= max_points:
        return np.arange(n)
    finite = np.isfinite(data)
    has_non_finite = not bool(finite.all())
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


def split_budget(counts: list[int], max_points: int) -> list[int]:
    """Share `max_points` between series (one per attempt) in proportion to their sizes, at
    least 2 each, never more than a series has."""
    total = sum(counts)
    if total <= max_points:
        return list(counts)
    shares = [max(2, (max_points * count) // total) for count in counts]
    return [min(share, count) for share, count in zip(shares, counts, strict=True)]
