"""The demo's fleet beyond its one big run, sent as the fleet would send it: small evaluation
jobs on four hosts of one rack interrupted within three minutes (a grouped failure naming the
rack), and one GPU's exporter pushes over its last hours showing a rising correctable-ECC rate
and a pending row remap (on the at-risk list), beside calm GPUs. Pure: standard library only,
no ORM; `manage.py load_demo` sends it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from demo.batches import DEFAULT_START, HOSTS_PER_RACK, RACKS_PER_POD, SITES

# Four hosts of rack r040, in the scheme of demo.batches.demo_placement: its top-of-rack
# switch fails.
GROUP_RACK = 40
GROUP_HOSTS = [f"h{GROUP_RACK * HOSTS_PER_RACK + i:04d}" for i in range(HOSTS_PER_RACK)]
# Beyond the demo run's pool, so each job sends where its host sits (the grouping needs it).
GROUP_PLACEMENT = {
    "rack": f"r{GROUP_RACK:03d}",
    "pod": f"p{GROUP_RACK // RACKS_PER_POD:02d}",
    "cluster": f"{SITES[1]}-1",
    "site": SITES[1],
}
# When the rack fails, after the demo run began (demo.batches.demo_start).
GROUP_AFTER = timedelta(days=5, hours=7, minutes=12)
GROUP_MESSAGE = (
    "NET/IB : Got completion from peer with error 12, opcode 0, len 0, vendor err 129 "
    "(transport retry counter exceeded)"
)
# The at-risk GPU and its neighbours on host h0100 (demo.batches' active hosts).
RISK_HOST = "h0100"
RISK_GPU = "GPU-demo-risk-0100-3"
CALM_GPUS = [f"GPU-demo-calm-0100-{i}" for i in range(3)]
PUSH_HOURS = 10
MODEL = "NVIDIA H100 80GB HBM3"


def eval_job_batches(*, start: datetime = DEFAULT_START) -> list[dict[str, Any]]:
    """One batch per evaluation job: it starts on its host and is interrupted 40 s after the
    one before it, GROUP_AFTER the demo run's `start`."""
    group_at = start + GROUP_AFTER
    batches = []
    for index, host in enumerate(GROUP_HOSTS):
        began = group_at - timedelta(hours=2)
        at = group_at + timedelta(seconds=40 * index)
        batches.append(
            {
                "batch_id": f"demo-eval-{host}",
                "run": f"demo-eval-{host}",
                "attempt": 1,
                "run_info": {"description": "Held-out evaluation sweep (8 GPUs)."},
                "events": [
                    {
                        "type": "attempt_started",
                        "time": _iso(began),
                        "hosts": [host],
                        "placement": {host: GROUP_PLACEMENT},
                    },
                    {
                        "type": "interruption",
                        "time": _iso(at),
                        "id": f"demo-eval-{host}-1",
                        "category": "network-switch-cable",
                        "hosts": [host],
                        "message": GROUP_MESSAGE,
                    },
                ],
            }
        )
    return batches


def risk_pushes(*, now: datetime) -> list[str]:
    """dcgm-exporter text for h0100, one push an hour over the last PUSH_HOURS, timestamped
    (what a replayed exporter buffer sends): GPU 3's correctable errors grow ever faster and
    a row remap is pending for the last three hours; GPUs 0-2 stay calm."""
    pushes = []
    count = 0.0
    for hour in range(PUSH_HOURS):
        count += 1 if hour < PUSH_HOURS // 2 else 12 * (hour - PUSH_HOURS // 2 + 1)
        at_ms = int((now - timedelta(hours=PUSH_HOURS - hour, minutes=-1)).timestamp() * 1000)
        lines = []
        for index, uuid in enumerate([*CALM_GPUS, RISK_GPU]):
            risky = uuid == RISK_GPU
            values = {
                "DCGM_FI_DEV_GPU_TEMP": 64.0 + index,
                "DCGM_FI_DEV_XID_ERRORS": 0.0,
                "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": count if risky else float(hour // 4),
                "DCGM_FI_DEV_ROW_REMAP_PENDING": 1.0 if risky and hour >= PUSH_HOURS - 3 else 0.0,
            }
            labels = f'gpu="{index}",UUID="{uuid}",Hostname="{RISK_HOST}",modelName="{MODEL}"'
            lines += [f"{name}{{{labels}}} {value:g} {at_ms}" for name, value in values.items()]
        pushes.append("\n".join(lines) + "\n")
    return pushes


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
