"""What changed between two configs a job sent (run_info.config, kept per attempt): pure, for
every app that reasons about a config change (SDC's attempt pairs, slowdown causes, the
logbook's before → after table, compare)."""

from __future__ import annotations

import json
from collections.abc import Mapping

_UNSET = object()
UNSET_TEXT = "(unset)"
VALUE_MAX_CHARS = 200


def flat(config: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """A nested config as {"optimizer.lr": 3e-4, ...}: nested settings compare one by one."""
    found: dict[str, object] = {}
    for key, value in config.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            found.update(flat(value, path))
        else:
            found[path] = value
    return found


def value_text(value: object) -> str:
    if value is _UNSET:
        return UNSET_TEXT
    if isinstance(value, str):
        return value[:VALUE_MAX_CHARS]
    return json.dumps(value, sort_keys=True, default=str)[:VALUE_MAX_CHARS]


def config_changes(
    before: Mapping[str, object], after: Mapping[str, object]
) -> list[tuple[str, str, str]]:
    """(key, before, after) of each setting whose value differs, nested settings by their
    dotted path, values as text (a setting one side lacks is "(unset)"), in key order."""
    one, two = flat(before), flat(after)
    changes = []
    for key in sorted(set(one) | set(two)):
        a, b = one.get(key, _UNSET), two.get(key, _UNSET)
        if a != b:
            changes.append((key, value_text(a), value_text(b)))
    return changes
