"""Goodput and badput maths, checked against the worked example that was run through Google's
ml-goodput-measurement calculator, and against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from telemetry import goodput as g


def worked_example() -> g.GoodputInputs:
    """Times in seconds. Job start 0; accelerator init 0-1, prep 1-3, data loading 3-5; steps
    0..9 start at 10, 20, 23, ..., 44; a 2 s eval inside step 5; crash; job start 100, data
    loading 101-102, resume from the step-7 checkpoint at 105, steps 7..11 every 3 s; job end
    120 (completed)."""
    first = [(0, 10.0)] + [(step, 20.0 + 3 * (step - 1)) for step in range(1, 10)]
    second = [(step, 105.0 + 3 * (step - 7)) for step in range(7, 12)]
    step_5_start = dict(first)[5]
    return g.GoodputInputs(
        attempts=[
            g.AttemptRecord(number=1, job_start=0.0, step_starts=first),
            g.AttemptRecord(
                number=2, job_start=100.0, job_end=120.0, completed=True, step_starts=second
            ),
        ],
        intervals=[
            g.Interval("accelerator_init", 0.0, 1.0),
            g.Interval("training_prep", 1.0, 3.0),
            g.Interval("data_loading", 3.0, 5.0),
            g.Interval("custom", step_5_start + 0.5, step_5_start + 2.5, label="eval"),
            g.Interval("data_loading", 101.0, 102.0),
        ],
    )


def test_worked_example_reproduces_every_bucket():
    result = g.goodput(worked_example())

    assert result is not None
    # Hand computation (ecosystem-interfaces.md 5.4): segment 1 keeps 0->7 = 10+3+3+3+3+(3-2)+3
    # = 26, typical = 16/6, startup = 10 - 16/6; segment 2 = 4 x 3 + (120 - 117).
    startup = 10 - 16 / 6
    productive = (26 - startup) + 15
    assert result.elapsed_s == pytest.approx(120)
    assert result.productive_s == pytest.approx(productive)
    assert result.productive_s == pytest.approx(33.667, abs=5e-4)
    assert result.goodput_pct == pytest.approx(28.06, abs=5e-3)
    badput = result.badput_s
    assert badput[g.PROGRAM_STARTUP] == pytest.approx(7.333, abs=5e-4)
    assert badput[g.WASTED_PROGRESS] == pytest.approx(6)
    assert badput[g.INFRASTRUCTURE_RECOVERY] == pytest.approx(56)
    assert badput[g.DATA_LOADING_SYNC] == pytest.approx(3)
    assert badput[g.ACCELERATOR_INIT] == pytest.approx(1)
    assert badput[g.TRAINING_PREP] == pytest.approx(2)
    assert badput["custom:eval"] == pytest.approx(2)
    assert badput[g.CHECKPOINT_SAVE] == 0 and badput[g.CHECKPOINT_RESTORE] == 0
    assert badput[g.OTHER] == pytest.approx(9.0)
    assert result.data_loading_async_s == 0
    assert result.disruptions == 1
    # every second of the 120 is accounted for once
    assert result.productive_s + sum(badput.values()) == pytest.approx(120)


def test_worked_example_segments_are_explained():
    result = g.goodput(worked_example())

    assert result is not None
    first, second = result.segments
    assert (first.attempt, first.first_step, first.last_step, first.resume_step) == (1, 0, 9, 7)
    assert (first.kept_intervals, first.wasted_intervals) == (7, 2)
    assert first.first_step_s == pytest.approx(10)
    assert first.typical_step_s == pytest.approx(16 / 6)
    assert (second.resume_step, second.kept_intervals, second.program_startup_s) == (11, 4, 0)


def test_the_last_step_counts_only_when_the_job_completed():
    inputs = worked_example()
    attempts = list(inputs.attempts)
    attempts[1] = g.AttemptRecord(
        number=2, job_start=100.0, job_end=120.0, completed=False,
        step_starts=attempts[1].step_starts,
    )  # fmt: skip

    result = g.goodput(g.GoodputInputs(attempts=attempts, intervals=inputs.intervals))

    assert result is not None
    # the 3 s of step 11 move from productive to OTHER
    assert result.productive_s == pytest.approx(33.667 - 3, abs=5e-4)
    assert result.badput_s[g.OTHER] == pytest.approx(12.0)


def test_planned_maintenance_is_excluded_from_elapsed_and_buckets():
    # given maintenance from 60 to 90, inside the 44-100 infrastructure recovery
    ledger = g.build_ledger(worked_example())
    assert ledger is not None

    # when
    result = g.summarise(ledger, exclusions=[(60.0, 80.0), (70.0, 90.0)])

    # then the merged 30 s leave elapsed time and infrastructure recovery, nothing else
    assert result.excluded_s == pytest.approx(30)
    assert result.elapsed_s == pytest.approx(90)
    assert result.badput_s[g.INFRASTRUCTURE_RECOVERY] == pytest.approx(26)
    assert result.productive_s == pytest.approx(33.667, abs=5e-4)
    assert result.goodput_pct == pytest.approx(100 * 33.6667 / 90, abs=1e-2)
    assert result.badput_s[g.OTHER] == pytest.approx(9.0)


def test_an_exclusion_over_steps_removes_that_step_time():
    ledger = g.build_ledger(worked_example())
    assert ledger is not None

    # 108-111 is step 8's whole interval in attempt 2 (3 s of productive time)
    result = g.summarise(ledger, exclusions=[(108.0, 111.0)])

    assert result.elapsed_s == pytest.approx(117)
    assert result.productive_s == pytest.approx(33.667 - 3, abs=5e-4)


def test_window_counts_only_what_falls_inside_it():
    ledger = g.build_ledger(worked_example())
    assert ledger is not None

    # the second launch alone: job start 100 to job end 120
    result = g.summarise(ledger, window=(100.0, 200.0))

    assert result.window_start == 100 and result.window_end == 120
    assert result.elapsed_s == pytest.approx(20)
    assert result.productive_s == pytest.approx(15)
    assert result.badput_s[g.DATA_LOADING_SYNC] == pytest.approx(1)
    assert result.badput_s[g.INFRASTRUCTURE_RECOVERY] == 0
    # 100-101 and 102-105 are unaccounted for
    assert result.badput_s[g.OTHER] == pytest.approx(4)
    assert result.goodput == pytest.approx(0.75)


def test_window_splits_a_span_pro_rata():
    ledger = g.build_ledger(worked_example())
    assert ledger is not None

    # 50-80 lies inside infrastructure recovery (44-100)
    result = g.summarise(ledger, window=(50.0, 80.0))

    assert result.elapsed_s == pytest.approx(30)
    assert result.badput_s[g.INFRASTRUCTURE_RECOVERY] == pytest.approx(30)
    assert result.goodput == 0


def test_rolling_windows_cover_the_job():
    ledger = g.build_ledger(worked_example())
    assert ledger is not None

    series = g.rolling_goodput(ledger, width_s=20, n_windows=6)

    # windows end at 20, 40, ..., 120; the one ending at 80 is all recovery
    assert [r.window_end for r in series] == pytest.approx([20, 40, 60, 80, 100, 120])
    assert series[3].goodput == 0
    assert series[-1].goodput == pytest.approx(0.75)
    # 20-40 is six whole 3 s intervals (steps 1..6, one holding the 2 s eval): 18 - 2 = 16
    assert series[1].productive_s == pytest.approx(16)


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        # median 10, |deviations| 0,0,0,1,1,90 -> MAD 0.5; cut 11.5 drops the 100 s stall
        ([10, 10, 10, 11, 9, 100], 10.0),
        # no spread: MAD 0, so anything above the median is an outlier
        ([3, 3, 3, 30], 3.0),
        ([4.0], 4.0),
    ],
)
def test_typical_step_time_is_the_mean_below_median_plus_three_mad(times, expected):
    assert g.typical_step_time(times) == pytest.approx(expected)


def test_typical_step_time_of_nothing_is_nan():
    assert math.isnan(g.typical_step_time([]))


def test_program_startup_ignores_a_slow_outlier_step():
    # given a 20 s first step, then 3, 3, 3 and a 30 s stall, job completed at the 6th start
    steps = [(0, 0.0), (1, 20.0), (2, 23.0), (3, 26.0), (4, 29.0), (5, 59.0)]
    inputs = g.GoodputInputs(
        attempts=[
            g.AttemptRecord(1, job_start=0.0, job_end=59.0, completed=True, step_starts=steps)
        ]
    )

    result = g.goodput(inputs)

    # then startup is measured against the typical 3 s, not the mean 9.75 the stall inflates
    assert result is not None
    assert result.badput_s[g.PROGRAM_STARTUP] == pytest.approx(17)
    assert result.productive_s == pytest.approx(59 - 17)


def test_single_step_segment_has_no_startup():
    # given an attempt that began one step (0->1) and crashed; the next resumed at step 1
    inputs = g.GoodputInputs(
        attempts=[
            g.AttemptRecord(1, job_start=0.0, step_starts=[(0, 2.0), (1, 12.0)]),
            g.AttemptRecord(
                2, job_start=30.0, job_end=40.0, completed=True,
                step_starts=[(1, 32.0), (2, 35.0)],
            ),
        ]
    )  # fmt: skip

    result = g.goodput(inputs)

    # then the lone interval (10 s) is productive whole: there is nothing to compare it with
    assert result is not None
    first, second = result.segments
    assert first.kept_intervals == 1 and first.program_startup_s == 0
    assert second.kept_intervals == 1 and second.program_startup_s == 0
    # 10 (0->1) + 3 (1->2) + 5 (step 2 to job end)
    assert result.productive_s == pytest.approx(18)
    assert result.badput_s[g.INFRASTRUCTURE_RECOVERY] == pytest.approx(30 - 12)
    assert result.badput_s[g.WASTED_PROGRESS] == 0


def test_blocking_save_leaves_productive_time_and_restore_is_badput():
    # given the worked example with a 1 s blocking save at step 3 and a 2 s restore at 102-104
    base = worked_example()
    inputs = g.GoodputInputs(
        attempts=base.attempts,
        intervals=base.intervals,
        checkpoint_saves=[g.CheckpointSave(step=3, blocking_s=1.0, at=29.0),
                          g.CheckpointSave(step=3, blocking_s=1.0, at=29.0)],
        restores=[g.Restore(duration_s=2.0, at=104.0)],
    )  # fmt: skip

    result = g.goodput(inputs)

    # then the save counts once, out of productive time; the restore comes out of OTHER
    assert result is not None
    assert result.badput_s[g.CHECKPOINT_SAVE] == pytest.approx(1)
    assert result.productive_s == pytest.approx(33.667 - 1, abs=5e-4)
    assert result.badput_s[g.CHECKPOINT_RESTORE] == pytest.approx(2)
    assert result.badput_s[g.OTHER] == pytest.approx(9.0 - 2)


def test_later_data_loading_in_a_launch_is_asynchronous():
    base = worked_example()
    inputs = g.GoodputInputs(
        attempts=base.attempts,
        intervals=[*base.intervals, g.Interval("data_loading", 30.0, 31.0)],
    )

    result = g.goodput(inputs)

    assert result is not None
    assert result.badput_s[g.DATA_LOADING_SYNC] == pytest.approx(3)
    assert result.data_loading_async_s == pytest.approx(1)
    assert result.badput_s[g.OTHER] == pytest.approx(9.0)


def test_running_job_ends_at_the_query_time():
    base = worked_example()
    attempts = [
        base.attempts[0],
        g.AttemptRecord(2, 100.0, step_starts=base.attempts[1].step_starts),
    ]

    result = g.goodput(g.GoodputInputs(attempts=attempts, as_of=130.0))

    assert result is not None
    assert result.elapsed_s == pytest.approx(130)


def test_no_job_time_gives_no_result():
    assert g.goodput(g.GoodputInputs(attempts=[g.AttemptRecord(1, None)])) is None
