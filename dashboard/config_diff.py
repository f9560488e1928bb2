"""Where runs' configs differ: pure, no database."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from logbook.audit import diff_fields
from telemetry.choices import experiment_of, labels_besides_experiment


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as {"optimizer.lr": 3e-4, ...}: nested settings compare one by one."""
    if isinstance(config, Mapping) and (config or not prefix):
        flat: dict[str, Any] = {}
        for key, value in config.items():
            flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: config}


# Compare's row for the MLflow experiment a run was logged under (its experiment=<name> label).
EXPERIMENT_SETTING = "MLflow experiment"


def run_settings(
    config: Mapping[str, Any], tags: Sequence[str], *, shared: Collection[str] = ()
) -> dict[str, Any]:
    """A run's config with its labels as more settings, so compare shows a changed owner or
    label as it shows a changed learning rate: its MLflow experiment as one setting, and the
    rest (MLflow tags arrive as `owner=alice`) as "tags" less the `shared` labels every
    compared run carries, so the row names what differs, not what the runs have in common."""
    settings = dict(config)
    if experiment := experiment_of(tags):
        settings[EXPERIMENT_SETTING] = experiment
    own = sorted(set(labels_besides_experiment(tags)) - set(shared))
    if own:
        settings["tags" if "tags" not in config else "run tags"] = ", ".join(own)
    return settings


def runs_settings(runs: Sequence[tuple[Mapping[str, Any], Sequence[str]]]) -> list[dict[str, Any]]:
    """run_settings of each (config, tags) of the runs compared, the labels all of them carry
    left out of their tags."""
    labels = [set(tags) for _, tags in runs]
    shared = set.intersection(*labels) if labels else set()
    return [run_settings(config, tags, shared=shared) for config, tags in runs]


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
