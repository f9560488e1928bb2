"""Min/max downsampling (telemetry.downsample): spikes, dips and non-finite points survive,
the result fits the budget, and the budget is shared between attempts. Pure numpy, no DB."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from telemetry.downsample import minmax_indices, split_budget

N = 1_000_000
MAX_POINTS = 4000


@pytest.fixture(scope="module")
def noise() -> npt.NDArray[np.float64]:
    """A slowly falling noisy loss curve, values in about [1, 3.5]."""
    rng = np.random.default_rng(1234)
    trend = np.linspace(3.0, 1.5, N)
    return trend + rng.normal(0.0, 0.1, N)


def assert_well_formed(keep: npt.NDArray[np.intp], n: int, max_points: int) -> None:
    assert keep.size <= max_points
    assert np.all(np.diff(keep) > 0), "indices must be sorted and unique"
    assert keep[0] >= 0 and keep[-1] < n


def test_single_step_spike_survives_a_million_points(noise):
    # given a one-step spike in the middle of a noisy series
    values = noise.copy()
    spike_at = 612_345
    values[spike_at] = 50.0

    # when it is downsampled to 4000 points
    keep = minmax_indices(values, MAX_POINTS)

    # then the spike is kept, and the result is a valid, bounded index list
    assert spike_at in keep
    assert_well_formed(keep, N, MAX_POINTS)
    assert keep.size > MAX_POINTS * 0.9, "the budget should be used, not wasted"
    assert values[keep].max() == 50.0


def test_single_negative_dip_survives(noise):
    values = noise.copy()
    dip_at = 77_777
    values[dip_at] = -20.0

    keep = minmax_indices(values, MAX_POINTS)

    assert dip_at in keep
    assert values[keep].min() == -20.0
    assert_well_formed(keep, N, MAX_POINTS)


def test_global_min_and_max_are_always_kept(noise):
    keep = minmax_indices(noise, MAX_POINTS)

    assert int(np.argmin(noise)) in keep
    assert int(np.argmax(noise)) in keep


def test_nan_and_infinity_survive_within_the_budget(noise):
    # given one NaN and one +Infinity far apart, and a spike
    values = noise.copy()
    values[123_456] = math.nan
    values[876_543] = math.inf
    values[500_000] = 40.0

    keep = minmax_indices(values, MAX_POINTS)

    assert 123_456 in keep and 876_543 in keep
    assert 500_000 in keep
    assert_well_formed(keep, N, MAX_POINTS)
    kept = values[keep]
    assert np.isnan(kept).sum() == 1
    assert np.isposinf(kept).sum() == 1


def test_negative_infinity_survives_and_is_not_taken_for_the_minimum():
    values = np.linspace(1.0, 2.0, 10_000)
    values[5000] = -math.inf

    keep = minmax_indices(values, 100)

    assert 5000 in keep
    assert 0 in keep, "the finite minimum is still kept"
    assert_well_formed(keep, values.size, 100)


def test_bucket_of_only_non_finite_values_fits_the_budget():
    values = np.full(10_000, math.nan)
    values[::2] = 1.0

    keep = minmax_indices(values, 90)

    assert_well_formed(keep, values.size, 90)
    assert np.isnan(values[keep]).any()


@pytest.mark.parametrize("n", [0, 1, 2, 10, 4000])
def test_short_series_is_returned_whole(n):
    values = np.arange(n, dtype=np.float64)

    keep = minmax_indices(values, 4000 if n == 4000 else 10)

    assert keep.tolist() == list(range(n))


def test_short_series_keeps_its_nan_points():
    keep = minmax_indices([1.0, math.nan, 2.0], 5)

    assert keep.tolist() == [0, 1, 2]


@pytest.mark.parametrize("max_points", [0, -5])
def test_max_points_below_one_is_refused(max_points):
    with pytest.raises(ValueError, match="at least 1"):
        minmax_indices([1.0, 2.0, 3.0], max_points)


@pytest.mark.parametrize("max_points", [3, 4, 5, 6, 7, 10, 99, 100, 101])
def test_small_budgets_are_respected_with_non_finite_values(max_points):
    values = np.arange(1000, dtype=np.float64)
    values[10] = math.nan
    values[900] = math.inf

    keep = minmax_indices(values, max_points)

    assert_well_formed(keep, values.size, max_points)


def test_budget_of_two_is_respected_with_a_nan():
    keep = minmax_indices([1.0, math.nan, 3.0, 0.0, 5.0], 2)

    assert keep.size <= 2


# --- split_budget ------------------------------------------------------------------------


def test_split_budget_returns_counts_when_everything_fits():
    assert split_budget([10, 20, 30], 100) == [10, 20, 30]
    assert split_budget([10, 20, 30], 60) == [10, 20, 30]
    assert split_budget([], 100) == []


def test_split_budget_is_proportional():
    shares = split_budget([50_000, 10_000], 1000)

    # proportional after each attempt's floor of 2: 5:1 within rounding
    assert abs(shares[0] - 833) <= 2 and abs(shares[1] - 166) <= 2
    assert sum(shares) <= 1000


@pytest.mark.parametrize(
    ("counts", "max_points"),
    [
        ([1_000_000, 1_000_000, 10], 1000),
        ([700_000, 200_000, 100_000], 4000),
        ([5_000, 1_000_000], 2000),
        ([12_345, 67_890, 3_333, 100], 2000),
    ],
)
def test_split_budget_fits_and_never_exceeds_a_series(counts, max_points):
    shares = split_budget(counts, max_points)

    assert len(shares) == len(counts)
    assert sum(shares) <= max_points
    for share, count in zip(shares, counts, strict=True):
        assert 0 <= share <= count
        assert share >= min(2, count), "every non-empty attempt stays visible"
    big = counts.index(max(counts))
    # proportional, give or take the floors of 2 reserved for the other attempts
    assert shares[big] >= max_points * max(counts) // sum(counts) - 2 * len(counts)


@pytest.mark.parametrize(
    ("counts", "max_points"), [([5, 1_000_000], 2000), ([1, 0, 3, 1_000_000], 500)]
)
def test_split_budget_fits_with_a_tiny_attempt_beside_a_huge_one(counts, max_points):
    assert sum(split_budget(counts, max_points)) <= max_points


def test_split_budget_then_minmax_fits_in_the_total():
    rng = np.random.default_rng(7)
    series = [rng.normal(size=n) for n in (30_000, 9_000, 1_000)]
    series[1][4_000] = math.nan

    shares = split_budget([s.size for s in series], 1000)
    kept = [minmax_indices(s, max(share, 2)) for s, share in zip(series, shares, strict=True)]

    assert sum(k.size for k in kept) <= 1000
    assert 4_000 in kept[1]


def test_a_budget_of_one_keeps_the_signal():
    values = np.ones(1000)
    values[10] = 50.0
    values[700] = math.nan

    assert minmax_indices(values, 1).tolist() == [700]
    assert minmax_indices(np.where(np.isnan(values), 1.0, values), 1).tolist() == [10]
