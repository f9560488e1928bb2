"""A synthetic but realistic ingest stream for one 70B pre-training run, for demos and tests.

`demo_batches()` returns the batch documents a training job (plus its supervisor) would POST
to the ingest endpoint, in order: eight attempts, seven interruptions across different
root causes (one planned), checkpoints every 200 steps, wasted progress after each crash, an
SDC-style loss spike, a NaN divergence, and per-rank timings in which the GPU that fails
first runs slow for its last hours. Pure: standard library and numpy only, no ORM, so
it can feed a management command, a fixture or a load test alike.
"""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_right
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import numpy as np

RUN = "demo-70b-pretrain"
DEFAULT_START = datetime(2026, 11, 1, tzinfo=UTC)
# How long before its first load the demo run began: its incidents then sit inside the
# fleet's 30-day offender window and its rack failure (demo.fleet) is hours old, whenever
# `make demo` first runs. Later loads keep the first load's start (load_demo).
DEMO_AGE = timedelta(days=6)


def demo_start(now: datetime) -> datetime:
    """Where a first load puts the demo run: midnight UTC, DEMO_AGE before `now`."""
    day = (now.astimezone(UTC) - DEMO_AGE).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


# Llama-3-70B shape. 4096 sequences x 8192 tokens at ~50 s a step on 1024 H100s is ~32% MFU,
# the low end of what large dense runs report, so the MFU page shows a plausible number.
PARAMETER_COUNT = 70_553_706_496
SEQ_LEN = 8192
GLOBAL_BATCH = 4096
TOKENS_PER_STEP = GLOBAL_BATCH * SEQ_LEN
N_GPUS = 1024
GPUS_PER_HOST = 8
SPARE_HOSTS = 16
BASE_STEP_S = 50.0
CKPT_EVERY = 200
PEAK_LR, MIN_LR, WARMUP, TRAIN_STEPS = 1.5e-4, 1.5e-5, 500, 24_000
# A few thousand points per request: well under the 20,000 limit, and each batch is a
# realistic "flush every ~8 hours of steps" from the job.
STEPS_PER_BATCH = 600
# Per-rank timings: one event per ~10 minutes of steps (a heat-map bucket), all ranks.
RANK_STEPS = 12
RANK_SEED = 16
SLOW_FACTOR, SLOW_FOR_S = 1.15, 3 * 3600
# The steps the failing GPU runs slow for: the whole job waits for it (a synchronous job runs
# at its slowest rank's pace), so its step time grows too: the run page's explained slowdown.
SLOW_STEPS = round(SLOW_FOR_S / BASE_STEP_S)
SPIKE_STEP = 1290  # inside attempt 2's wasted range, so attempt 3 replays it cleanly
MILESTONE_STEP = math.ceil(100e9 / TOKENS_PER_STEP)  # first step past 100B tokens


class _Stop(NamedTuple):
    """How an attempt ends: the last step it completed and why it stopped."""

    last_step: int
    category: str | None  # None: the attempt is still running when the demo ends
    component: str = ""
    status: str = "failed"
    planned: bool = False
    manual: bool = False
    message: str = ""


# Crash steps sit well after a checkpoint so every restart repeats tens to hundreds of steps.
# Columns: last step, category, component, status, planned, manual intervention, message.
# fmt: off
_SCENARIO: list[_Stop] = [
    _Stop(731, "faulty-gpu", "GPU", "failed", False, False,
          "Xid 79: GPU has fallen off the bus."),
    _Stop(1347, "gpu-hbm3-memory", "GPU HBM3 Memory", "failed", False, False,
          "Xid 48: double-bit ECC error in HBM3; row remap pending."),
    _Stop(1743, "network-switch-cable", "Network Switch/Cable", "failed", False, False,
          "NET/IB: completion error 12 (transport retry counter exceeded); leaf switch port "
          "flapping, optic replaced."),
    _Stop(2268, "nccl-watchdog-timeout", "NCCL Watchdog Timeouts", "failed", False, False,
          "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
          "Timeout(ms)=600000) ran for 600112 milliseconds before timing out."),
    _Stop(2517, "software-bug", "Software Bug", "failed", False, True,
          "CUDA error: an illegal memory access was encountered (fused RoPE kernel, regression "
          "in container 24.10); rolled back to 24.09."),
    _Stop(2806, "planned-maintenance", "Planned Maintenance", "killed", True, False,
          "Drained after checkpoint 2800 for leaf-switch firmware upgrade."),
    _Stop(3155, "loss-divergence", "Loss Divergence", "failed", False, True,
          "Loss went NaN at step 3155 after a grad-norm blow-up; resumed with lower LR."),
    _Stop(4000, None),
]
# fmt: on
LR_SCALE_AFTER_DIVERGENCE = 0.7  # applies from the attempt after the NaN onwards
_HARDWARE = {"faulty-gpu", "gpu-hbm3-memory"}


def _iso(start: datetime, offset_s: float) -> str:
    """RFC3339 with 'Z', whole seconds (the step_time_s metric carries the precision)."""
    return (start + timedelta(seconds=round(offset_s))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpu_uuid(rng: np.random.Generator) -> str:
    h = rng.bytes(16).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _lr(step: int, scale: float) -> float:
    """Linear warmup, then cosine to MIN_LR over the planned TRAIN_STEPS."""
    peak = PEAK_LR * scale
    if step <= WARMUP:
        return peak * step / WARMUP
    progress = min(1.0, (step - WARMUP) / (TRAIN_STEPS - WARMUP))
    return MIN_LR + (peak - MIN_LR) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _loss_curve(step: int) -> float:
    """Power law in steps: ~11 at init (ln of a 128K vocab), ~2.2 by step 3700."""
    return 1.7 + 9.3 / (1.0 + step / 30.0) ** 0.6


def _step_time(rng: np.random.Generator, start: datetime, offset_s: float) -> float:
    # Llama 3 saw a 1-2% diurnal throughput swing with temperature: slowest mid-afternoon UTC.
    hour = ((start + timedelta(seconds=offset_s)).hour + offset_s % 3600 / 3600) % 24
    diurnal = 1.0 + 0.012 * math.sin(2 * math.pi * (hour - 9) / 24)
    return BASE_STEP_S * diurnal * float(np.exp(rng.normal(0.0, 0.008)))


def demo_batches(*, seed: int = 7, start: datetime | None = None) -> list[dict[str, Any]]:
    """Every batch document for the demo run, in sending order. Deterministic per seed."""
    rng = np.random.default_rng(seed)
    t0 = DEFAULT_START if start is None else start
    if t0.tzinfo is None:
        t0 = t0.replace(tzinfo=UTC)

    pool = [f"h{i:04d}" for i in range(N_GPUS // GPUS_PER_HOST + SPARE_HOSTS)]
    active = pool[: N_GPUS // GPUS_PER_HOST]
    spares = pool[len(active) :]
    gpus: dict[str, list[str]] = {}

    def devices_of(host: str) -> list[str]:
        if host not in gpus:
            gpus[host] = [_gpu_uuid(rng) for _ in range(GPUS_PER_HOST)]
        return gpus[host]

    batches: list[dict[str, Any]] = []
    clock = 0.0  # seconds since t0
    resume: int | None = None
    suspect: tuple[str, str] | None = None  # (host, device) of the SDC spike
    lr_scale = 1.0
    milestone_noted = False
    diverged_at: int | None = None
    for attempt, stop in enumerate(_SCENARIO, start=1):
        events: list[tuple[float, dict[str, Any]]] = []
        started: dict[str, Any] = {"type": "attempt_started", "attempt": attempt}
        if resume is not None:
            started["resumed_from_step"] = resume
        started["hosts"] = list(active)
        if attempt == 1:  # where the whole pool sits, spares included (demo.fleet)
            started["placement"] = demo_placement(pool)
        events.append((clock, started | {"time": _iso(t0, clock)}))
        if resume is not None:
            restore_s = float(rng.uniform(90, 240))
            clock += restore_s
            restored = {"step": resume, "attempt": attempt, "restore_s": round(restore_s, 1)}
            events.append(
                (clock, {"type": "checkpoint_restored", "time": _iso(t0, clock), **restored})
            )
        if diverged_at is not None:  # the on-call's fix goes in as the attempt starts
            body = (
                f"Resumed attempt {attempt} from step {resume} after the NaN at step "
                f"{diverged_at}. Peak LR {PEAK_LR:.2e} → "
                f"{PEAK_LR * lr_scale:.2e}; skipped the data shard seen in the 20 steps "
                "before the blow-up."
            )
            note = {"id": "demo-note-lr", "title": "Lowered peak LR after divergence"}
            note |= {"body": body, "kind": "config_change", "step": resume}
            events.append((clock, {"type": "note", "time": _iso(t0, clock), **note}))
            diverged_at = None

        first = 1 if resume is None else resume + 1
        rows: list[tuple[int, float, dict[str, float]]] = []
        step_at: dict[int, float] = {}
        for step in range(first, stop.last_step + 1):
            dt = _step_time(rng, t0, clock)
            if stop.category == "faulty-gpu" and step > stop.last_step - SLOW_STEPS:
                dt *= SLOW_FACTOR
            if step == first:  # compile, NCCL init and data-loader warmup land on step one
                dt += float(rng.uniform(180, 420))
            clock += dt
            # Training is deterministic: a replayed step draws the same noise, so repeated
            # steps match across attempts except where something really went wrong (the SDC
            # spike, the divergence), which is what Chronicle's SDC check looks for.
            step_rng = np.random.default_rng([seed, step])
            loss = _loss_curve(step) * float(np.exp(step_rng.normal(0.0, 0.012)))
            grad = (0.25 + 4.0 * math.exp(-step / 150)) * float(np.exp(step_rng.normal(0.0, 0.1)))
            if attempt == 2 and step == SPIKE_STEP:  # one bad GPU's arithmetic, one step
                loss, grad = 3.0 * loss, 12.0 * grad
            back = stop.last_step - step
            if stop.category == "loss-divergence" and back < 6:
                loss = math.nan if back == 0 else loss * (1.0 + 0.25 * (6 - back) ** 1.5)
                grad *= 3.0 ** (6 - back)
            values = {
                "loss": round(loss, 4),
                "grad_norm": round(grad, 4),
                "lr": _lr(step, lr_scale),
                "tokens_per_s": round(TOKENS_PER_STEP / dt, 1),
                "step_time_s": round(dt, 3),
            }
            rows.append((step, clock, values))
            step_at[step] = clock
            if step % CKPT_EVERY == 0:
                # The blocking part stalls training; it is not in step_time_s so goodput can
                # count it as checkpoint badput rather than productive step time.
                blocking = float(rng.uniform(20, 40))
                clock += blocking
                ckpt = {
                    "step": step,
                    "blocking_save_s": round(blocking, 1),
                    "async_save_s": round(float(rng.uniform(100, 200)), 1),
                    # bf16 weights + fp32 master weights + two Adam moments: 14 bytes/param.
                    "size_bytes": PARAMETER_COUNT * 14 + int(rng.integers(0, 2**24)),
                    "tier": "object_store",
                    "uri": f"s3://ckpt/demo-70b/step_{step:06d}",
                    "checksum": hashlib.sha256(f"{RUN}:{step}:{seed}".encode()).hexdigest(),
                    "status": "saved",
                }
                events.append((clock, {"type": "checkpoint_saved", "time": _iso(t0, clock)} | ckpt))

        if attempt == 1:
            note = {"id": "demo-note-launch", "title": "Run launched on 1024 H100s"}
            note |= {"kind": "milestone", "step": 1, "body": _launch_body()}
            events.append((step_at[1], {"type": "note", "time": _iso(t0, step_at[1])} | note))
        if SPIKE_STEP in step_at and attempt == 2:
            host = active[int(rng.integers(len(active)))]
            suspect = (host, devices_of(host)[int(rng.integers(GPUS_PER_HOST))])
            when = step_at[SPIKE_STEP] + 20
            sdc = {"id": "demo-sdc-1", "step": SPIKE_STEP, "device": suspect[1], "host": host}
            sdc |= {"detection": "loss_spike", "value": rows[SPIKE_STEP - first][2]["loss"]}
            sdc["message"] = f"Loss 3x the running mean at step {SPIKE_STEP}; no overflow."
            events.append((when, {"type": "sdc_suspected", "time": _iso(t0, when)} | sdc))
        if SPIKE_STEP in step_at and attempt == 3 and suspect is not None:
            when = step_at[SPIKE_STEP] + 900
            replay = rows[SPIKE_STEP - first][2]["loss"]
            body = (
                f"Attempt 3 recomputed step {SPIKE_STEP} on replacement hardware: loss "
                f"{replay:.4f}, in line with its neighbours, versus the 3x spike in attempt 2. "
                f"Treating it as SDC on `{suspect[1]}` ({suspect[0]}), which also raised the "
                "HBM3 ECC error that ended attempt 2. Device quarantined, RMA opened."
            )
            note = {"id": "demo-note-sdc", "title": f"Step {SPIKE_STEP} spike did not replay"}
            note |= {"kind": "analysis", "step": SPIKE_STEP, "body": body}
            events.append((when, {"type": "note", "time": _iso(t0, when)} | note))
        if MILESTONE_STEP in step_at and not milestone_noted:
            milestone_noted, when = True, step_at[MILESTONE_STEP]
            body = f"{MILESTONE_STEP * TOKENS_PER_STEP:,} tokens consumed at step {MILESTONE_STEP}."
            note = {"id": "demo-note-100b", "title": "100B tokens", "kind": "milestone"}
            note |= {"step": MILESTONE_STEP, "body": body}
            events.append((when, {"type": "note", "time": _iso(t0, when)} | note))

        placed, slow_rank = list(active), None  # the hosts before a swap below
        if stop.category is not None:
            occurred = clock + float(rng.uniform(5, 40))  # mid-way through the next step
            # Most faults surface within minutes; a hang only when the NCCL watchdog fires.
            lag = 600.0 if stop.category == "nccl-watchdog-timeout" else 0.0
            detected = occurred + lag + float(rng.uniform(60, 300))
            recovered = detected + float(rng.uniform(600, 2400))
            hosts, devices = _culprits(rng, stop.category, active, suspect, devices_of)
            if stop.category == "faulty-gpu":  # it ran slow for hours before it fell off
                slow_rank = GPUS_PER_HOST * active.index(hosts[0])
                slow_rank += devices_of(hosts[0]).index(devices[0])
            last_ckpt = stop.last_step - stop.last_step % CKPT_EVERY
            interruption = {
                "type": "interruption",
                "time": _iso(t0, occurred),
                "id": f"demo-70b-int-{attempt}",
                "category": stop.category,
                "component": stop.component,
                "planned": stop.planned,
                "hosts": hosts,
                "devices": devices,
                "message": stop.message,
                "detected_at": _iso(t0, detected),
                "recovered_at": _iso(t0, recovered),
                "manual_intervention": stop.manual,
                "lost_steps": stop.last_step - last_ckpt,
                "step": stop.last_step,
            }
            ended = {"type": "attempt_ended", "time": _iso(t0, detected), "attempt": attempt}
            ended |= {"status": stop.status, "reason": f"{stop.category}: {stop.message}"}
            events += [(occurred, interruption), (detected, ended)]
            if stop.category in _HARDWARE:  # the scheduler swaps the bad host for a spare
                active[active.index(hosts[0])] = spares.pop(0)
            if stop.category == "loss-divergence":
                lr_scale, diverged_at = LR_SCALE_AFTER_DIVERGENCE, stop.last_step
            resume, clock = last_ckpt, recovered

        # Its own generator: the rank timings draw nothing from `rng`, so adding them left
        # every other number of the demo as it was.
        timings_rng = np.random.default_rng([seed, attempt, RANK_SEED])
        slow_from = stop.last_step - SLOW_STEPS + 1 if slow_rank is not None else None
        events += _rank_timings(timings_rng, t0, rows, placed, slow_rank, slow_from)
        batches += _chunk(t0, attempt, len(batches), seed, rows, events)

    batches[0]["run_info"] = _run_info()
    return batches


# The demo's fleet: racks of 4 hosts, pods of 16 racks, one cluster in each of two sites
# (the pool's first half in one, the second half in the other: a run across two sites).
HOSTS_PER_RACK = 4
RACKS_PER_POD = 16
SITES = ("us-west", "eu-north")


def demo_placement(pool: list[str]) -> dict[str, dict[str, str]]:
    half = (len(pool) + 1) // 2
    placement = {}
    for index, host in enumerate(pool):
        rack = index // HOSTS_PER_RACK
        site = SITES[0] if index < half else SITES[1]
        placement[host] = {
            "rack": f"r{rack:03d}",
            "pod": f"p{rack // RACKS_PER_POD:02d}",
            "cluster": f"{site}-1",
            "site": site,
        }
    return placement


def _culprits(
    rng: np.random.Generator,
    category: str,
    active: list[str],
    suspect: tuple[str, str] | None,
    devices_of: Callable[[str], list[str]],
) -> tuple[list[str], list[str]]:
    """Which hosts and GPUs an interruption names, in the shape each fault really has."""
    if category == "gpu-hbm3-memory" and suspect is not None:
        return [suspect[0]], [suspect[1]]
    if category == "faulty-gpu":
        host = active[int(rng.integers(len(active)))]
        return [host], [devices_of(host)[int(rng.integers(GPUS_PER_HOST))]]
    if category == "network-switch-cable":  # every host under one leaf switch lost its link
        first = 8 * int(rng.integers(len(active) // 8))
        return active[first : first + 8], []
    if category == "nccl-watchdog-timeout":  # the rank that never joined the collective
        return [active[int(rng.integers(len(active)))]], []
    return [], []


def _rank_timings(
    rng: np.random.Generator,
    t0: datetime,
    rows: list[tuple[int, float, dict[str, float]]],
    hosts: list[str],
    slow_rank: int | None,
    slow_from: int | None = None,
) -> list[tuple[float, dict[str, Any]]]:
    """One rank_timings event per RANK_STEPS steps, gathered on rank 0 for all N_GPUS ranks:
    each rank's mean step, forward and data-loading time over those steps. `slow_rank`, when
    given, runs SLOW_FACTOR slower from step `slow_from` (a GPU failing slowly before it
    falls off the bus; the job's step time, which waits for it, is slower by as much there);
    the straggler ledger finds it, the slowdown pass charges it the slowdown, and the next
    attempt, on a spare host, resolves it."""
    events = []
    for index in range(0, len(rows), RANK_STEPS):
        block = rows[index : index + RANK_STEPS]
        when = block[-1][1]
        # Without the attempt's first step (compile and warm-up): section timers skip it.
        timed = block[1:] if index == 0 and len(block) > 1 else block
        step_s = float(np.mean([values["step_time_s"] for _, _, values in timed]))
        slow = slow_rank is not None and slow_from is not None and block[0][0] >= slow_from
        # The ranks' own time: the job's step less the wait for the slow rank.
        times = (step_s / SLOW_FACTOR if slow else step_s) * rng.normal(1.0, 0.008, N_GPUS)
        if slow:
            times[slow_rank] *= SLOW_FACTOR
        event: dict[str, Any] = {
            "type": "rank_timings",
            "time": _iso(t0, when),
            "first_step": block[0][0],
            "last_step": block[-1][0],
            "ranks": list(range(N_GPUS)),
            "sections": {
                "step": np.round(times, 3).tolist(),
                "forward": np.round(times * 0.36, 3).tolist(),
                "data_loading": np.round(rng.normal(0.08, 0.0008, N_GPUS), 4).tolist(),
            },
        }
        if index == 0:  # where each rank runs, once per attempt
            event["hosts"] = [hosts[rank // GPUS_PER_HOST] for rank in range(N_GPUS)]
        events.append((when, event))
    return events


def _chunk(
    t0: datetime,
    attempt: int,
    n_before: int,
    seed: int,
    rows: list[tuple[int, float, dict[str, float]]],
    events: list[tuple[float, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Split one attempt into batches; each event rides in the batch whose steps span it."""
    n = max(1, math.ceil(len(rows) / STEPS_PER_BATCH))
    parts = [list(p) for p in np.array_split(np.arange(len(rows)), n)]
    # Batch i covers times before the first step of batch i+1; the last one takes the rest.
    bounds = [rows[p[0]][1] for p in parts[1:]]
    per_batch: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in parts]
    for when, event in events:
        per_batch[bisect_right(bounds, when)].append((when, event))
    out = []
    for i, part in enumerate(parts):
        metrics = [
            {"name": name, "step": rows[j][0], "value": value, "time": _iso(t0, rows[j][1])}
            for j in part
            for name, value in rows[j][2].items()
        ]
        ordered = [e for _, e in sorted(per_batch[i], key=lambda pair: pair[0])]
        out.append(
            {
                "batch_id": f"demo-70b-s{seed}-{n_before + i + 1:04d}",
                "run": RUN,
                "attempt": attempt,
                "metrics": metrics,
                "events": ordered,
            }
        )
    return out


def _run_info() -> dict[str, Any]:
    return {
        "parameter_count": PARAMETER_COUNT,
        "n_layers": 80,
        "n_heads": 64,
        "head_dim": 128,
        "seq_len": SEQ_LEN,
        "accelerator_type": "H100-SXM",
        "accelerator_count": N_GPUS,
        "description": "Demo: 70B dense decoder pre-training, synthetic telemetry.",
        "config": {
            "global_batch_sequences": GLOBAL_BATCH,
            "tokens_per_step": TOKENS_PER_STEP,
            "peak_lr": PEAK_LR,
            "min_lr": MIN_LR,
            "warmup_steps": WARMUP,
            "train_steps": TRAIN_STEPS,
            "lr_schedule": "cosine",
            "checkpoint_every_steps": CKPT_EVERY,
            "precision": "bf16",
            "parallelism": {"tensor": 8, "pipeline": 4, "data": 32},
            "flops_reported": "model",
        },
    }


def _launch_body() -> str:
    return (
        f"Attempt 1 started from scratch on {N_GPUS} H100-SXM ({N_GPUS // GPUS_PER_HOST} "
        f"hosts, {SPARE_HOSTS} hot spares). {TOKENS_PER_STEP:,} tokens/step, checkpoint "
        f"every {CKPT_EVERY} steps to object store."
    )
