"""What changed between two versions of a row, as the audit trail records it (pure):
{"field": [before, after]}. logbook.services.audit writes the trail."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any


def _plain(value: Any) -> Any:
    """A JSON-friendly, readable form of a field value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple | set):
        return (
            sorted(_plain(item) for item in value)
            if isinstance(value, set)
            else [_plain(item) for item in value]
        )
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)


def diff_fields(
    before: Mapping[str, Any], after: Mapping[str, Any], fields: Iterable[str]
) -> dict[str, list[Any]]:
    """{"field": [before, after]} for each of `fields` whose value changed."""
    changes: dict[str, list[Any]] = {}
    for name in fields:
        old, new = _plain(before.get(name)), _plain(after.get(name))
        if old != new:
            changes[name] = [old, new]
    return changes
