"""The facts about a slowdown window that the rules weigh, reduced from what a run's telemetry
holds. Pure: a `TelemetrySource` answers the questions (the database's in
diagnosis.selectors.slowdowns, an in-memory one in the labelled scenarios' tests), and the
functions here turn a detected window into diagnosis.slowdown_rules.SlowdownFacts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np

from diagnosis import slowdown_rules as rules
from diagnosis.slowdown_detect import Analysed, Window, lost_seconds
from telemetry.dcgm import GPU_TEMP

CLOCK_REASONS = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
POWER_VIOLATION = "DCGM_FI_DEV_POWER_VIOLATION"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
# The fields a slowdown's DCGM evidence reads.
FIELDS = (CLOCK_REASONS, THERMAL_VIOLATION, POWER_VIOLATION, GPU_TEMP, POWER_USAGE)

# (device, epoch seconds, {field: value}) of one reading.
Reading = tuple[str, float, Mapping[str, float]]


class TelemetrySource(Protocol):
    def attempt_config(self, attempt: int) -> Mapping[str, object]: ...

    def attempt_hosts(self, attempt: int) -> frozenset[str]: ...

    def placements(self, attempt: int) -> Mapping[int, tuple[str, str]]: ...

    def gpu_count(self, attempt: int) -> int | None: ...

    def section_buckets(
        self, attempt: int, since: float, until: float
    ) -> Sequence[tuple[float, str, Mapping[int, float]]]:
        """(bucket start, section, rank -> median seconds) of the rank buckets starting
        in [since, until]."""
        ...

    def readings(
        self, hosts: Iterable[str], since: float, until: float
    ) -> Mapping[str, Sequence[Reading]]:
        """host -> its GPUs' readings of FIELDS in [since, until]."""
        ...


def section_means(
    buckets: Sequence[tuple[float, str, Mapping[int, float]]],
) -> dict[str, dict[int, float]]:
    """section -> rank -> the mean of its bucket medians."""
    sums: dict[str, dict[int, list[float]]] = {}
    for _, section, values in buckets:
        into = sums.setdefault(section, {})
        for rank, seconds in values.items():
            if math.isfinite(seconds):
                into.setdefault(rank, []).append(seconds)
    return {
        section: {rank: float(np.mean(values)) for rank, values in ranks.items()}
        for section, ranks in sums.items()
    }


def host_readings(host: str, readings: Sequence[Reading], *, span_s: float) -> rules.HostReadings:
    """One host's readings reduced: how many carry a thermal or power reason, the throttle
    counters' growth (per device, last minus first, in seconds: DCGM counts µs), the hottest
    temperature and the mean power a reading."""
    thermal = power = reasons_seen = 0
    throttled: set[str] = set()
    temps: list[float] = []
    powers: list[float] = []
    counters: dict[tuple[str, str], list[float]] = {}
    for device, _, values in sorted(readings, key=lambda one: one[1]):
        reasons = values.get(CLOCK_REASONS)
        if reasons is not None and math.isfinite(reasons):
            bits = int(reasons)
            reasons_seen |= bits
            if bits & rules.THERMAL_REASON_BITS:
                thermal += 1
                throttled.add(device)
            if bits & rules.POWER_REASON_BITS:
                power += 1
                throttled.add(device)
        for name in (THERMAL_VIOLATION, POWER_VIOLATION):
            value = values.get(name)
            if value is not None and math.isfinite(value):
                counters.setdefault((device, name), []).append(value)
        if (temp := values.get(GPU_TEMP)) is not None and math.isfinite(temp):
            temps.append(temp)
        if (watts := values.get(POWER_USAGE)) is not None and math.isfinite(watts):
            powers.append(watts)
    grown = {THERMAL_VIOLATION: 0.0, POWER_VIOLATION: 0.0}
    for (device, name), values in counters.items():
        # The worst device: a counter of one GPU is that GPU's throttled time.
        growth = max(0.0, values[-1] - values[0]) / 1e6
        if growth > grown[name]:
            grown[name] = growth
        if growth > 0 and span_s > 0 and growth / span_s >= rules.THROTTLE_MIN_SHARE:
            throttled.add(device)
    return rules.HostReadings(
        host=host,
        samples=len(readings),
        thermal_samples=thermal,
        power_samples=power,
        reasons_seen=reasons_seen,
        thermal_violation_s=grown[THERMAL_VIOLATION],
        power_violation_s=grown[POWER_VIOLATION],
        max_temp_c=max(temps) if temps else None,
        mean_power_w=float(np.mean(powers)) if powers else None,
        span_s=span_s,
        throttled_devices=tuple(sorted(throttled)),
    )


def _span(points: Analysed, first: int, last: int) -> tuple[float, float] | None:
    times = points.times[first : last + 1]
    finite = times[np.isfinite(times)]
    if not len(finite):
        return None
    return float(finite.min()), float(finite.max())


def facts_for(points: Analysed, window: Window, source: TelemetrySource) -> rules.SlowdownFacts:
    """The window's facts: its attempt against the baseline's, the rank timings and DCGM
    readings of the window against the end of the baseline (as many points as the window
    has, at least MIN_STEPS), config and host changes, the GPU-hours it lost."""
    attempt_before = int(points.attempts[window.baseline_last])
    attempt_during = int(points.attempts[window.first])
    at_restart = attempt_during != attempt_before and (
        window.first == 0 or int(points.attempts[window.first - 1]) != attempt_during
    )
    length = max(window.last - window.first + 1, rules.MIN_STEPS)
    base_first = max(window.baseline_first, window.baseline_last - length + 1)
    during_span = _span(points, window.first, window.last)
    before_span = _span(points, base_first, window.baseline_last)
    gpus = source.gpu_count(attempt_during)
    lost_s = lost_seconds(points, window)
    gpu_hours = lost_s * gpus / 3600.0 if gpus else None

    sections_before: dict[str, dict[int, float]] = {}
    sections_during: dict[str, dict[int, float]] = {}
    if during_span and before_span:
        sections_during = section_means(source.section_buckets(attempt_during, *during_span))
        sections_before = section_means(source.section_buckets(attempt_before, *before_span))
    placements = source.placements(attempt_during)
    hosts_during = source.attempt_hosts(attempt_during) | {h for h, _ in placements.values() if h}
    hosts_before = source.attempt_hosts(attempt_before) | {
        h for h, _ in source.placements(attempt_before).values() if h
    }
    readings_before: dict[str, rules.HostReadings] = {}
    readings_during: dict[str, rules.HostReadings] = {}
    if during_span:
        span = during_span[1] - during_span[0]
        for host, rows in source.readings(hosts_during, *during_span).items():
            if rows:
                readings_during[host] = host_readings(host, rows, span_s=span)
    if before_span:
        span = before_span[1] - before_span[0]
        for host, rows in source.readings(hosts_during | hosts_before, *before_span).items():
            if rows:
                readings_before[host] = host_readings(host, rows, span_s=span)
    config_changes: list[tuple[str, str, str]] = []
    if attempt_during != attempt_before:
        config_changes = rules.config_differences(
            source.attempt_config(attempt_before), source.attempt_config(attempt_during)
        )
    return rules.SlowdownFacts(
        attempt_before=attempt_before,
        attempt_during=attempt_during,
        at_restart=at_restart,
        drop_pct=window.drop_pct,
        gpu_hours_lost=gpu_hours,
        config_changes=config_changes,
        hosts_before=frozenset(hosts_before),
        hosts_during=frozenset(hosts_during),
        placements=placements,
        sections_before=sections_before,
        sections_during=sections_during,
        readings_before=readings_before,
        readings_during=readings_during,
    )
