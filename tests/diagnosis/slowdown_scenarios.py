"""Labelled slowdown scenarios: synthetic runs with one planted cause each (or none), built
the way a job's telemetry arrives (a throughput point a step, rank buckets of per-rank section
medians, DCGM readings of each GPU every 30 s, a config and a host set per attempt), and an
in-memory TelemetrySource answering what diagnosis.selectors.slowdowns answers from the
database. tests/diagnosis/test_slowdown_scenarios.py measures the rules on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from diagnosis.slowdown_detect import AttemptThroughput
from diagnosis.slowdown_facts import (
    CLOCK_REASONS,
    POWER_USAGE,
    POWER_VIOLATION,
    THERMAL_VIOLATION,
    Reading,
)
from telemetry.dcgm import GPU_TEMP

KINDS = ["config_change", "hardware_change", "thermal", "power", "straggler", "section", "unknown"]
RANKS_PER_HOST = 8
HOSTS = 4
BUCKET_S = 15.0
DCGM_EVERY_S = 30.0
TOKENS_PER_STEP = 4_000_000
START = 1_780_000_000.0
SECTIONS = {"forward": 0.40, "backward": 0.45, "optimizer": 0.05, "data_loading": 0.05}


@dataclass
class Scenario:
    name: str
    kind: str | None  # the planted cause; None for noise only
    hosts: tuple[str, ...] = ()  # the culprit hosts the top cause must name
    config_keys: tuple[str, ...] = ()
    series: list[AttemptThroughput] = field(default_factory=list)
    source: MemorySource | None = None


@dataclass
class MemorySource:
    configs: dict[int, dict[str, object]] = field(default_factory=dict)
    hosts: dict[int, frozenset[str]] = field(default_factory=dict)
    placement: dict[int, dict[int, tuple[str, str]]] = field(default_factory=dict)
    gpus: dict[int, int] = field(default_factory=dict)
    # attempt -> [(bucket start, section, rank -> median)]
    buckets: dict[int, list[tuple[float, str, dict[int, float]]]] = field(default_factory=dict)
    # host -> readings
    dcgm: dict[str, list[Reading]] = field(default_factory=dict)

    def attempt_config(self, attempt: int) -> Mapping[str, object]:
        return self.configs.get(attempt, {})

    def attempt_hosts(self, attempt: int) -> frozenset[str]:
        return self.hosts.get(attempt, frozenset())

    def placements(self, attempt: int) -> Mapping[int, tuple[str, str]]:
        return self.placement.get(attempt, {})

    def gpu_count(self, attempt: int) -> int | None:
        return self.gpus.get(attempt)

    def section_buckets(
        self, attempt: int, since: float, until: float
    ) -> Sequence[tuple[float, str, Mapping[int, float]]]:
        return [row for row in self.buckets.get(attempt, []) if since <= row[0] <= until]

    def readings(
        self, hosts: Iterable[str], since: float, until: float
    ) -> Mapping[str, Sequence[Reading]]:
        return {
            host: [row for row in self.dcgm.get(host, []) if since <= row[1] <= until]
            for host in hosts
        }


def _host_names(replace: dict[str, str] | None = None) -> list[str]:
    names = [f"node{i}" for i in range(HOSTS)]
    return [(replace or {}).get(name, name) for name in names]


def build(kind: str | None, seed: int) -> Scenario:
    """One run of two attempts (300 steps each, the second resumed 10 steps back), the cause
    planted at attempt 2's start (config and hardware changes) or at step 450 mid-attempt."""
    rng = np.random.default_rng(seed)
    factor = float(rng.uniform(0.08, 0.35))  # how much slower the slowed part runs
    culprit_index = int(rng.integers(0, HOSTS))
    source = MemorySource()
    scenario = Scenario(name=f"{kind or 'noise'}-{seed}", kind=kind, source=source)
    config_1: dict[str, object] = {"lr": 3e-4, "micro_batch_size": 4, "zero_stage": 1}
    config_2 = dict(config_1)
    hosts_2 = _host_names()
    if kind == "config_change":
        key = ["micro_batch_size", "zero_stage", "activation_checkpointing"][seed % 3]
        config_2[key] = {"micro_batch_size": 8, "zero_stage": 3, "activation_checkpointing": True}[
            key
        ]
        scenario.config_keys = (key,)
    if kind == "hardware_change":
        old = f"node{culprit_index}"
        hosts_2 = _host_names({old: f"node{HOSTS + seed % 5 + 1}"})
        scenario.hosts = (hosts_2[culprit_index],)
    if kind in {"thermal", "power", "straggler"}:
        scenario.hosts = (f"node{culprit_index}",)
    if kind is None and seed % 2:
        # Noise only, across a restart onto a swapped host that runs at the same pace.
        hosts_2 = _host_names({f"node{culprit_index}": "node9"})
    if kind is None and seed % 3 == 0:
        config_2["lr"] = 1e-4  # a config change that costs nothing
    source.configs = {1: config_1, 2: config_2}
    clock = START
    # Hosts that run hot (thermal/power) from when, and with which reasons.
    throttle_from: dict[str, tuple[float, str]] = {}
    ranks = HOSTS * RANKS_PER_HOST
    for attempt, (first, last, names) in enumerate(
        [(0, 299, _host_names()), (290, 589, hosts_2)], start=1
    ):
        source.hosts[attempt] = frozenset(names)
        source.placement[attempt] = {
            rank: (names[rank // RANKS_PER_HOST], f"GPU-{names[rank // RANKS_PER_HOST]}-{rank % 8}")
            for rank in range(ranks)
        }
        source.gpus[attempt] = ranks
        clock += 60.0  # the restart
        steps = np.arange(first, last + 1)
        n = len(steps)
        # Each rank's own time in each section (its compute, not the wait for the others).
        sections = {
            name: base * rng.normal(1.0, 0.004, (n, ranks)) for name, base in SECTIONS.items()
        }
        if kind in {"config_change", "hardware_change"}:
            planted = np.full(n, attempt == 2)
        elif kind is not None:
            planted = steps >= 450
        else:
            planted = np.zeros(n, dtype=bool)
        culprit = slice(culprit_index * RANKS_PER_HOST, (culprit_index + 1) * RANKS_PER_HOST)
        for name in ("forward", "backward"):
            if kind == "config_change":
                sections[name][planted] *= 1 + factor * 1.1
            if kind in {"hardware_change", "thermal", "power", "straggler"}:
                sections[name][planted, culprit] *= 1 + factor * 1.1
        if kind == "section":
            sections["data_loading"][planted] += factor
        compute = sum(sections.values())
        step_s = compute.max(axis=1) + 0.01
        if attempt == 2:
            step_s[:10] *= 2.0  # warm-up after the restart
        checkpoints = (steps % 100 == 0) & (steps > first)
        step_s[checkpoints] += 5.0  # a blocking checkpoint save
        values = TOKENS_PER_STEP / step_s * (1 + rng.uniform(-0.02, 0.02, n))
        if kind == "unknown":
            values[planted] *= 1 - factor
        times = clock + np.cumsum(step_s)
        clock = float(times[-1])
        if kind in {"thermal", "power"} and planted.any():
            throttle_from.setdefault(f"node{culprit_index}", (float(times[planted][0]), kind))
        if kind != "unknown":
            buckets = START + (times - START) // BUCKET_S * BUCKET_S
            rows = []
            for bucket in np.unique(buckets):
                inside = buckets == bucket
                for name, per_rank in {**sections, "step": compute}.items():
                    medians = np.median(per_rank[inside], axis=0)
                    rows.append((float(bucket), name, dict(enumerate(medians.tolist()))))
            source.buckets[attempt] = rows
        scenario.series.append(
            AttemptThroughput(
                attempt=attempt,
                steps=steps.astype(np.int64),
                values=values,
                times=times,
                excluded_steps=frozenset(int(x) for x in steps[checkpoints]),
            )
        )
    _dcgm(source, end=clock, throttle_from=throttle_from, rng=rng)
    return scenario


def _dcgm(
    source: MemorySource,
    *,
    end: float,
    throttle_from: dict[str, tuple[float, str]],
    rng: np.random.Generator,
) -> None:
    hosts = sorted(set().union(*source.hosts.values()))
    for host in hosts:
        rows: list[Reading] = []
        counters = {THERMAL_VIOLATION: 0.0, POWER_VIOLATION: 0.0}
        moment = START
        while moment <= end:
            hot = host in throttle_from and moment >= throttle_from[host][0]
            kind = throttle_from.get(host, (0.0, ""))[1] if hot else ""
            if kind == "thermal":
                counters[THERMAL_VIOLATION] += DCGM_EVERY_S * 0.6e6
            if kind == "power":
                counters[POWER_VIOLATION] += DCGM_EVERY_S * 0.6e6
            for gpu in range(RANKS_PER_HOST):
                values = {
                    GPU_TEMP: float(rng.normal(89.0 if kind == "thermal" else 66.0, 1.5)),
                    POWER_USAGE: float(rng.normal(690.0 if kind == "power" else 610.0, 15.0)),
                    CLOCK_REASONS: float(
                        {"thermal": 0x40 | 0x8, "power": 0x4 | 0x80}.get(kind, 0) if gpu < 6 else 0
                    ),
                    THERMAL_VIOLATION: counters[THERMAL_VIOLATION],
                    POWER_VIOLATION: counters[POWER_VIOLATION],
                }
                rows.append((f"GPU-{host}-{gpu}", moment, values))
            moment += DCGM_EVERY_S
        source.dcgm[host] = rows


def labelled(seeds: int = 8) -> list[Scenario]:
    return [build(kind, seed) for kind in KINDS for seed in range(seeds)]


def noise_only(count: int = 16) -> list[Scenario]:
    return [build(None, 1000 + seed) for seed in range(count)]
