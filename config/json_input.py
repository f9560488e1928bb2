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


# Arrays and objects nested deeper than this are refused: every reader after the parse (the
# text checks, serializers, json_path_of) walks the document recursively, and at ~990 levels
# Python's recursion limit made that a 500 (issue 42, finding 8). No field of any body nests
# past a few levels; a job's run_info config is the deepest, and far from this.
MAX_DEPTH = 100


class TooDeepError(ValueError):
    """A document nested deeper than MAX_DEPTH."""


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

    try:
        doc = json.loads(body, parse_int=parse_int, **options)
    except RecursionError as exc:
        raise TooDeepError(f"the body nests arrays or objects more than {MAX_DEPTH} deep") from exc
    depth_check(doc)
    if oversize:
        where = json_path_of(doc, lambda item: isinstance(item, _OversizeInteger)) or "the body"
        raise OversizeIntegerError(
            f"{where}: an integer of {oversize[0].digits} digits is too large for any field."
        )
    return doc


def depth_check(doc: Any, limit: int = MAX_DEPTH) -> None:
    """Raise TooDeepError if `doc` nests lists or dicts more than `limit` deep. Iterative:
    it must not itself run out of stack on what it refuses."""
    level: list[Any] = [doc] if isinstance(doc, dict | list) else []
    # After k passes `level` holds the containers k + 1 deep.
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return
    raise TooDeepError(f"the body nests arrays or objects more than {limit} deep")


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
