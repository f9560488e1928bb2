"""Jobs that slow down, as a user's job and exporter send them through the documented contract:
ingest batches (POST /api/v1/ingest: tokens_per_s and step_time_s a step with its time,
rank_timings every 10 steps, attempt_started with hosts and run_info.config per attempt) and
dcgm-exporter pushes
(POST /api/v1/ingest/prometheus?host=..., timestamped samples). One job per kind of cause:

- `config_change`: attempt 2 resumes with micro_batch_size 8 (was 4), every rank ~15% slower;
- `hardware_change`: attempt 2 resumes with one host swapped for a new one whose ranks run
  ~25% slower;
- `thermal`: one host's GPUs report a thermal clock event reason and run hot from step 250,
  its ranks ~20% slower;
- `section`: data loading grows by 0.25 s on every rank from step 250;
- `noise`: ±2% jitter only, across a restart.

Used by tests/diagnosis/test_slowdowns_pass.py (the test client) and tests/test_demo_path.py
(a running `make demo`). Synthetic times end now (each job's 400-odd steps of ~1 s), so the
DCGM samples fall in the raw retention window.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

KINDS = ("config_change", "hardware_change", "thermal", "section", "noise")
RANKS = 16
RANKS_PER_HOST = 8
TOKENS_PER_STEP = 1_048_576
DCGM_EVERY_S = 60
GPUS = 8


@dataclass
class Job:
    kind: str
    run: str
    batches: list[dict] = field(default_factory=list)
    # (host, exposition text) in time order.
    pushes: list[tuple[str, str]] = field(default_factory=list)
    # What the top cause must name.
    hosts: tuple[str, ...] = ()
    config_keys: tuple[str, ...] = ()


def _exposition(host: str, at_s: float, *, hot: bool) -> str:
    stamp = int(at_s * 1000)
    lines = []
    for gpu in range(GPUS):
        uuid = f"GPU-{host}-{gpu:02d}"
        labels = (
            f'gpu="{gpu}",UUID="{uuid}",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"'
        )
        # Hot GPUs: hardware thermal slowdown (0x40) with hardware slowdown (0x8), NVML's
        # clock event reasons; 84 °C, under the board's limit (no health event of its own).
        reasons = 0x48 if hot else 0
        for name, value in (
            ("DCGM_FI_DEV_GPU_TEMP", 84 if hot else 62),
            ("DCGM_FI_DEV_POWER_USAGE", 520.0 if hot else 610.0),
            ("DCGM_FI_DEV_SM_CLOCK", 1410 if hot else 1980),
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", reasons),
        ):
            lines.append(f"{name}{{{labels}}} {value} {stamp}")
    return "\n".join(lines) + "\n"


def build(kind: str, run: str, *, end_s: float, seed: int = 0) -> Job:
    rng = random.Random(seed)
    job = Job(kind=kind, run=run)
    hosts_1 = [f"{run}-n0", f"{run}-n1"]
    hosts_2 = list(hosts_1)
    config_1 = {"lr": 3e-4, "micro_batch_size": 4, "seq_len": 8192}
    config_2 = dict(config_1)
    two_attempts = kind in ("config_change", "hardware_change", "noise")
    if kind == "config_change":
        config_2["micro_batch_size"] = 8
        job.config_keys = ("micro_batch_size",)
    if kind == "hardware_change":
        hosts_2 = [f"{run}-n0", f"{run}-spare7"]
        job.hosts = (f"{run}-spare7",)
    if kind == "thermal":
        job.hosts = (f"{run}-n1",)
    plan = [(1, 0, 219, hosts_1, config_1)]
    if two_attempts:
        plan.append((2, 210, 419, hosts_2, config_2))
    else:
        plan = [(1, 0, 419, hosts_1, config_1)]
    total_steps = sum(last - first + 1 for _, first, last, _, _ in plan)
    clock = end_s - total_steps * 1.05 - 120
    hot_from: float | None = None
    for number, first, last, hosts, config in plan:
        events: list[dict] = [
            {
                "type": "attempt_started",
                "attempt": number,
                "time": clock,
                "hosts": hosts,
                **({"resumed_from_step": first} if first else {}),
            }
        ]
        metrics: list[dict] = []
        timings: dict[str, list[float]] = {}
        for step in range(first, last + 1):
            per_rank = []
            data_loading = []
            for rank in range(RANKS):
                compute = 0.9 * (1 + rng.gauss(0, 0.003))
                load = 0.05
                host = hosts[rank // RANKS_PER_HOST]
                if kind == "config_change" and number == 2:
                    compute *= 1.15
                if kind == "hardware_change" and number == 2 and host == job.hosts[0]:
                    compute *= 1.25
                if kind == "thermal" and step >= 250 and host == job.hosts[0]:
                    compute *= 1.2
                if kind == "section" and step >= 250:
                    load += 0.25
                per_rank.append(compute + load)
                data_loading.append(load)
            step_s = max(per_rank) + 0.02
            if number == 2 and step - first < 10:
                step_s *= 1.8  # warm-up after the restart
            clock += step_s
            if kind == "thermal" and step >= 250 and hot_from is None:
                hot_from = clock
            value = TOKENS_PER_STEP / step_s * (1 + rng.uniform(-0.02, 0.02))
            metrics.append({"name": "tokens_per_s", "step": step, "value": value, "time": clock})
            metrics.append({"name": "step_time_s", "step": step, "value": step_s, "time": clock})
            timings.setdefault("step", [0.0] * RANKS)
            timings.setdefault("data_loading", [0.0] * RANKS)
            for rank in range(RANKS):
                timings["step"][rank] += per_rank[rank] / 10
                timings["data_loading"][rank] += data_loading[rank] / 10
            if (step - first) % 10 == 9:
                events.append(
                    {"type": "rank_timings", "attempt": number, "time": clock,
                     "first_step": step - 9, "last_step": step, "ranks": list(range(RANKS)),
                     "hosts": [hosts[r // RANKS_PER_HOST] for r in range(RANKS)],
                     "sections": {k: [round(v, 5) for v in vs] for k, vs in timings.items()}}
                )  # fmt: skip
                timings = {}
        if number == 1 and two_attempts:
            events.append(
                {
                    "type": "attempt_ended",
                    "attempt": 1,
                    "time": clock,
                    "status": "preempted",
                    "reason": "maintenance window",
                }
            )
            clock += 60
        if number == plan[-1][0]:
            events.append({"type": "attempt_ended", "attempt": number, "time": clock,
                           "status": "completed"})  # fmt: skip
        # Metrics and events in batches well under the contract's limits, each event with
        # the metrics of its time, the config with the attempt's first batch.
        previous = float("-inf")
        for index in range(0, len(metrics), 400):
            chunk = metrics[index : index + 400]
            until = chunk[-1]["time"]
            document = {
                "batch_id": f"{run}-a{number}-{index}",
                "run": run,
                "attempt": number,
                "metrics": chunk,
                "events": [e for e in events if previous < e["time"] <= until],
            }
            previous = until
            if index == 0:
                document["run_info"] = {"config": config, "tokens_per_step": TOKENS_PER_STEP,
                                        "accelerator_count": RANKS}  # fmt: skip
            job.batches.append(document)
        rest = [e for e in events if e["time"] > previous]
        if rest:
            job.batches.append({"batch_id": f"{run}-a{number}-end", "run": run,
                                "attempt": number, "events": rest})  # fmt: skip
    start = end_s - total_steps * 1.05 - 120
    moment = start
    while moment <= clock:
        for host in sorted(set(hosts_1) | set(hosts_2)):
            hot = (
                host in job.hosts
                and kind == "thermal"
                and hot_from is not None
                and moment >= hot_from
            )
            job.pushes.append((host, _exposition(host, moment, hot=hot)))
        moment += DCGM_EVERY_S
    return job


def jobs(prefix: str, *, end_s: float) -> list[Job]:
    return [build(kind, f"{prefix}-{kind}", end_s=end_s, seed=i) for i, kind in enumerate(KINDS)]
