"""Which metrics the run page draws, and how its metric picker groups every metric. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

# With no metric chosen, the run page draws MAX_CHARTS: the ones people look at first, then
# the rest by name; the picker lists every one, so none is out of reach.
MAX_CHARTS = 12
# What people look at first, in this order, matched on a name's last part: a 147-metric run
# drawn "first 12 by name" left out lr (and sorted grad_norm/layer_* before it).
FIRST_LOOKED_AT = (
    re.compile(r"loss$"),  # loss, train/loss, val_loss; not loss_scale
    re.compile(r"^(lr|learning_rate)$"),
    re.compile(r"grad_?norm"),
    re.compile(r"throughput|(tokens|tok|samples)_?per_?s(ec|econd)?$"),
    re.compile(r"(step|iter|iteration)_?time"),
)
# A pinned list longer than this is cut: each chart costs a series read.
MAX_PINNED = 48
NO_PREFIX = "other"
_LAYER = re.compile(r"^(?P<head>.*?)(?P<digits>\d+)$")


@dataclass(frozen=True)
class Section:
    prefix: str  # "train/", "grad_norm/layer_*", or NO_PREFIX
    names: list[str]


def section_of(name: str) -> str:
    """The picker section of a metric name: its path up to the last "/", with a trailing
    number in that path folded to "*" ("grad_norm/layer_12/w" -> "grad_norm/layer_*/");
    names with no "/" go to NO_PREFIX."""
    head, slash, _ = name.rpartition("/")
    if not slash:
        return NO_PREFIX
    parts = []
    for part in head.split("/"):
        match = _LAYER.match(part)
        parts.append(f"{match['head']}*" if match and match["head"] else part)
    return "/".join(parts) + "/"


def sections(names: list[str]) -> list[Section]:
    """Every metric in sections by prefix, sections by name with NO_PREFIX last, each
    section's names in the order given."""
    grouped: dict[str, list[str]] = {}
    for name in names:
        grouped.setdefault(section_of(name), []).append(name)
    order = sorted(grouped, key=lambda prefix: (prefix == NO_PREFIX, prefix))
    return [Section(prefix, grouped[prefix]) for prefix in order]


def looked_at_first(names: list[str]) -> list[str]:
    """The names FIRST_LOOKED_AT matches first, in its order, then the rest; each group in
    the order given (a run's names come sorted by name)."""

    def rank(name: str) -> int:
        leaf = name.rpartition("/")[2].lower()
        first = (i for i, pattern in enumerate(FIRST_LOOKED_AT) if pattern.search(leaf))
        return next(first, len(FIRST_LOOKED_AT))

    return sorted(names, key=rank)


def shown(names: list[str], pinned: list[str]) -> list[str]:
    """The metrics drawn: the pinned ones that exist, in the order pinned (duplicates
    dropped), or the MAX_CHARTS looked at first when none is pinned."""
    known = set(names)
    chosen = [name for name in dict.fromkeys(pinned) if name in known][:MAX_PINNED]
    return chosen or looked_at_first(names)[:MAX_CHARTS]


def pinned_from_query(value: str) -> list[str]:
    """The ?metrics= parameter: names separated by commas (a name holding a comma cannot be
    pinned; ingest names are paths like train/loss)."""
    return [part.strip() for part in value.split(",") if part.strip()]
