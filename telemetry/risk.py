"""Hardware about to fail: the precursor signals of one GPU, read from its stored DCGM readings
and health events, and what to do about them. Pure: readings in, signals out; no ORM.

Every signal is a rate or a state held over time, never one reading: a counter's growth per
hour over the recent half of the lookback against the half before it (a correctable-ECC rate
that rises, PCIe replays, NVLink CRC errors, the share of time thermally throttled), a row
remap left pending, and the precursor XIDs the GPU reported. What each means is NVIDIA's
(the GPU memory error management guide and the XID catalog; docs/at-risk.md): a rising
single-bit (correctable) ECC rate and XID 92 ("high single-bit ECC error rate") come before
uncorrectable errors; a pending row remap takes effect only at the next GPU reset; XID 63/64
record a remap (or its failure), 48 and 94/95 are double-bit errors, contained or not.

The thresholds are this module's, chosen for the replayed stream of docs/at-risk.md, and are
meant to be tuned per fleet; the score is the noisy-or of the signals' weights, as
auto-triage combines its evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

ECC_SBE = ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL")
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
REMAPPED_ROWS = ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")
PCIE_REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
NVLINK_CRC = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
)
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"  # µs throttled, a counter
# Every field the detector reads, in one place for the selector.
FIELDS_READ = (
    *ECC_SBE,
    ROW_REMAP_PENDING,
    ROW_REMAP_FAILURE,
    *REMAPPED_ROWS,
    PCIE_REPLAY,
    *NVLINK_CRC,
    THERMAL_VIOLATION,
)

LOOKBACK = timedelta(hours=24)
# Less history than this says nothing about a rate.
MIN_SPAN = timedelta(minutes=30)
# A counter "rises" when its recent rate is at least RISE times the earlier one and at least
# the kind's floor (a handful of correctable errors a day is a healthy GPU).
RISE = 2.0
ECC_RATE_MIN_PER_H = 5.0
PCIE_RATE_MIN_PER_H = 20.0
NVLINK_RATE_MIN_PER_H = 20.0
THERMAL_SHARE_MIN = 0.02  # of the recent half's time spent throttled for heat

# Precursor XIDs (NVIDIA's XID catalog) and how strongly each points at a failure to come.
PRECURSOR_XIDS: dict[int, tuple[float, str]] = {
    48: (0.6, "double-bit ECC error"),
    63: (0.4, "row remapping recorded"),
    64: (0.8, "row remapping failed"),
    92: (0.5, "high single-bit ECC error rate"),
    94: (0.6, "contained ECC error"),
    95: (0.8, "uncontained ECC error"),
}
WEIGHTS = {
    "ecc_rate": 0.5,
    "row_remap_pending": 0.5,
    "row_remaps": 0.3,
    "row_remap_failure": 0.9,
    "pcie_replays": 0.3,
    "nvlink_crc": 0.3,
    "thermal": 0.3,
}
AT_RISK_SCORE = 0.5
QUARANTINE_SCORE = 0.85
# Signals that leave the board unfit to run: take it out now, not at the next restart.
QUARANTINE_KINDS = {"row_remap_failure"}
QUARANTINE_XIDS = {48, 64, 95}


@dataclass(frozen=True)
class Reading:
    at: datetime
    values: Mapping[str, float]


@dataclass(frozen=True)
class XidSeen:
    at: datetime
    code: int


@dataclass(frozen=True)
class Signal:
    kind: str
    detail: str
    since: datetime
    weight: float


@dataclass(frozen=True)
class Risk:
    score: float
    signals: list[Signal]
    action: str

    @property
    def at_risk(self) -> bool:
        return self.score >= AT_RISK_SCORE


def assess(readings: Sequence[Reading], xids: Iterable[XidSeen] = (), *, now: datetime) -> Risk:
    """The risk of one GPU at `now`, from its readings (oldest first) and XIDs in LOOKBACK."""
    recent = [one for one in readings if now - LOOKBACK <= one.at <= now]
    signals: list[Signal] = []
    if len(recent) >= 3 and recent[-1].at - recent[0].at >= MIN_SPAN:
        signals += _rate_signals(recent)
    if recent:
        signals += _state_signals(recent)
    signals += _xid_signals([one for one in xids if now - LOOKBACK <= one.at <= now])
    score = 1.0
    for one in signals:
        score *= 1.0 - one.weight
    score = round(1.0 - score, 3)
    return Risk(score=score, signals=signals, action=action_for(score, signals))


def action_for(score: float, signals: Sequence[Signal]) -> str:
    if score < AT_RISK_SCORE:
        return ""
    kinds = {one.kind for one in signals}
    xids = {int(one.kind.removeprefix("xid_")) for one in signals if one.kind.startswith("xid_")}
    if score >= QUARANTINE_SCORE or kinds & QUARANTINE_KINDS or xids & QUARANTINE_XIDS:
        return "quarantine"
    if "row_remap_pending" in kinds:
        return "drain before the next restart and reset the GPU (applies the pending remap)"
    return "drain before the next restart"


def counter_increase(points: Sequence[tuple[datetime, float]]) -> float:
    """How much a counter grew over `points`: a drop is a reset (the volatile ECC counts
    restart at a driver reload), after which the new value is all growth."""
    total = 0.0
    for (_, before), (_, after) in pairwise(points):
        total += after - before if after >= before else after
    return total


def _series(readings: Sequence[Reading], names: Sequence[str]) -> list[tuple[datetime, float]]:
    """The sum of the first of `names` each reading has (a GPU reports one of the ECC totals,
    or both NVLink CRC kinds)."""
    points = []
    for one in readings:
        present = [one.values[name] for name in names if name in one.values]
        if present:
            points.append((one.at, sum(present)))
    return points


def _halves(
    points: Sequence[tuple[datetime, float]],
) -> tuple[float, float, float, datetime] | None:
    """(earlier rate, recent rate per hour, recent hours, first recent growth) of a counter,
    split at the middle of the span it covers."""
    if len(points) < 3:
        return None
    start, end = points[0][0], points[-1][0]
    middle = start + (end - start) / 2
    early = [p for p in points if p[0] <= middle]
    late = [p for p in points if p[0] >= early[-1][0]]
    early_h = (early[-1][0] - start).total_seconds() / 3600
    late_h = (end - early[-1][0]).total_seconds() / 3600
    if early_h <= 0 or late_h <= 0:
        return None
    since = next(
        (after[0] for before, after in pairwise(late) if after[1] != before[1]),
        end,
    )
    return counter_increase(early) / early_h, counter_increase(late) / late_h, late_h, since


def _rising(
    readings: Sequence[Reading], names: Sequence[str], floor: float
) -> tuple[float, float, datetime] | None:
    halves = _halves(_series(readings, names))
    if halves is None:
        return None
    early, late, _, since = halves
    if late >= floor and late >= RISE * early:
        return early, late, since
    return None


def _rate_signals(readings: Sequence[Reading]) -> list[Signal]:
    signals = []
    for kind, names, floor, what in (
        ("ecc_rate", ECC_SBE, ECC_RATE_MIN_PER_H, "correctable (single-bit) ECC errors"),
        ("pcie_replays", (PCIE_REPLAY,), PCIE_RATE_MIN_PER_H, "PCIe replays"),
        ("nvlink_crc", NVLINK_CRC, NVLINK_RATE_MIN_PER_H, "NVLink CRC errors"),
    ):
        found = _rising(readings, names, floor)
        if found is not None:
            early, late, since = found
            detail = f"{what} {early:.1f}/h → {late:.1f}/h"
            signals.append(Signal(kind, detail, since, WEIGHTS[kind]))
    halves = _halves(_series(readings, (THERMAL_VIOLATION,)))
    if halves is not None:
        _, late_us_per_h, _, since = halves
        share = late_us_per_h / 3.6e9  # µs throttled per hour of wall time
        if share >= THERMAL_SHARE_MIN:
            detail = f"thermally throttled {share:.1%} of the time"
            signals.append(Signal("thermal", detail, since, WEIGHTS["thermal"]))
    remaps = _series(readings, REMAPPED_ROWS)
    grown = counter_increase(remaps)
    if grown > 0:
        since = next(after[0] for before, after in pairwise(remaps) if after[1] > before[1])
        detail = f"{grown:g} row(s) remapped"
        signals.append(Signal("row_remaps", detail, since, WEIGHTS["row_remaps"]))
    return signals


def _state_signals(readings: Sequence[Reading]) -> list[Signal]:
    """A state held until now (on the last two readings at least): since when, in this
    lookback."""
    signals = []
    for kind, name, detail in (
        ("row_remap_pending", ROW_REMAP_PENDING, "row remap pending (applied at the next reset)"),
        ("row_remap_failure", ROW_REMAP_FAILURE, "row remapping failed"),
    ):
        held = [one for one in readings if name in one.values]
        streak = 0
        for one in reversed(held):
            if one.values[name] < 1:
                break
            streak += 1
        # Held over two readings at least: one reading is not a state.
        if streak >= 2:
            signals.append(Signal(kind, detail, held[-streak].at, WEIGHTS[kind]))
    return signals


def _xid_signals(xids: Sequence[XidSeen]) -> list[Signal]:
    by_code: dict[int, list[datetime]] = {}
    for one in xids:
        if one.code in PRECURSOR_XIDS:
            by_code.setdefault(one.code, []).append(one.at)
    signals = []
    for code, times in sorted(by_code.items()):
        weight, text = PRECURSOR_XIDS[code]
        count = f" x{len(times)}" if len(times) > 1 else ""
        signals.append(Signal(f"xid_{code}", f"XID {code}{count} ({text})", min(times), weight))
    return signals
