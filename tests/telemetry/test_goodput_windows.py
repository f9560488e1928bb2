"""Window summaries (per attempt, rolling, any window) read only the spans near a window and
count the ones wholly inside it as they are: the figures must be the same, bit for bit, as
weighting every span of the ledger (the reference below, which is how summarise counted them
before), on a generated run with restarts, slow steps, evals, checkpoint saves and planned
maintenance."""

from __future__ import annotations

import numpy as np
import pytest

from telemetry import goodput as g
from telemetry import goodput_ledger


def generated_run(seed: int, attempts: int = 12, steps: int = 3_000) -> g.GoodputInputs:
    """A run of `attempts` launches: each resumes a few hundred steps back (wasted progress),
    its steps ~4 s apart with jitter, a slow step now and then (long spans), an eval inside
    some steps, a blocking save every 250 steps, a restore and a data load per launch."""
    rng = np.random.default_rng(seed)
    records, intervals, saves, restores = [], [], [], []
    clock, step = 1_000.0, 0
    for number in range(1, attempts + 1):
        job_start = clock
        intervals.append(g.Interval("accelerator_init", clock, clock + 30.0))
        intervals.append(g.Interval("data_loading", clock + 30.0, clock + 42.5))
        restores.append(g.Restore(duration_s=8.25, at=clock + 50.0))
        clock += 60.0 + rng.uniform(0, 20)
        count = int(rng.integers(steps // 2, steps))
        gaps = 4.0 + rng.normal(0, 0.05, count)
        gaps[rng.random(count) < 0.01] *= rng.uniform(5, 40)  # stalls
        times = clock + np.concatenate([[0.0], np.cumsum(gaps[:-1])])
        numbers = np.arange(step, step + count, dtype=np.float64)
        for index in rng.choice(count - 1, size=5, replace=False):
            begin = times[index] + 0.25
            intervals.append(g.Interval("custom", begin, begin + 1.5, label="eval"))
        for index in np.flatnonzero(numbers % 250 == 0):
            saves.append(g.CheckpointSave(int(numbers[index]), 2.5, float(times[index]) + 3.0))
        records.append(
            g.AttemptRecord(
                number=number,
                job_start=job_start,
                job_end=float(times[-1]) + 2.0 if number == attempts else None,
                completed=number == attempts,
                step_starts=np.column_stack([numbers, times]),
            )
        )
        # the next launch resumes a few hundred steps back, after minutes to hours down
        step += count - int(rng.integers(1, 400))
        clock = float(times[-1]) + rng.uniform(60, 7_200)
    return g.GoodputInputs(
        attempts=records, intervals=intervals, checkpoint_saves=saves, restores=restores
    )


def reference_in_window(
    spans: g.Spans, low: float, high: float, exclusions: list[tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Every span of the ledger, weighted by its share of [low, high) outside exclusions."""
    lengths = spans.ends - spans.starts
    weight = np.zeros_like(spans.amounts)
    spread = lengths > 0
    low_end = np.maximum(spans.starts[spread], low)
    high_end = np.minimum(spans.ends[spread], high)
    seen = np.clip(high_end - low_end, 0.0, None)
    for ex_start, ex_end in exclusions:
        seen -= np.clip(np.minimum(high_end, ex_end) - np.maximum(low_end, ex_start), 0.0, None)
    weight[spread] = np.clip(seen, 0.0, None) / lengths[spread]
    at = spans.starts[~spread]
    inside = (at >= low) & (at < high)
    for ex_start, ex_end in exclusions:
        inside &= ~((at >= ex_start) & (at < ex_end))
    weight[~spread] = inside.astype(np.float64)
    return spans.codes, spans.amounts * weight


def windows_of(ledger: g.Ledger, seed: int) -> list[tuple[float, float] | None]:
    rng = np.random.default_rng(seed)
    start, end = ledger.job_start, ledger.job_end
    width = (end - start) / 12
    rolling = [(float(e) - width, float(e)) for e in np.linspace(start, end, 61)[1:]]
    narrow = [(float(a), float(a) + rng.uniform(0.1, 30)) for a in rng.uniform(start, end, 40)]
    wide = [tuple(sorted(rng.uniform(start - 100, end + 100, 2))) for _ in range(40)]
    # a window's edge on a step's start or end, where "wholly inside" is decided
    spans = ledger.spans()
    edges = [
        (float(spans.starts[i]), float(spans.ends[j])) for i, j in rng.integers(0, 5_000, (20, 2))
    ]
    return [*rolling, *narrow, *wide, *edges, (start, end), (0.0, 1.0), None]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("excluded", [False, True])
def test_window_summaries_equal_weighting_every_span(monkeypatch, seed, excluded):
    ledger = g.build_ledger(generated_run(seed))
    assert ledger is not None and ledger.disruptions == 11
    spans = ledger.spans()
    assert spans.long.size > 0  # the stalls: spans the window search treats apart
    exclusions = []
    if excluded:
        middle = (ledger.job_start + ledger.job_end) / 2
        exclusions = [(middle, middle + 3_600.0), (ledger.job_start - 5, ledger.job_start + 90)]
    windows = windows_of(ledger, seed)

    fast = [g.summarise(ledger, window=w, exclusions=exclusions) for w in windows]
    monkeypatch.setattr(g.Spans, "in_window", reference_in_window)
    reference = [g.summarise(ledger, window=w, exclusions=exclusions) for w in windows]

    # repr shows every float to the last bit
    assert [repr(r) for r in fast] == [repr(r) for r in reference]
    assert any(r.productive_s > 0 and r.badput_s[g.WASTED_PROGRESS] > 0 for r in fast)
    assert any(0 < r.goodput < 1 for r in fast)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7, 8, 2_599, 2_600])
def test_median_is_numpys_to_the_bit(size):
    values = np.random.default_rng(size).normal(4.0, 0.05, size)

    assert goodput_ledger._median(values) == float(np.median(values))
    assert goodput_ledger._median(np.abs(values - 4.0)) == float(np.median(np.abs(values - 4.0)))


def test_step_arrays_order_by_step_then_start():
    steps, times = goodput_ledger._step_arrays([(3, 1.0), (1, 5.0), (2, 2.0), (2, 1.5)])

    assert steps.tolist() == [1, 2, 2, 3]
    assert times.tolist() == [5.0, 1.5, 2.0, 1.0]
    steps, times = goodput_ledger._step_arrays(np.array([[1, 9.0], [2, 8.0], [5, 7.0]]))
    assert steps.tolist() == [1, 2, 5] and times.tolist() == [9.0, 8.0, 7.0]
