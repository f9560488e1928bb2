"""A config change at the start of the failing attempt, as auto-triage evidence. Pure.

A job that restarts with a setting or a version other than its last attempt's and then fails
soon after points at that change (the taxonomy's "Config or Dataset Change" and "Dependency").
The public corpora's labels rest on such changes more than on the message's words
(docs/triage.md, "Sixth round": a version or a setting fixed what looks like a bug). The
message cannot say so; the attempts' configs (run_info.config) can.

- **Which category**: a change of a software version, image or package is a `dependency`;
  any other setting a `config-change`.
- **How strongly**: a change explains a failure in the attempt's first hour (a broken setting
  breaks the job at once: the first step, checkpoint or evaluation); later it is a hint that
  explains nothing alone. Both weights sit beside the message rules' (0.5-0.99): a message
  that names a cause still wins, the change is then one more evidence line.
- **Routine keys**: a key that changed at every earlier restart of the run (a resume step, a
  new output directory) says nothing about this one.
- **The logbook too**: a job's config_change note or on-call's entry tied to the attempt
  tells of a change the configs may not hold ("Bumped NCCL to 2.21.5"); one change, told
  twice, is one piece of evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

DEPENDENCY_SLUG = "dependency"
CONFIG_CHANGE_SLUG = "config-change"

# From a change in the attempt's first hour, the change explains the failure (above
# triage_combine.EXPLAINS, 0.3), below any message rule's own weight.
EARLY_S = 3600.0
EARLY_WEIGHT = 0.4
LATE_WEIGHT = 0.15
# Earlier restarts that must all have changed a key for it to count as routine.
ROUTINE_AFTER = 2
KEYS_SHOWN = 5

# A dotted key's part that names software: the image, a package or its version.
VERSION_KEY = re.compile(
    r"(^|[._-])(version|versions|image|container|docker|wheel|wheels|package|packages|pip|conda"
    r"|requirements|torch|pytorch|cuda|cudnn|nccl|driver|jax|jaxlib|transformers|deepspeed"
    r"|megatron|nemo|apex|triton|flash_attn|vllm|python)([._-]|$)",
    re.IGNORECASE,
)
# A value that reads as a version: three parts or a "v" ("2.4.0", "v1.2", "12.4.1-cudnn9"), or
# an image's tag ("nvcr.io/nvidia/pytorch:24.05-py3"); not a number ("0.0003" is a setting).
VERSION_VALUE = re.compile(
    r"^\s*(\d+(\.\d+){2,}|v\d+(\.\d+)+)([.+-][\w.]+)?\s*$|:[\w.-]*\d+\.\d+[\w.-]*$"
)

# The same in an entry's title, as people write it: "Bumped NCCL to 2.21.5", "new image".
VERSION_WORDS = re.compile(
    r"\b(versions?|image|container|docker|wheels?|packages?|pip|conda|requirements|upgraded?"
    r"|downgraded?|bump(ed)?|pinned|torch|pytorch|cuda|cudnn|nccl|driver|jax|jaxlib"
    r"|transformers|deepspeed|megatron|nemo|apex|triton|flash.?attn|vllm|python)\b"
    r"|\bv?\d+\.\d+\.\d+",
    re.IGNORECASE,
)

Change = tuple[str, str, str]  # (dotted key, before, after), as telemetry.configs gives them


def routine_keys(earlier: Sequence[Sequence[Change]]) -> set[str]:
    """The keys that changed at every one of the run's earlier restarts (at least
    ROUTINE_AFTER of them): what the job changes at each restart, not a change of mind."""
    if len(earlier) < ROUTINE_AFTER:
        return set()
    keys = [{key for key, _, _ in changes} for changes in earlier]
    return set.intersection(*keys)


def is_version_change(change: Change) -> bool:
    key, before, after = change
    parts = key.replace("/", ".")
    return bool(VERSION_KEY.search(parts)) or (
        bool(VERSION_VALUE.search(before)) and bool(VERSION_VALUE.search(after))
    )


def config_category(changes: Sequence[Change], said: Sequence[str] = ()) -> str:
    """`dependency` when any change (or a logbook entry's title `said` of a change it lists
    no setting of) is a software version, image or package, else `config-change`."""
    versions = any(is_version_change(c) for c in changes) or any(
        VERSION_WORDS.search(title) for title in said
    )
    return DEPENDENCY_SLUG if versions else CONFIG_CHANGE_SLUG


def config_weight(after_s: float | None) -> float:
    """How strongly a change at the attempt's start explains a failure `after_s` seconds into
    the attempt (unknown: as a late one)."""
    if after_s is not None and 0 <= after_s <= EARLY_S:
        return EARLY_WEIGHT
    return LATE_WEIGHT


LOGBOOK_HEADER = "The logbook records a config change of this attempt"


def attempt_header(attempt: int, previous: int) -> str:
    return f"Attempt {attempt} started with a config other than attempt {previous}'s"


def config_text(header: str, changes: Sequence[Change], said: Sequence[str] = ()) -> str:
    """The evidence line: what changed, versions first, as on-call would check it, then the
    titles of logbook entries that list no setting."""
    ordered = sorted(changes, key=lambda change: (not is_version_change(change), change[0]))
    parts = [f"{key} {before} → {after}" for key, before, after in ordered[:KEYS_SHOWN]]
    parts += [f"“{title}”" for title in said[: max(KEYS_SHOWN - len(parts), 1)]]
    more = len(ordered) + len(said) - len(parts)
    return f"{header}: " + "; ".join(parts) + (f" and {more} more" if more > 0 else "")
