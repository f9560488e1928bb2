"""What the MLflow tests share: the API's root, a fixed wall time, and a metric's points as
Chronicle's own tables hold them."""

from __future__ import annotations

from telemetry.models import MetricPoint, Run

API = "/mlflow/api/2.0/mlflow"
TS_MS = 1_763_700_000_000  # 2025-11-21, a fixed wall time for logged points


def chronicle_points(run: Run, name: str) -> list[tuple[int, int, float | None]]:
    """(attempt number, step, value) of one metric in Chronicle's own tables."""
    return list(
        MetricPoint.objects.filter(series__run=run, series__name=name)
        .order_by("series__attempt__number", "step")
        .values_list("series__attempt__number", "step", "value")
    )
