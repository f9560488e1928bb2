"""Where runs' configs differ: pure, no database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from logbook.audit import diff_fields


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as {"optimizer.lr": 3e-4, ...}: nested settings compare one by one."""
    if isinstance(config, Mapping) and (config or not prefix):
        flat: dict[str, Any] = {}
        for key, value in config.items():
            flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: config}


def run_settings(config: Mapping[str, Any], tags: Sequence[str]) -> dict[str, Any]:
    """A run's config with its tags as one more setting (MLflow tags arrive as `owner=alice`
    tags), so compare shows a changed owner or label as it shows a changed learning rate."""
    if not tags:
        return dict(config)
    return {**config, "tags" if "tags" not in config else "run tags": ", ".join(sorted(tags))}


def config_differences(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """[{"key", "values": [one per config, None where absent]}] for every setting that is not
    the same in all configs (each compared with the first, as the logbook diffs an entry's
    before and after), sorted by key."""
    flat = [flatten(config) for config in configs]
    keys = sorted({key for one in flat for key in one})
    changed: set[str] = set()
    for other in flat[1:]:
        changed.update(diff_fields(flat[0], other, keys))
    return [
        {"key": key, "values": [one.get(key) for one in flat]} for key in keys if key in changed
    ]
