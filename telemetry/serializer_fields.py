"""The API's number and time fields, shared by every app's serializers: a measured value keeps
NaN and ±Infinity (as strings), a derived one is null when it has none; times as isoformat
writes them."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from telemetry.json_numbers import finite_or_null
from telemetry.selectors import json_number


@extend_schema_field(OpenApiTypes.DATETIME)
class Time(serializers.Field):
    """An aware datetime as Python's isoformat writes it (null when absent)."""

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


@extend_schema_field(
    {
        "oneOf": [
            {"type": "number"},
            {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]},
        ],
        "nullable": True,
    }
)
class MeasuredNumber(serializers.Field):
    """A measured value: NaN and ±Infinity kept, as strings."""

    def to_representation(self, value: float) -> float | str:
        return json_number(float(value))


@extend_schema_field({"type": "number", "nullable": True})
class DerivedNumber(serializers.Field):
    """A derived figure: null when it has no finite value."""

    def to_representation(self, value: float) -> float | None:
        number = float(value)
        return number if math.isfinite(number) else None


@extend_schema_field({"type": "object", "additionalProperties": True})
class FiniteJson(serializers.Field):
    """Free-form JSON (a formula's inputs, an audit event's changes) with derived numbers."""

    def to_representation(self, value: Any) -> Any:
        return finite_or_null(value)
