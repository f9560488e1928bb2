"""The API's orjson renderer writes what DRF's JSONRenderer writes."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import orjson
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from config.renderers import FastJSONRenderer


def test_it_renders_byte_for_byte_what_drf_renders() -> None:
    # given a payload with every kind of value the APIs answer
    payload = ReturnDict(
        {
            "when": datetime(2026, 11, 22, 3, 4, 5, 678901, tzinfo=UTC),
            "day": date(2026, 11, 22),
            "took": timedelta(seconds=90),
            "cost": Decimal("1.50"),
            "id": uuid.UUID(int=7),
            "label": gettext_lazy("Run"),
            "errors": ReturnList([ErrorDetail("must be >= 0", code="min_value")], serializer=None),
            "values": [1, 2.5, -0.0, None, True, "ü"],
            "nested": {"a": {"b": []}},
        },
        serializer=None,
    )
    # when both render it, then the bytes are the same
    assert FastJSONRenderer().render(payload) == JSONRenderer().render(payload)


def test_a_nan_is_null_not_an_error() -> None:
    assert orjson.loads(FastJSONRenderer().render({"v": math.nan})) == {"v": None}


def test_nothing_renders_as_an_empty_body() -> None:
    assert FastJSONRenderer().render(None) == b""
