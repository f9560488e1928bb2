"""The straggler scores as nvidia-resiliency-ext defines them, without a database."""

from __future__ import annotations

import numpy as np
import pytest

from telemetry.straggler_scores import (
    individual_scores,
    percentiles,
    relative_scores,
    stragglers,
    streak_start,
)


def test_relative_score_is_the_fastest_ranks_time_over_the_ranks() -> None:
    scores = relative_scores({0: 1.0, 1: 1.25, 2: 2.0})
    assert scores == {0: 1.0, 1: 0.8, 2: 0.5}


def test_relative_score_leaves_out_ranks_without_a_positive_time() -> None:
    assert relative_scores({0: 0.0, 1: 2.0, 2: float("nan")}) == {1: 1.0}
    assert relative_scores({}) == {}


def test_individual_score_is_the_ranks_own_best_over_its_time_now() -> None:
    # Rank 1 used to take 1 s and now takes 2 s: twice as slow as it was, 0.5, even though
    # every rank slowed down together (relative scores would all be 1).
    scores = individual_scores({0: 2.0, 1: 2.0}, {0: 2.0, 1: 1.0})
    assert scores == {0: 1.0, 1: 0.5}


def test_individual_score_without_history_is_one_and_never_above_one() -> None:
    assert individual_scores({3: 1.5}, {}) == {3: 1.0}
    assert individual_scores({3: 1.0}, {3: 2.0}) == {3: 1.0}  # faster than its "best"


def test_a_straggler_is_below_the_threshold_in_every_one_of_the_last_n_windows() -> None:
    windows = [{0: 1.0, 1: 0.6, 2: 0.6}, {0: 1.0, 1: 0.65, 2: 0.9}, {0: 1.0, 1: 0.5, 2: 0.6}]
    assert stragglers(windows, threshold=0.7, windows_needed=3) == {1: 0.5}
    # Only the last two windows count: rank 2's good window is older.
    assert stragglers(windows, threshold=0.7, windows_needed=1) == {1: 0.5, 2: 0.6}


def test_a_gap_or_too_few_windows_is_no_straggler() -> None:
    assert stragglers([{1: 0.1}, {}, {1: 0.1}], threshold=0.7, windows_needed=3) == {}
    assert stragglers([{1: 0.1}], threshold=0.7, windows_needed=2) == {}


def test_a_streak_starts_after_the_last_window_at_or_above_the_threshold() -> None:
    scores = [0.95, 0.8, 0.99, 0.85, 0.8, 0.84]
    assert streak_start(scores, threshold=0.9) == 3
    assert streak_start([0.5, 0.5], threshold=0.9) == 0
    assert streak_start([0.5, 0.95], threshold=0.9) == 2  # not below now: no streak
    assert streak_start([0.5, None, 0.8, 0.8], threshold=0.9) == 2  # a gap ends it
    assert streak_start([0.5, 0.9], threshold=0.9) == 2  # at the threshold is not below


def test_percentiles_interpolate_like_numpy() -> None:
    values = np.arange(1, 101, dtype=float)
    low, median, p90, p99, high = percentiles(values)
    assert (low, high) == (1.0, 100.0)
    assert median == pytest.approx(50.5) and p90 == pytest.approx(90.1)
    assert p99 == pytest.approx(99.01)
