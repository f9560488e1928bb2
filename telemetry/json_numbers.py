"""Numbers for JSON, which has no NaN or Infinity. The policy (docs/ingest.md, "NaN and
infinities in what Chronicle answers"): a derived figure without a finite value is null."""

from __future__ import annotations

import math
from typing import Any


def finite_or_null(value: Any) -> Any:
    """`value` with every non-finite float in it (at any depth) replaced by null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(item) for item in value]
    return value


def json_number(value: float) -> float | str:
    """A measured value in JSON, which has no NaN or Infinity: those as the strings ingest
    accepts (and MLflow writes). Derived figures without a value are null instead (the
    policy: docs/ingest.md, "NaN and infinities in what Chronicle answers")."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
