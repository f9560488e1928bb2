"""Repeat offenders: the rule (at least K incidents in a window), the incidents that blame a
piece of hardware, and the one score computed from them. No database: logbook.selectors.fleet
gathers the incidents, and stragglers add theirs (IncidentLike)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.utils import timezone

from logbook.selectors.filters import FilterParams
from logbook.selectors.sdc import HardwareFilters

# Repeat offender: at least K incidents within the last WINDOW days (query params k and
# window_days override these).
REPEAT_OFFENDER_K = 3
REPEAT_OFFENDER_WINDOW_DAYS = 30
MAX_K = 1000
MAX_WINDOW_DAYS = 3650

# How an incident reaches a piece of hardware, most direct first (a host named by an
# interruption and also through its device is listed once, as named). An SDC suspicion
# that names no hardware (an attempt-vs-attempt divergence) reaches none: it is listed as
# unattributed until triage names a host or device, never charged to every host of the two
# attempts (issue 13).
VIA_NAMED = "named"
VIA_DEVICE = "device"
_VIA_RANK = {VIA_NAMED: 0, VIA_DEVICE: 1}


@dataclass(frozen=True)
class OffenderRule:
    """Repeat offender: incidents in [window_end - window_days, window_end) >= k."""

    k: int
    window_days: int
    window_end: datetime
    # The window ends now and slides with the clock (no `until` filter fixed its end).
    slides: bool = False

    FORMULA = "repeat offender ⇔ incidents in [end - window, end) ≥ K"

    @property
    def window_start(self) -> datetime:
        return self.window_end - timedelta(days=self.window_days)

    def holds_until(self, moments: Iterable[datetime]) -> datetime | None:
        """The latest end this window may slide to and still hold the same of `moments`: the
        first moment one enters (a moment ahead of the end: in once the end passes it) or
        leaves (window_days after one in it); None when that never happens (a fixed window,
        or no moment at or after its start). What is drawn from a window's counts can be
        kept until then (still_holds), instead of being drawn again every minute."""
        if not self.slides:
            return None
        days = timedelta(days=self.window_days)
        edges = [t for m in moments for t in (m, m + days) if t >= self.window_end]
        return min(edges, default=None)

    def in_window(self, moment: datetime) -> bool:
        return self.window_start <= moment < self.window_end

    def is_offender(self, moments: Iterable[datetime]) -> bool:
        return sum(1 for moment in moments if self.in_window(moment)) >= self.k


def offender_rule_parse(
    *, params: Mapping[str, str], filters: HardwareFilters, now: datetime | None = None
) -> OffenderRule:
    """K and the window from query parameters k and window_days (module defaults otherwise);
    the window ends at the filter's `until`, or now."""
    reader = FilterParams(params)
    k = reader.integer("k", default=REPEAT_OFFENDER_K, low=1, high=MAX_K)
    days = reader.integer(
        "window_days", default=REPEAT_OFFENDER_WINDOW_DAYS, low=1, high=MAX_WINDOW_DAYS
    )
    reader.check()
    end = filters.until or now or timezone.now()
    return OffenderRule(k=k, window_days=days, window_end=end, slides=filters.until is None)


def still_holds(holds_until: datetime | None, *, at: datetime) -> bool:
    """Whether counts drawn for a window that holds until `holds_until` (OffenderRule
    .holds_until) are still those of the window ending `at`."""
    return holds_until is None or at <= holds_until


@dataclass(frozen=True)
class Incident:
    kind: str  # "interruption", "sdc" or "straggler"
    pk: int
    occurred_at: datetime
    run_id: int
    run_name: str
    project: str
    label: str  # root cause, or how the SDC was detected
    status: str  # planned/unexpected, or the SDC verdict
    step: int | None
    via: str
    # How much of the blame falls on this piece of hardware: 1 when the incident names it
    # alone or names one of its devices, 1/n when it names n hosts and none of their
    # devices (a leaf switch's eight hosts share one link failure).
    weight: float = 1.0
    # The incident names one of this host's devices (a GPU-level fault pins the host).
    names_device: bool = False
    last_step: int | None = None  # an unattributed divergence's range: step..last_step


class IncidentLike(Protocol):
    """What the offender computation needs of a record that blames hardware. Interruptions
    and SDC records are one source (Incident); another (a straggler ledger) can be added by
    giving its records these attributes."""

    occurred_at: datetime
    weight: float
    names_device: bool


@dataclass(frozen=True)
class OffenderScore:
    in_window: int  # records in the offender window
    blame: float  # their summed weight
    device_named: int  # of them, those naming one of the hardware's devices
    repeat_offender: bool

    @property
    def rank_key(self) -> tuple[float, ...]:
        """Sort key, most suspect first: offenders, then the hardware incidents single out
        (blame, then GPU-level evidence), then the plain count."""
        return (-int(self.repeat_offender), -self.blame, -self.device_named, -self.in_window)


def offender_score(*, records: Iterable[IncidentLike], rule: OffenderRule) -> OffenderScore:
    """The one offender computation: whatever blames a piece of hardware, in the window."""
    mine = [one for one in records if rule.in_window(one.occurred_at)]
    return OffenderScore(
        in_window=len(mine),
        blame=round(sum(one.weight for one in mine), 6),
        device_named=sum(1 for one in mine if one.names_device),
        repeat_offender=len(mine) >= rule.k,
    )
