"""The ingest phase's slices (bench.load): a round's forms take turns slice by slice, so
the slices must cover the workload exactly, at batch edges, and sum back to one figure."""

from __future__ import annotations

import numpy as np
import pytest

from bench import load


@pytest.mark.parametrize("points, parts", [(1_000_000, 10), (20_000, 2), (12_345, 4), (900, 3)])
def test_the_slices_cover_every_step_once_cut_at_batch_edges(points, parts):
    workload = load.workload(points)
    slices = [workload.part(index, parts) for index in range(parts)]
    steps = np.concatenate([part.steps for part in slices])
    assert np.array_equal(steps, workload.steps)
    assert np.array_equal(np.concatenate([part.times for part in slices]), workload.times)
    for name, column in workload.values.items():
        assert np.array_equal(np.concatenate([part.values[name] for part in slices]), column)
    # no batch is split between two slices: they send the workload's batches, in order
    sizes = [cut.stop - cut.start for part in slices for cut in part.batches()]
    assert sizes == [cut.stop - cut.start for cut in workload.batches()]


def _figure(points: int, seconds: float, cpu_s: float, latencies: list[float]) -> load.IngestFigure:
    return load.IngestFigure(
        system="chronicle-mlflow", clients=1, points=points, batches=len(latencies),
        seconds=seconds, points_per_s=points / seconds, p50_ms=0.0, p95_ms=0.0, retries=1,
        failures=[], server_cpu_s=cpu_s, points_per_cpu_s=points / cpu_s,
        latencies_ms=latencies,
    )  # fmt: skip


def test_a_forms_slices_sum_to_one_measurement():
    total = load.figures_sum(
        [_figure(3000, 1.0, 2.0, [10.0, 20.0, 30.0]), _figure(1000, 3.0, 2.0, [100.0])]
    )
    assert (total.points, total.batches, total.retries) == (4000, 4, 2)
    assert total.points_per_s == 1000.0  # 4,000 points over 4 s, not the mean of 3,000 and 333
    assert total.points_per_cpu_s == 1000.0
    assert total.p50_ms == 25.0 and total.p95_ms == 100.0  # over every request
    assert "latencies_ms" not in total.as_dict()
