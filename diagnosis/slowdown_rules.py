"""Slowdown rules: every threshold the detector uses, and how the evidence about a slowdown
window is weighed into ranked causes. Pure (no ORM, no I/O): diagnosis.selectors.slowdowns
gathers the facts, `causes_rank` weighs them, diagnosis.services.slowdowns stores the result.
docs/slowdowns.md explains each rule and measures them on the labelled scenarios.

How the causes are weighed (confidence in [0, 1], most likely first):
- A job runs at the pace of its slowest rank, so the rank timings come first. The *what-if*
  of each host: the step time had its ranks run at the median rank's pace (the max over the
  other ranks, at least the median). The step time it saves, over the step's growth against
  the baseline, is the host's share of the slowdown; its GPU-hours are that share of the
  window's. A host with ranks `STRAGGLER_MIN_EXCESS` slower than the median and a share of
  `STRAGGLER_MIN_SHARE` or more is a straggler.
- A host is slow *because* of something when it has a reason: its GPUs throttled for heat or
  power in the window (DCGM's clock event reasons, the throttle counters, or a temperature
  past its limit) and not before: `thermal` / `power`, ahead of the straggler it explains. Or
  it is new at a restart (the window starts with an attempt whose host set differs from the
  baseline's): `hardware_change`.
- A section (data loading, optimizer, collective wait...) whose median over ranks grew on
  every rank (its fastest rank grew too) by `SECTION_MIN_SHARE` or more of the median rank's
  step growth, when that step grew by `SECTION_MIN_STEP_GROWTH` or more, is a job-wide
  `section` cause.
- A config difference between the baseline's attempt and the window's, when the window starts
  with that attempt, is `config_change`; it explains a job-wide growth that starts with it,
  so it ranks ahead of the section that grew, and behind a straggler host (a config change
  slows every rank, not one).
- Nothing reaching `EXPLAINS`: `unknown`, said plainly, ranked first.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from diagnosis import evidence
from telemetry.configs import config_changes
from telemetry.dcgm import GPU_TEMP_LIMIT_C

# --- Detection (diagnosis.slowdown_detect) ---------------------------------------------------
# Steps at the start of each attempt that are warm-up (compilation, caches, the restore's
# first steps), never a slowdown.
WARMUP_STEPS = 10
# A window must be this far below the baseline (a fraction of it): a steady run's ±2% jitter
# averages to well under 1% over MIN_STEPS steps, so 5% is several times any noise's mean.
MIN_DROP = 0.05
# ... and last this many steps (points, across a restart).
MIN_STEPS = 20
# Longer series are averaged in blocks to this many points before change-point detection.
MAX_POINTS = 4000
# PELT's penalty per change point: this many times the noise variance, times log(n).
PENALTY_SIGMAS = 4.0

# --- Attribution --------------------------------------------------------------------------
# A rank is a straggler candidate when it is this much slower than the median rank (0.05:
# 5% slower), and a straggler when removing it saves this share of the step's growth.
STRAGGLER_MIN_EXCESS = 0.05
STRAGGLER_MIN_SHARE = 0.5
# A section is a job-wide cause when its growth is this share of the step's, and its fastest
# rank grew by at least SECTION_ALL_RANKS of its median's growth (every rank slowed).
SECTION_MIN_SHARE = 0.5
SECTION_ALL_RANKS = 0.5
# ... and only when the median rank's step grew by this share (a job-wide slowdown).
SECTION_MIN_STEP_GROWTH = 0.03
# A host throttled when this share of its readings in the window carry a thermal (power)
# reason, or its throttle counter grew by this share of the window's time, and its baseline
# share was lower by as much.
THROTTLE_MIN_SHARE = 0.2
# Below this, no cause explains the slowdown: `unknown` is ranked first.
EXPLAINS = 0.35
# The section that is the whole step, when the job sends one.
STEP_SECTION = "step"
WAIT_SECTIONS = frozenset({"collective_wait"})

# NVML's clock event reasons (nvmlClocksEventReasons, the bitmask DCGM exports as
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS): 0x4 software power cap, 0x8 hardware slowdown,
# 0x20 software thermal slowdown, 0x40 hardware thermal slowdown, 0x80 hardware power brake.
# Hardware slowdown (0x8) is raised by both heat and power brake: it counts as thermal only
# with a thermal bit, as power only with a power bit.
THERMAL_REASON_BITS = 0x20 | 0x40
POWER_REASON_BITS = 0x4 | 0x80
REASON_NAMES = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}

# Confidence of each rule when it holds (the what-if rules scale by the share explained).
CONFIDENCE = {
    "thermal": 0.92,
    "power": 0.9,
    "hardware_change": 0.9,
    "straggler": 0.85,  # times the share
    "section": 0.85,  # times the share
    "config_change": 0.8,
    # A cause that another explains, or one weaker rival's cap.
    "explained": 0.6,
    "config_change_beside_straggler": 0.4,
    "hardware_change_unconfirmed": 0.45,
    "throttle_off_straggler": 0.2,
}
KINDS = ("straggler", "section", "config_change", "hardware_change", "thermal", "power", "unknown")


@dataclass(frozen=True)
class HostReadings:
    """One host's DCGM readings over a stretch of time, reduced to what the rules read."""

    host: str
    samples: int = 0
    thermal_samples: int = 0  # readings with a thermal reason bit
    power_samples: int = 0  # readings with a power reason bit
    reasons_seen: int = 0  # OR of every reason bitmask read
    thermal_violation_s: float = 0.0  # growth of DCGM's throttle counters over the stretch
    power_violation_s: float = 0.0
    max_temp_c: float | None = None
    mean_power_w: float | None = None
    span_s: float = 0.0  # the stretch's length, for the counters' share
    throttled_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlowdownFacts:
    """What the selectors found about one window and the baseline before it."""

    attempt_before: int
    attempt_during: int
    # The window starts with its attempt (its first analysed points): a restart changed it.
    at_restart: bool
    drop_pct: float
    gpu_hours_lost: float | None = None
    # (key, before, after) of the config the window's attempt ran against the baseline's.
    config_changes: Sequence[tuple[str, str, str]] = ()
    hosts_before: frozenset[str] = frozenset()
    hosts_during: frozenset[str] = frozenset()
    # rank -> (host, device) in the window's attempt.
    placements: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    # section -> rank -> mean seconds a step, over the baseline and over the window.
    sections_before: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    sections_during: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    readings_before: Mapping[str, HostReadings] = field(default_factory=dict)
    readings_during: Mapping[str, HostReadings] = field(default_factory=dict)


@dataclass(frozen=True)
class Cause(evidence.Cause):
    """A slowdown cause: the shared evidence model's, with the GPU-hours it is charged
    (the what-if's share of the window's; None when the run's GPU count is unknown)."""

    gpu_hours: float | None = None

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(item.detail for item in self.evidence)


def _evidence(
    source: str, lines: Sequence[str], weight: float, host: str | None = None
) -> tuple[evidence.Evidence, ...]:
    return tuple(
        evidence.Evidence(
            source=source, detail=line, weight=round(min(1.0, max(0.0, weight)), 3), host=host
        )
        for line in lines
    )


# --- The what-if ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HostWhatIf:
    host: str
    ranks: tuple[int, ...]
    devices: tuple[str, ...]
    excess: float  # the host's slowest rank against the median rank (0.2: 20% slower)
    step_s: float  # the step as it ran (the slowest rank)
    what_if_s: float  # had the host's ranks run at the median
    share: float  # of the step's growth against the baseline, in [0, 1]


def step_times(sections: Mapping[str, Mapping[int, float]]) -> dict[int, float]:
    """rank -> seconds a step: the `step` section, else the sum of the sections sent but the
    wait for the others (the straggler's victims wait longest, not the straggler)."""
    if STEP_SECTION in sections:
        return dict(sections[STEP_SECTION])
    totals: dict[int, float] = {}
    for name, values in sections.items():
        if name in WAIT_SECTIONS:
            continue
        for rank, seconds in values.items():
            totals[rank] = totals.get(rank, 0.0) + seconds
    return totals


def host_what_ifs(facts: SlowdownFacts) -> list[HostWhatIf]:
    """Each host's what-if, the costliest first. Empty without rank timings on both sides."""
    during = step_times(facts.sections_during)
    before = step_times(facts.sections_before)
    if len(during) < 2 or not before:
        return []
    median = statistics.median(during.values())
    actual = max(during.values())
    # The baseline's step: its slowest rank, as the job waited for it.
    growth = actual - max(before.values())
    by_host: dict[str, list[int]] = {}
    for rank in during:
        host = facts.placements.get(rank, ("", ""))[0] or f"rank {rank}"
        by_host.setdefault(host, []).append(rank)
    found = []
    for host, ranks in by_host.items():
        others = [seconds for rank, seconds in during.items() if rank not in ranks]
        what_if = max(max(others, default=median), median)
        saved = actual - what_if
        slowest = max(during[rank] for rank in ranks)
        share = min(1.0, max(0.0, saved / growth)) if growth > 0 else 0.0
        devices = tuple(sorted({facts.placements.get(r, ("", ""))[1] for r in ranks} - {""}))
        found.append(
            HostWhatIf(
                host=host,
                # The host's ranks that are slow themselves, not its others.
                ranks=tuple(
                    sorted(
                        rank
                        for rank in ranks
                        if during[rank] >= median * (1 + STRAGGLER_MIN_EXCESS)
                    )
                ),
                devices=devices,
                excess=slowest / median - 1.0 if median > 0 else 0.0,
                step_s=actual,
                what_if_s=what_if,
                share=share,
            )
        )
    return sorted(found, key=lambda one: one.share, reverse=True)


def stragglers(facts: SlowdownFacts) -> list[HostWhatIf]:
    return [
        one
        for one in host_what_ifs(facts)
        if one.excess >= STRAGGLER_MIN_EXCESS and one.share >= STRAGGLER_MIN_SHARE
    ]


# --- Throttling ----------------------------------------------------------------------------


def _throttle(
    kind: str, during: HostReadings, before: HostReadings | None
) -> tuple[float, list[str]] | None:
    """(share of the window throttled, evidence lines) when the host throttled for `kind`
    in the window and not (as much) before; None otherwise."""
    samples = during.thermal_samples if kind == "thermal" else during.power_samples
    counter_s = during.thermal_violation_s if kind == "thermal" else during.power_violation_s
    share = samples / during.samples if during.samples else 0.0
    counter_share = counter_s / during.span_s if during.span_s > 0 else 0.0
    base_share = base_counter = 0.0
    if before is not None:
        base_samples = before.thermal_samples if kind == "thermal" else before.power_samples
        base_share = base_samples / before.samples if before.samples else 0.0
        base_counter_s = (
            before.thermal_violation_s if kind == "thermal" else before.power_violation_s
        )
        base_counter = base_counter_s / before.span_s if before.span_s > 0 else 0.0
    hot = (
        kind == "thermal"
        and during.max_temp_c is not None
        and during.max_temp_c >= GPU_TEMP_LIMIT_C
        and (before is None or before.max_temp_c is None or before.max_temp_c < GPU_TEMP_LIMIT_C)
    )
    lines: list[str] = []
    if share >= THROTTLE_MIN_SHARE and share - base_share >= THROTTLE_MIN_SHARE:
        bits = THERMAL_REASON_BITS if kind == "thermal" else POWER_REASON_BITS
        names = [
            name for bit, name in REASON_NAMES.items() if during.reasons_seen & bit & (bits | 0x8)
        ]
        lines.append(
            f"{during.host}: {share:.0%} of {during.samples} DCGM readings in the window carry "
            f"a {kind} clock event reason ({', '.join(names)}), {base_share:.0%} before"
        )
    if counter_share >= THROTTLE_MIN_SHARE and counter_share - base_counter >= THROTTLE_MIN_SHARE:
        lines.append(
            f"{during.host}: DCGM's {kind} violation counter grew {counter_s:.0f} s in "
            f"{during.span_s:.0f} s of window ({counter_share:.0%})"
        )
    if hot:
        lines.append(
            f"{during.host}: hottest GPU {during.max_temp_c:.0f} °C in the window, past the "
            f"{GPU_TEMP_LIMIT_C:.0f} °C limit"
            + (
                f" ({before.max_temp_c:.0f} °C before)"
                if before is not None and before.max_temp_c is not None
                else ""
            )
        )
    if not lines:
        return None
    return max(share, counter_share, 0.5 if hot else 0.0), lines


# --- Ranking -------------------------------------------------------------------------------


def causes_rank(facts: SlowdownFacts) -> list[Cause]:
    """The window's candidate causes, most likely first (see the module docstring)."""
    causes: list[Cause] = []
    gpu_hours = facts.gpu_hours_lost
    slow_hosts = stragglers(facts)
    straggler_hosts = {one.host for one in slow_hosts}
    explained: set[str] = set()
    have_ranks = bool(host_what_ifs(facts))

    # Heat and power on the hosts whose ranks slowed (on any host when no rank says which).
    for host, during in sorted(facts.readings_during.items()):
        for kind in ("thermal", "power"):
            found = _throttle(kind, during, facts.readings_before.get(host))
            if found is None:
                continue
            share, lines = found
            if host in straggler_hosts:
                confidence = CONFIDENCE[kind]
                explained.add(host)
            elif not have_ranks:
                confidence = CONFIDENCE[kind] * 0.8
            else:
                confidence = CONFIDENCE["throttle_off_straggler"]
            what = "temperature" if kind == "thermal" else "power"
            causes.append(
                Cause(
                    kind=kind,
                    detail=(
                        f"{host}'s GPUs throttled their clocks for {what} in the window"
                        + (" and its ranks held the job back" if host in straggler_hosts else "")
                        + "."
                    ),
                    confidence=confidence,
                    hosts=(host,),
                    ranks=_ranks_on(facts, host),
                    devices=during.throttled_devices,
                    evidence=_evidence("DCGM readings", lines, share, host),
                    gpu_hours=_share_hours(slow_hosts, host, gpu_hours),
                )
            )

    # A host new at the restart the window starts with.
    new_hosts = facts.hosts_during - facts.hosts_before if facts.hosts_before else frozenset()
    if facts.at_restart and new_hosts:
        slow_new = [one for one in slow_hosts if one.host in new_hosts]
        gone = sorted(facts.hosts_before - facts.hosts_during)
        replacing = f" (replacing {', '.join(gone)})" if gone else ""
        if slow_new:
            for one in slow_new:
                explained.add(one.host)
                causes.append(
                    Cause(
                        kind="hardware_change",
                        detail=(
                            f"Attempt {facts.attempt_during} resumed on a new host, {one.host}"
                            f"{replacing}; its ranks ran {one.excess:.0%} slower than the "
                            "median rank."
                        ),
                        confidence=CONFIDENCE["hardware_change"],
                        hosts=(one.host,),
                        ranks=one.ranks,
                        devices=one.devices,
                        evidence=_evidence(
                            "attempts' hosts and rank timings",
                            [
                                f"hosts of attempt {facts.attempt_before}: "
                                f"{', '.join(sorted(facts.hosts_before))}",
                                f"hosts of attempt {facts.attempt_during}: "
                                f"{', '.join(sorted(facts.hosts_during))}",
                                _what_if_line(one),
                            ],
                            one.share,
                            one.host,
                        ),
                        gpu_hours=_hours(one.share, gpu_hours),
                    )
                )
        elif not have_ranks:
            causes.append(
                Cause(
                    kind="hardware_change",
                    detail=(
                        f"Attempt {facts.attempt_during} resumed on new hosts "
                        f"{', '.join(sorted(new_hosts))}{replacing}; no rank timings say "
                        "whether they are the slow ones."
                    ),
                    confidence=CONFIDENCE["hardware_change_unconfirmed"],
                    hosts=tuple(sorted(new_hosts)),
                    evidence=_evidence(
                        "attempts' hosts", [f"new hosts at attempt {facts.attempt_during}"], 0.5
                    ),
                )
            )

    # Stragglers: the what-if, whatever explains them.
    for one in slow_hosts:
        confidence = CONFIDENCE["straggler"] * one.share
        if one.host in explained:
            confidence = min(confidence, CONFIDENCE["explained"])
        causes.append(
            Cause(
                kind="straggler",
                detail=(
                    f"{one.host} held every step back: had its ranks run at the median, steps "
                    f"would have taken {one.what_if_s:.3g} s instead of {one.step_s:.3g} s "
                    f"({one.share:.0%} of the slowdown"
                    + (f", {one.share * gpu_hours:.1f} GPU-hours" if gpu_hours else "")
                    + ")."
                ),
                confidence=confidence,
                hosts=(one.host,),
                ranks=one.ranks,
                devices=one.devices,
                evidence=_evidence("rank timings", [_what_if_line(one)], one.share, one.host),
                gpu_hours=_hours(one.share, gpu_hours),
            )
        )

    # A config change at the restart the window starts with.
    if facts.at_restart and facts.config_changes:
        keys = tuple(key for key, _, _ in facts.config_changes)
        confidence = (
            CONFIDENCE["config_change_beside_straggler"]
            if slow_hosts
            else CONFIDENCE["config_change"]
        )
        changes = ", ".join(
            f"{key} {before} → {after}" for key, before, after in facts.config_changes
        )
        causes.append(
            Cause(
                kind="config_change",
                detail=f"Attempt {facts.attempt_during} changed the config: {changes}.",
                confidence=confidence,
                config_keys=keys,
                evidence=_evidence(
                    "attempts' configs",
                    [
                        f"{key}: {before} in attempt {facts.attempt_before}, {after} in attempt "
                        f"{facts.attempt_during}"
                        for key, before, after in facts.config_changes
                    ],
                    confidence,
                ),
                gpu_hours=gpu_hours if not slow_hosts else None,
            )
        )
    config_at_restart = facts.at_restart and bool(facts.config_changes)

    # Job-wide sections.
    for section, share, lines in _sections_grown(facts):
        confidence = CONFIDENCE["section"] * share
        if config_at_restart or slow_hosts:
            confidence = min(confidence, CONFIDENCE["explained"])
        causes.append(
            Cause(
                kind="section",
                detail=(
                    f"{section} grew on every rank, {share:.0%} of the step's growth"
                    + (" (with the config change)" if config_at_restart else "")
                    + "."
                ),
                confidence=confidence,
                evidence=_evidence("rank timings", lines, share),
                gpu_hours=_hours(share, gpu_hours),
            )
        )

    causes = [_rounded(cause) for cause in evidence.ranked(causes)]  # type: ignore[misc]
    best = causes[0].confidence if causes else 0.0
    if best < EXPLAINS:
        causes.insert(
            0,
            Cause(
                kind="unknown",
                detail=(
                    "Nothing Chronicle holds explains it: "
                    + _unknown_reasons(facts, have_ranks)
                    + "."
                ),
                confidence=round(max(0.0, 1.0 - best), 3),
                evidence=_evidence(
                    "throughput", [f"throughput {facts.drop_pct:.1f}% below the baseline"], 1.0
                ),
                gpu_hours=gpu_hours,
            ),
        )
    return causes


def _sections_grown(facts: SlowdownFacts) -> list[tuple[str, float, list[str]]]:
    before_step = step_times(facts.sections_before)
    during_step = step_times(facts.sections_during)
    if not before_step or not during_step:
        return []
    before_median = statistics.median(before_step.values())
    step_growth = statistics.median(during_step.values()) - before_median
    # The median rank must have slowed (a straggler slows the job, not the median rank).
    if step_growth <= SECTION_MIN_STEP_GROWTH * before_median:
        return []
    found = []
    for section, during in facts.sections_during.items():
        before = facts.sections_before.get(section)
        if section == STEP_SECTION or not before or not during:
            continue
        growth = statistics.median(during.values()) - statistics.median(before.values())
        fastest_growth = min(during.values()) - min(before.values())
        if growth <= 0 or fastest_growth < SECTION_ALL_RANKS * growth:
            continue
        share = min(1.0, growth / step_growth)
        if share < SECTION_MIN_SHARE:
            continue
        found.append(
            (
                section,
                share,
                [
                    f"{section}: median over {len(during)} ranks "
                    f"{statistics.median(before.values()):.3g} s → "
                    f"{statistics.median(during.values()):.3g} s a step; fastest rank "
                    f"{min(before.values()):.3g} s → {min(during.values()):.3g} s",
                    f"step: median {statistics.median(before_step.values()):.3g} s → "
                    f"{statistics.median(during_step.values()):.3g} s",
                ],
            )
        )
    return sorted(found, key=lambda one: one[1], reverse=True)


def _unknown_reasons(facts: SlowdownFacts, have_ranks: bool) -> str:
    said = []
    said.append("no rank stood out and no section grew on every rank" if have_ranks
                else "the job sent no rank timings to compare")  # fmt: skip
    said.append(
        "no config or host changed"
        if not facts.at_restart
        else "the restart changed no config or host"
    )
    said.append(
        "no DCGM reading shows throttling"
        if facts.readings_during
        else "no DCGM readings from its hosts"
    )
    return ", ".join(said)


def _ranks_on(facts: SlowdownFacts, host: str) -> tuple[int, ...]:
    return tuple(sorted(rank for rank, (name, _) in facts.placements.items() if name == host))


def _what_if_line(one: HostWhatIf) -> str:
    ranks = ", ".join(map(str, one.ranks[:8])) or "-"
    return (
        f"what-if: {one.host} (ranks {ranks}) at the median rank's pace → step "
        f"{one.step_s:.3g} s → {one.what_if_s:.3g} s, {one.share:.0%} of the step's growth"
    )


def _hours(share: float, gpu_hours: float | None) -> float | None:
    return None if gpu_hours is None else share * gpu_hours


def _share_hours(slow: list[HostWhatIf], host: str, gpu_hours: float | None) -> float | None:
    for one in slow:
        if one.host == host:
            return _hours(one.share, gpu_hours)
    return gpu_hours if not slow else None


def _rounded(cause: Cause) -> Cause:
    return Cause(
        kind=cause.kind,
        detail=cause.detail,
        confidence=round(max(0.0, min(1.0, cause.confidence)), 3),
        hosts=cause.hosts,
        ranks=cause.ranks,
        devices=cause.devices,
        config_keys=cause.config_keys,
        evidence=cause.evidence,
        gpu_hours=None if cause.gpu_hours is None else round(cause.gpu_hours, 3),
    )


def config_differences(
    before: Mapping[str, object], after: Mapping[str, object]
) -> list[tuple[str, str, str]]:
    """(key, before, after) of each setting that differs (telemetry.configs)."""
    return config_changes(before, after)
