"""The heat map's arithmetic, pure (numpy, no ORM): ranks grouped into rows, each row's
slowest rank, and which stored level of time buckets a window is drawn from.

At 16,384 ranks a row of the heat map is a run of 64 consecutive ranks showing the slowest of
them (max of the ranks' means), so one slow rank among 64 still lights its row, as min/max
downsampling keeps a spike. Group sizes are powers of two: rows stored with different sizes
(a job that grew between attempts) regroup exactly into the largest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# A heat map is at most this many rows of ranks...
MAX_ROWS = 256
# ...and this many columns of time, drawn from the finest stored level that fits.
MAX_COLUMNS = 300


def group_ranks_for(rank_span: int, max_rows: int = MAX_ROWS) -> int:
    """The smallest power of two g with ceil(rank_span / g) <= max_rows."""
    needed = max(1, math.ceil(rank_span / max_rows))
    return 1 << (needed - 1).bit_length()


def slowest_per_group(
    ranks: Sequence[int], means_s: Sequence[float], group_ranks: int
) -> tuple[list[float | None], list[int | None]]:
    """Per group of `group_ranks` consecutive ranks (group i holds ranks i*g .. i*g+g-1): the
    largest mean and the rank that has it; None for a group where no rank reported."""
    if not len(ranks):
        return [], []
    r = np.asarray(ranks, dtype=np.int64)
    m = np.asarray(means_s, dtype=np.float64)
    n_groups = int(r.max()) // group_ranks + 1
    # Sort by (group, mean descending): the first of each group is its slowest rank.
    order = np.lexsort((-m, r // group_ranks))
    groups = r[order] // group_ranks
    first = np.ones(len(order), dtype=bool)
    first[1:] = groups[1:] != groups[:-1]
    maxes: list[float | None] = [None] * n_groups
    slowest: list[int | None] = [None] * n_groups
    for group, index in zip(groups[first].tolist(), order[first].tolist(), strict=True):
        maxes[group] = float(m[index])
        slowest[group] = int(r[index])
    return maxes, slowest


def regroup(
    maxes: Sequence[float | None], slowest: Sequence[int | None], factor: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge every `factor` consecutive groups into one (max, and the rank that has it), as
    float and int arrays with NaN and -1 where no rank reported."""
    # None becomes NaN on the way in (numpy's float conversion), then -1 for the ranks.
    values = np.array(maxes, dtype=np.float64)
    ranks = np.nan_to_num(np.array(slowest, dtype=np.float64), nan=-1).astype(np.int64)
    if factor == 1:
        return values, ranks
    size = math.ceil(len(values) / factor) * factor
    values = np.pad(values, (0, size - len(values)), constant_values=np.nan).reshape(-1, factor)
    ranks = np.pad(ranks, (0, size - len(ranks)), constant_values=-1).reshape(-1, factor)
    filled = np.where(np.isnan(values), -np.inf, values)
    pick = filled.argmax(axis=1)
    rows = np.arange(len(values))
    return values[rows, pick], ranks[rows, pick]


def level_for_span(span_s: float, levels_s: Sequence[int], max_columns: int = MAX_COLUMNS) -> int:
    """The finest level (bucket width in seconds) that draws `span_s` in at most
    `max_columns` columns; the coarsest when none does (columns are then merged)."""
    ordered = sorted(levels_s)
    for width in ordered:
        if span_s / width < max_columns:
            return width
    return ordered[-1]
