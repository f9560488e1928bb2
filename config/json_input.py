"""JSON bodies as Python's json module reads them, except that an integer too long for int()
is an error naming where it was. Pure: the ingest contract (no Django) and the API's parser
both use it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

# Python's own limit on int("..."), which json.loads applies (0: none set).
_MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300


class OversizeIntegerError(ValueError):
    """An integer too long for int() (Python refuses over 4,300 digits, against quadratic-time
    parsing); the message names where it was."""


class _OversizeInteger:
    def __init__(self, digits: int) -> None:
        self.digits = digits


def json_loads(body: bytes | str, **options: Any) -> Any:
    """json.loads, but an integer over 4,300 digits raises OversizeIntegerError naming its
    path (`metrics[3].value`), where json.loads raises a bare ValueError."""
    oversize: list[_OversizeInteger] = []

    def parse_int(text: str) -> int | _OversizeInteger:
        digits = len(text) - text.startswith("-")
        if digits > _MAX_INT_DIGITS:
            oversize.append(_OversizeInteger(digits))
            return oversize[-1]
        return int(text)

    doc = json.loads(body, parse_int=parse_int, **options)
    if oversize:
        where = json_path_of(doc, lambda item: isinstance(item, _OversizeInteger)) or "the body"
        raise OversizeIntegerError(
            f"{where}: an integer of {oversize[0].digits} digits is too large for any field."
        )
    return doc


def json_path_of(doc: Any, found: Callable[[Any], bool], where: str = "") -> str | None:
    """The path (`metrics[3].value`) of the first item of `doc` for which `found` is true."""
    if found(doc):
        return where
    if isinstance(doc, dict):
        items: Iterable[tuple[str, Any]] = (
            (f"{where}.{key}" if where else str(key)[:60], value) for key, value in doc.items()
        )
    elif isinstance(doc, list):
        items = ((f"{where}[{index}]", value) for index, value in enumerate(doc))
    else:
        return None
    for path, value in items:
        hit = json_path_of(value, found, path)
        if hit is not None:
            return hit
    return None
