"""Which failure signals are one failure: matching by shared keys within a time window. Pure.

One mechanism for every level at which signals of one failure arrive apart:

- within a run (logbook.services.interruptions): a dcgm-exporter XID on an attempt's host, the
  job's own crash report, a hang and an MLflow FAILED are one incident when they share the
  attempt (key ``attempt:<id>``) and lie within INCIDENT_MERGE_WINDOW of each other;
- across hosts (issue 33): several hosts' incidents are one rack, pod or site event when they
  share that key (``rack:<name>``) within a window of minutes.

A *signal* is a time span (a hang covers the time from its last step to its detection) with
the keys it is about and the kind of source that raised it. A *group* is the signals already
taken as one failure. Two signals are near when they share a key and the gap between their
spans is at most the window; a signal joins the group holding its nearest near signal. With
``one_per_kind``, a group takes at most one signal of each kind (two crash reports of one
attempt are two reports, and a second hang at a later step is a second hang).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Signal:
    at: datetime
    keys: frozenset[str]
    kind: str = ""
    # The end of the span the signal covers (None: a moment).
    until: datetime | None = None
    # The caller's handle (an interruption's or an event's id); not compared.
    ref: object = field(default=None, compare=False)

    @property
    def end(self) -> datetime:
        return self.until if self.until is not None and self.until > self.at else self.at


def gap(a: Signal, b: Signal) -> timedelta:
    """Time between two signals' spans; zero when they overlap."""
    if a.end < b.at:
        return b.at - a.end
    if b.end < a.at:
        return a.at - b.end
    return timedelta(0)


def near(a: Signal, b: Signal, *, window: timedelta) -> bool:
    return bool(a.keys & b.keys) and gap(a, b) <= window


def window_match(
    signal: Signal,
    groups: Sequence[Sequence[Signal]],
    *,
    window: timedelta,
    one_per_kind: bool = False,
) -> int | None:
    """The index of the group `signal` belongs to, or None (a new failure). The group whose
    nearest signal is closest in time wins; on a tie, the earlier group in `groups`."""
    best: tuple[timedelta, int] | None = None
    for index, group in enumerate(groups):
        if one_per_kind and signal.kind and any(other.kind == signal.kind for other in group):
            continue
        gaps = [gap(signal, other) for other in group if near(signal, other, window=window)]
        if gaps and (best is None or min(gaps) < best[0]):
            best = (min(gaps), index)
    return None if best is None else best[1]


def window_groups(
    signals: Sequence[Signal], *, window: timedelta, one_per_kind: bool = False
) -> list[list[Signal]]:
    """Partition signals into failures, as window_match would have grouped them arriving in
    time order (so the answer depends on the set, not on the order it is given in). Groups in
    order of their first signal; each group's signals in time order."""
    groups: list[list[Signal]] = []
    ordered = sorted(signals, key=lambda s: (s.at, s.end, s.kind, sorted(s.keys)))
    for signal in ordered:
        index = window_match(signal, groups, window=window, one_per_kind=one_per_kind)
        if index is None:
            groups.append([signal])
        else:
            groups[index].append(signal)
    return groups
