"""The slowdown detector and the rules' pure parts on small series made here."""

from __future__ import annotations

import numpy as np
import pytest

from diagnosis import slowdown_rules as rules
from diagnosis.slowdown_detect import AttemptThroughput, detect, lost_seconds, noise_sigma


def _series(values, *, attempt=1, first_step=0, start=1_000.0, step_s=1.0, excluded=()):
    values = np.asarray(values, dtype=float)
    steps = np.arange(first_step, first_step + len(values), dtype=np.int64)
    times = start + step_s * np.arange(1, len(values) + 1)
    return AttemptThroughput(attempt, steps, values, times, frozenset(excluded))


def _jitter(n, seed=0, level=100.0, amplitude=0.02):
    rng = np.random.default_rng(seed)
    return level * (1 + rng.uniform(-amplitude, amplitude, n))


@pytest.mark.parametrize("seed", range(10))
def test_two_percent_jitter_opens_nothing(seed):
    _, windows = detect([_series(_jitter(2_000, seed))])
    assert windows == []


def test_a_ten_percent_drop_opens_one_window_at_its_steps():
    # given a steady run that loses 10% from step 300 to step 399
    values = _jitter(600, 1)
    values[300:400] *= 0.9
    # when
    points, windows = detect([_series(values)])
    # then
    assert len(windows) == 1
    window = windows[0]
    assert abs(int(points.steps[window.first]) - 300) <= 2
    assert abs(int(points.steps[window.last]) - 399) <= 2
    assert window.drop_pct == pytest.approx(10, abs=1.5)
    # 100 steps of 1 s at 90% pace lost about 10 s
    assert lost_seconds(points, window) == pytest.approx(10, rel=0.25)


def test_a_drop_shorter_than_min_steps_is_not_a_slowdown():
    values = _jitter(600, 2)
    values[300 : 300 + rules.MIN_STEPS // 2] *= 0.7
    _, windows = detect([_series(values)])
    assert windows == []


def test_warm_up_and_checkpoint_steps_are_left_out():
    first = _jitter(300, 3)
    second = _jitter(300, 4)
    second[: rules.WARMUP_STEPS] *= 0.3  # compilation after the restart
    second[100] *= 0.05  # a blocking save at step 390 (and the step after it)
    second[101] *= 0.5
    _, windows = detect(
        [_series(first), _series(second, attempt=2, first_step=290, start=2_000.0, excluded={390})]
    )
    assert windows == []


def test_a_slower_attempt_after_a_restart_is_one_window_of_that_attempt():
    first = _jitter(300, 5)
    second = _jitter(300, 6) * 0.85
    points, windows = detect(
        [_series(first), _series(second, attempt=2, first_step=290, start=2_000.0)]
    )
    assert len(windows) == 1
    assert int(points.attempts[windows[0].first]) == 2
    assert int(points.steps[windows[0].first]) == 290 + rules.WARMUP_STEPS


def test_a_faster_stretch_becomes_the_new_baseline():
    values = np.concatenate([_jitter(300, 7), _jitter(300, 8, level=120.0)])
    values[450:] *= 0.97  # 3% below the new level: within the margin
    _, windows = detect([_series(values)])
    assert windows == []


def test_noise_sigma_ignores_a_level_shift():
    values = np.concatenate([np.full(100, 1.0), np.full(100, 0.5)])
    values += np.random.default_rng(0).normal(0, 0.01, 200)
    assert noise_sigma(values) == pytest.approx(0.01, rel=0.3)


def test_config_differences_flatten_nested_settings():
    before = {"lr": 3e-4, "optimizer": {"beta2": 0.95, "eps": 1e-8}, "seed": 1}
    after = {"lr": 3e-4, "optimizer": {"beta2": 0.99, "eps": 1e-8}, "zero_stage": 3, "seed": 1}
    assert rules.config_differences(before, after) == [
        ("optimizer.beta2", "0.95", "0.99"),
        ("zero_stage", "(unset)", "3"),
    ]


def test_nothing_explaining_a_slowdown_says_unknown_first():
    facts = rules.SlowdownFacts(attempt_before=1, attempt_during=1, at_restart=False, drop_pct=9.0)
    causes = rules.causes_rank(facts)
    assert [cause.kind for cause in causes] == ["unknown"]
    assert "no rank timings" in causes[0].detail


def test_the_what_if_names_the_slow_host_and_its_share():
    ranks_before = {rank: 1.0 for rank in range(16)}
    ranks_during = {**ranks_before, 12: 1.3, 13: 1.25}
    placements = {rank: (f"h{rank // 8}", f"gpu{rank}") for rank in range(16)}
    facts = rules.SlowdownFacts(
        attempt_before=1,
        attempt_during=1,
        at_restart=False,
        drop_pct=23.0,
        gpu_hours_lost=10.0,
        placements=placements,
        sections_before={"step": ranks_before},
        sections_during={"step": ranks_during},
    )
    top = rules.causes_rank(facts)[0]
    assert top.kind == "straggler"
    assert top.hosts == ("h1",)
    assert top.ranks == (12, 13)
    # Had h1's ranks run at the median (1.0 s), the step would have taken 1.0 s, not 1.3 s:
    # all of the growth, so all of the GPU-hours.
    assert top.gpu_hours == pytest.approx(10.0)
