"""A seeded plan of a Llama-3-405B-scale run: 16,384 H100s on 2,048 hosts for 54 days, 466
interruptions with the categories of Table 5 of the Llama 3 paper (419 unexpected) plus 47 planned,
a checkpoint every few hundred steps and about a million steps of 8 metrics across attempts.

Pure: standard library and numpy only, no ORM. `python -m bench.generate_llama_scale`
writes the plan into Chronicle's tables; `scaled()` shrinks it for smoke tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

# Table 5 of the Llama 3 paper ("The Llama 3 Herd of Models", arXiv:2407.21783): root cause
# slug -> unexpected interruptions in 54 days.
TABLE5_COUNTS: dict[str, int] = {
    "faulty-gpu": 148,
    "gpu-hbm3-memory": 72,
    "software-bug": 54,
    "network-switch-cable": 35,
    "host-maintenance": 32,
    "gpu-sram-memory": 19,
    "gpu-system-processor": 17,
    "nic": 7,
    "nccl-watchdog-timeout": 7,
    "silent-data-corruption": 6,
    "gpu-thermal-interface-sensor": 6,
    "ssd": 3,
    "power-supply": 3,
    "server-chassis": 2,
    "io-expansion-board": 2,
    "dependency": 2,
    "cpu": 2,
    "system-memory": 2,
}
# What each category's job says when it dies: one typical log line per slug, worded as the
# public logs the auto-triage rules (logbook.autotriage) were written from read, so the
# worker suggests a root cause for every unexpected interruption as it would for a real job.
MESSAGES: dict[str, str] = {
    "faulty-gpu": "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.",
    "gpu-hbm3-memory": "CUDA error: uncorrectable ECC error encountered",
    "software-bug": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "network-switch-cable": "NCCL WARN NET/IB : Got completion with error 12, opcode 0, "
    "len 0, vendor err 129",
    "host-maintenance": "slurmstepd: error: *** JOB CANCELLED DUE TO NODE_FAIL ***",
    "gpu-sram-memory": "nvidia-smi -q: SRAM Uncorrectable : 1",
    "gpu-system-processor": "NVRM: Xid (PCI:0000:18:00): 119, Timeout after 6s of waiting "
    "for RPC response from GPU1 GSP!",
    "nic": "NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
    "nccl-watchdog-timeout": "[Rank 7] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    "silent-data-corruption": "loss spike at a replayed step: silent data corruption suspected",
    "gpu-thermal-interface-sensor": "Detected clocks event due to thermal violation in GPU 2",
    "ssd": "SMART critical_warning 0x4 (NVM subsystem reliability degraded)",
    "power-supply": "ipmitool sel: Power Supply PSU2 failure detected",
    "server-chassis": "ipmitool sel: Fan 3 failure, chassis intrusion cleared",
    "io-expansion-board": "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received",
    "dependency": "ImportError: undefined symbol: ncclCommRegister",
    "cpu": "mce: [Hardware Error]: CPU 7: Machine Check Exception: 5 Bank 0",
    "system-memory": "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0",
}
# The 47 planned interruptions: firmware upgrades (maintenance) and config or dataset changes.
PLANNED_SPLIT = {"planned-maintenance": 0.7, "config-change": 0.3}
GPU_SLUGS = {
    "faulty-gpu",
    "gpu-hbm3-memory",
    "gpu-sram-memory",
    "gpu-system-processor",
    "silent-data-corruption",
    "gpu-thermal-interface-sensor",
}
METRICS = (
    "loss",
    "grad_norm",
    "learning_rate",
    "tokens_per_s",
    "step_time_s",
    "tokens_seen",
    "data_loading_s",
    "memory_gb",
)
# A top-of-rack switch or a PDU takes both hosts of its rack: of these categories' failures,
# every RACK_FAILURE_EVERY-th (in the plan's order) is reported by the rack's second host
# too, its own interruption a minute or two later, so the two become one incident group.
RACK_SLUGS = ("network-switch-cable", "power-supply")
RACK_FAILURE_EVERY = 3
# Llama 3's hierarchy (paper, section 3.3.1): 8 GPUs a server, 2 servers a rack, 192 racks a
# pod. 2,048 hosts are 1,024 racks in 6 pods (the last of 64 racks), split between 2 sites
# of 3 pods each; the paper's one cluster is a level nobody sends here (unknown stays so).
HOSTS_PER_RACK = 2
RACKS_PER_POD = 192
PODS_PER_SITE = 3
# A planted slowdown: every step in this share of the run's steps is SLOWDOWN_FACTOR slower
# (as a replay of them would be), so the slowdown pass has one to find and explain.
SLOWDOWN_AT = 0.6
SLOWDOWN_SHARE = 0.003
SLOWDOWN_FACTOR = 1.08
RUN_NAME = "llama3-405b-pretrain"
PROJECT_SLUG = "llama3"
START = datetime(2026, 9, 1, tzinfo=UTC)
# Llama 3 405B's shape (paper, Table 3).
RUN_INFO = {
    "parameter_count": 405_000_000_000,
    "n_layers": 126,
    "n_heads": 128,
    "head_dim": 128,
    "seq_len": 8192,
    "accelerator_type": "H100-SXM",
    "accelerator_count": 16_384,
    "description": "Generated at Llama 3 scale by `python -m bench.generate_llama_scale` "
    "(benchmark).",
}
# ~1M steps fit 54 days at ~3.9 s a step; 11M tokens a step then gives ~42% MFU on 16,384 H100s,
# inside the 38-43% the paper reports (its real batch grew to 16M tokens with slower steps).
TOKENS_PER_STEP = 11 * 1024 * 1024


@dataclass(frozen=True)
class Scale:
    accelerators: int = 16_384
    gpus_per_host: int = 8
    days: float = 54.0
    unexpected: int = 419
    planned: int = 47
    total_steps: int = 1_000_000  # step rows across all attempts, replays included
    checkpoint_every: int = 300
    seed: int = 405

    @property
    def hosts(self) -> int:
        return self.accelerators // self.gpus_per_host

    @property
    def interruptions(self) -> int:
        return self.unexpected + self.planned


def scaled(factor: float, *, seed: int = 405) -> Scale:
    """The full scale times `factor` (0 < factor <= 1): hosts, days, interruptions and steps
    shrink together, so the shape (MTBF, steps per attempt) stays Llama-like."""
    full = Scale(seed=seed)
    if factor >= 1:
        return full
    hosts = max(2, round(full.hosts * factor))
    return replace(
        full,
        accelerators=hosts * full.gpus_per_host,
        days=max(0.5, full.days * factor),
        unexpected=max(3, round(full.unexpected * factor)),
        planned=max(1, round(full.planned * factor)),
        total_steps=max(2_000, round(full.total_steps * factor)),
        checkpoint_every=max(20, round(full.checkpoint_every * math.sqrt(factor))),
    )


@dataclass(frozen=True)
class PlannedInterruption:
    index: int
    slug: str
    planned: bool
    occurred_at: datetime
    detected_at: datetime
    recovered_at: datetime
    host_index: int
    device_index: int | None  # the GPU on that host, for GPU root causes
    manual_intervention: bool
    # A rack failure (RACK_SLUGS): the rack's other host reports it this many seconds later.
    rack_partner_after_s: float | None = None


@dataclass(frozen=True)
class PlannedAttempt:
    number: int
    started_at: datetime
    init_s: float  # accelerator init + program startup before the first step
    restore_s: float  # checkpoint restore (0 for the first attempt)
    first_step: int  # resume step (0 for the first attempt)
    last_step: int
    step_s: float
    ended_by: PlannedInterruption | None  # None: still running at the end of the window

    @property
    def steps(self) -> npt.NDArray[np.int64]:
        return np.arange(self.first_step, self.last_step + 1, dtype=np.int64)

    def step_times(self) -> npt.NDArray[np.float64]:
        """Epoch seconds at which each step started."""
        t0 = self.started_at.timestamp() + self.init_s + self.restore_s
        return t0 + np.arange(self.last_step - self.first_step + 1) * self.step_s


@dataclass(frozen=True)
class Plan:
    scale: Scale
    start: datetime
    end: datetime
    attempts: list[PlannedAttempt]
    interruptions: list[PlannedInterruption]
    checkpoint_steps: list[int]

    @property
    def step_rows(self) -> int:
        return sum(a.last_step - a.first_step + 1 for a in self.attempts)

    @property
    def slow_steps(self) -> tuple[int, int]:
        """The planted slowdown's first and last step (SLOWDOWN_AT)."""
        first = round(self.scale.total_steps * SLOWDOWN_AT)
        return first, first + max(300, round(self.scale.total_steps * SLOWDOWN_SHARE)) - 1


def placement(host_index: int) -> dict[str, str]:
    """Where host `host_index` sits (HOSTS_PER_RACK, RACKS_PER_POD, PODS_PER_SITE), as an
    attempt_started event's `placement` names it."""
    rack = host_index // HOSTS_PER_RACK
    pod = rack // RACKS_PER_POD
    return {
        "rack": f"rack-{rack:04d}",
        "pod": f"pod-{pod}",
        "site": f"site-{chr(ord('a') + pod // PODS_PER_SITE)}",
    }


def rack_partner(host_index: int, hosts: int) -> int | None:
    """The other host of `host_index`'s rack (None when the rack has no other)."""
    partner = host_index ^ 1 if HOSTS_PER_RACK == 2 else host_index + 1
    return partner if partner < hosts else None


def categories(scale: Scale, rng: np.random.Generator) -> list[tuple[str, bool]]:
    """(slug, planned) for every interruption, in a seeded random order. At full scale the
    unexpected ones are exactly Table 5's counts; scaled down, proportional (largest
    remainder), so the mix stays the same."""
    total = sum(TABLE5_COUNTS.values())
    unexpected = _apportion(TABLE5_COUNTS, scale.unexpected, total)
    planned_weights = {slug: round(share * 1000) for slug, share in PLANNED_SPLIT.items()}
    planned = _apportion(planned_weights, scale.planned, sum(planned_weights.values()))
    found = [(slug, False) for slug, n in unexpected.items() for _ in range(n)]
    found += [(slug, True) for slug, n in planned.items() for _ in range(n)]
    order = rng.permutation(len(found))
    return [found[i] for i in order]


def _apportion(weights: dict[str, int], seats: int, total: int) -> dict[str, int]:
    exact = {slug: weight * seats / total for slug, weight in weights.items()}
    result = {slug: math.floor(share) for slug, share in exact.items()}
    leftover = seats - sum(result.values())
    by_remainder = sorted(exact, key=lambda slug: exact[slug] - result[slug], reverse=True)
    for slug in by_remainder[:leftover]:
        result[slug] += 1
    return result


def plan(scale: Scale, *, start: datetime = START) -> Plan:
    rng = np.random.default_rng(scale.seed)
    window_s = scale.days * 86_400
    end = start + timedelta(seconds=window_s)
    kinds = categories(scale, rng)
    # Interruption times: uniform over the window (a Poisson process), kept apart enough that
    # every attempt trains a little.
    offsets = np.sort(rng.uniform(0.02, 0.98, size=len(kinds))) * window_s
    min_gap = window_s / (len(kinds) + 1) / 4
    for i in range(1, offsets.size):
        offsets[i] = max(offsets[i], offsets[i - 1] + min_gap)
    offsets = np.minimum(offsets, window_s * 0.995)
    interruptions: list[PlannedInterruption] = []
    for index, ((slug, planned), offset) in enumerate(zip(kinds, offsets, strict=True)):
        occurred = start + timedelta(seconds=float(offset))
        detect_s = float(rng.uniform(20, 300))
        # Recovery: Llama 3 automated almost all of it; a few need a human and take hours.
        manual = index in {int(x) for x in rng.choice(len(kinds), 3, replace=False)}
        recover_s = detect_s + (
            float(rng.uniform(2, 6)) * 3600 if manual else rng.uniform(300, 1500)
        )
        interruptions.append(
            PlannedInterruption(
                index=index,
                slug=slug,
                planned=planned,
                occurred_at=occurred,
                detected_at=occurred + timedelta(seconds=detect_s),
                recovered_at=occurred + timedelta(seconds=float(recover_s)),
                host_index=int(rng.integers(scale.hosts)),
                device_index=int(rng.integers(scale.gpus_per_host)) if slug in GPU_SLUGS else None,
                manual_intervention=manual,
            )
        )
    # Rack failures: their own generator, so the rest of the plan is what it was without them.
    racks = np.random.default_rng(scale.seed + 2)
    rack_failures = [item for item in interruptions if item.slug in RACK_SLUGS]
    for item in rack_failures[::RACK_FAILURE_EVERY]:
        if rack_partner(item.host_index, scale.hosts) is not None:
            after_s = float(racks.uniform(20, 150))
            interruptions[item.index] = replace(item, rack_partner_after_s=after_s)
    # Each attempt starts when the previous interruption is recovered (or at the window start)
    # and trains until the next interruption; clamp recoveries that overrun the next failure.
    spans: list[tuple[datetime, datetime, PlannedInterruption | None]] = []
    begin = start
    for item in interruptions:
        stop = max(item.occurred_at, begin + timedelta(seconds=60))
        spans.append((begin, stop, item))
        begin = max(item.recovered_at, stop + timedelta(seconds=60))
    spans.append((begin, max(end, begin + timedelta(seconds=3600)), None))
    init = rng.uniform(240, 600, size=len(spans))
    restore = rng.uniform(30, 120, size=len(spans))
    restore[0] = 0.0
    train_s = sum(max(0.0, (b - a).total_seconds() - i - r) for (a, b, _), i, r in
                  zip(spans, init, restore, strict=True))  # fmt: skip
    step_s = train_s / scale.total_steps
    attempts: list[PlannedAttempt] = []
    reached = -1
    for number, ((begin, stop, ended_by), init_s, restore_s) in enumerate(
        zip(spans, init, restore, strict=True), start=1
    ):
        resume = 0 if reached < 0 else (reached // scale.checkpoint_every) * scale.checkpoint_every
        budget = (stop - begin).total_seconds() - init_s - restore_s
        count = max(1, int(budget // step_s))
        last = resume + count - 1
        attempts.append(
            PlannedAttempt(
                number=number,
                started_at=begin,
                init_s=float(init_s),
                restore_s=float(restore_s),
                first_step=resume,
                last_step=last,
                step_s=step_s,
                ended_by=ended_by,
            )
        )
        reached = max(reached, last)
    checkpoints = list(range(scale.checkpoint_every, reached + 1, scale.checkpoint_every))
    return Plan(
        scale=scale,
        start=start,
        end=end,
        attempts=attempts,
        interruptions=interruptions,
        checkpoint_steps=checkpoints,
    )


def metric_values(
    steps: npt.NDArray[np.int64],
    step_s: float,
    *,
    seed: int,
    slow_steps: tuple[int, int] | None = None,
) -> dict[str, npt.NDArray[np.float64]]:
    """The 8 metrics at `steps`. Noise is a function of the step alone (seeded per step), so a
    replayed step after a restart is bit-identical, as deterministic training makes it. Steps
    within `slow_steps` (first, last) take SLOWDOWN_FACTOR times as long."""
    noise = _step_noise(steps, seed)
    x = steps.astype(np.float64)
    loss = 1.75 + 9.0 * (x + 200.0) ** -0.28 + 0.02 * noise[0]
    warm = np.minimum(1.0, (x + 1) / 8000.0)
    lr = 8e-5 * warm * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * np.minimum(x / 1.2e6, 1.0))))
    step_time = step_s * (1.0 + 0.015 * noise[1])
    if slow_steps is not None:
        inside = (steps >= slow_steps[0]) & (steps <= slow_steps[1])
        step_time = np.where(inside, step_time * SLOWDOWN_FACTOR, step_time)
    return {
        "loss": loss,
        "grad_norm": 0.35 + 0.05 * np.abs(noise[2]) + 2.0 / np.sqrt(x + 10),
        "learning_rate": lr,
        "tokens_per_s": TOKENS_PER_STEP / step_time,
        "step_time_s": step_time,
        "tokens_seen": (x + 1) * TOKENS_PER_STEP,
        "data_loading_s": 0.02 + 0.01 * np.abs(noise[3]),
        "memory_gb": 71.0 + 0.5 * noise[4],
    }


def _step_noise(steps: npt.NDArray[np.int64], seed: int) -> npt.NDArray[np.float64]:
    """Five standard-normal-ish values per step from a hash of (seed, step): the same step
    gives the same numbers in every attempt, without a table the size of the run."""
    mixed = steps.astype(np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) % (1 << 64))
    rows = []
    for lane in range(5):
        h = mixed * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(
            (lane * 0x94D049BB133111EB) % (1 << 64)
        )
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
        unit = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        rows.append((unit - 0.5) * math.sqrt(12.0))  # uniform, unit variance
    return np.vstack(rows)
