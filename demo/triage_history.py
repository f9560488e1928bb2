"""The demo fleet's triage history: the incidents of an earlier run on the same hosts, each
already triaged by on-call, so the auto-triage classifier has something of this fleet to
learn from (docs/triage.md, "Learning from on-call"). Plain data, no ORM: the loader
(ingest/management/commands/load_demo.py) records and triages them.

Shaped like Llama 3's Table 5 at a small scale (faulty GPUs and HBM first), with one lesson
only this fleet teaches: its NCCL watchdog timeouts that name rail mlx5_4 were that rail's
NIC, which the rules read as a bare timeout and on-call kept re-filing as NIC. The last
incident is one more such timeout, still open: the classifier's vote shows on it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

import numpy as np

HISTORY_RUN = "llama3-70b-pretrain-v1"
OPEN_KEY = "demo-history-open"


class PastIncident(NamedTuple):
    key: str
    occurred_at: datetime
    category: str  # what on-call filed it under ("" for the open one)
    host: str
    message: str


# category: message templates ({host}, {rank}, {pci}, {gpu}, {seq}, {n} filled per incident).
_TEMPLATES: dict[str, tuple[str, ...]] = {
    "faulty-gpu": (
        "NVRM: Xid (PCI:0000:{pci}:00): 79, pid={n}, GPU has fallen off the bus.",
        "[Rank {rank}] CUDA error: unspecified launch failure; NVRM: Xid (PCI:0000:{pci}:00): "
        "79 on {host}",
        "nvidia-smi: Unable to determine the device handle for GPU 0000:{pci}:00.0: Unknown Error",
    ),
    "gpu-hbm3-memory": (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered (rank {rank}, {host})",
        "NVRM: Xid (PCI:0000:{pci}:00): 48, pid={n}, An uncorrectable double bit error (DBE) "
        "has been detected on GPU in the framebuffer",
        "NVRM: Xid (PCI:0000:{pci}:00): 94, pid={n}, Contained ECC error; row remapping "
        "pending on GPU {gpu}",
    ),
    "software-bug": (
        "RuntimeError: CUDA error: an illegal memory access was encountered (fused attention "
        "kernel, step {n})",
        "Traceback (most recent call last): ... AssertionError: shape mismatch in "
        "pipeline stage {gpu}",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {gpu}.00 GiB on rank {rank}",
    ),
    "network-switch-cable": (
        "NCCL WARN NET/IB : Got completion from peer 10.1.{gpu}.{n} with status=12 opcode=0 "
        "len=0 vendor err 129 (Recv); transport retry counter exceeded",
        "NCCL WARN NET/IB : Got async event : port error on leaf switch ports of rack {gpu}",
    ),
    "nic": (
        "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600{n} milliseconds before timing out. "
        "Last NCCL progress on {host} rail mlx5_4.",
    ),
    "nccl-watchdog-timeout": (
        "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
        "OpType=ALLGATHER, Timeout(ms)=600000) ran for 600{n} milliseconds before timing out.",
    ),
    "dependency": (
        "ImportError: {host}: undefined symbol: ncclCommRegister (libnccl.so.2 older than the "
        "container's PyTorch)",
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version on {host}",
    ),
    "gpu-system-processor": (
        "NVRM: Xid (PCI:0000:{pci}:00): 119, pid={n}, Timeout after 6s of waiting for RPC "
        "response from GPU{gpu} GSP!",
    ),
    "host-maintenance": (
        "slurmstepd: error: *** JOB {n} ON {host} CANCELLED DUE TO NODE_FAIL ***",
    ),
    "storage": (
        "OSError: [Errno 5] Input/output error while saving checkpoint step {n} to /lustre/ckpt",
    ),
}
# How many of each the history holds (the classifier learns those with 5 or more).
_COUNTS = {
    "faulty-gpu": 9,
    "gpu-hbm3-memory": 7,
    "software-bug": 6,
    "network-switch-cable": 5,
    "nic": 6,
    "nccl-watchdog-timeout": 5,
    "dependency": 5,
    "gpu-system-processor": 3,
    "host-maintenance": 2,
    "storage": 2,
}


def triage_history(*, hosts: list[str], end: datetime, seed: int = 70) -> list[PastIncident]:
    """The history's incidents over the 40 days before `end`, oldest first, the open one
    last (an hour before `end`)."""
    rng = np.random.default_rng(seed)
    chosen = [slug for slug, count in _COUNTS.items() for _ in range(count)]
    rng.shuffle(chosen)
    start = end - timedelta(days=40)
    incidents = []
    for index, slug in enumerate(chosen):
        at = start + timedelta(hours=float(index * 15 + rng.uniform(0, 10)))
        incidents.append(_incident(rng, f"demo-history-{index}", at, slug, hosts, slug))
    incidents.append(_incident(rng, OPEN_KEY, end - timedelta(hours=1), "nic", hosts, ""))
    return incidents


def _incident(
    rng: np.random.Generator, key: str, at: datetime, slug: str, hosts: list[str], filed: str
) -> PastIncident:
    templates = _TEMPLATES[slug]
    host = hosts[int(rng.integers(len(hosts)))]
    template = templates[int(rng.integers(len(templates)))]
    message = template.format(
        host=host,
        rank=int(rng.integers(0, 1024)),
        pci=f"{int(rng.integers(16, 224)):02x}",
        gpu=int(rng.integers(0, 8)),
        seq=int(rng.integers(10_000, 99_999)),
        n=int(rng.integers(100, 999)),
    )
    return PastIncident(key, at, filed, host, message)
