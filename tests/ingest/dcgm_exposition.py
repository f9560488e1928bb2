"""The dcgm-exporter exposition the DCGM ingest tests push (tests/ingest/fixtures/
dcgm_exposition.txt: two hosts, four GPUs), its GPUs, and edits of it."""

from __future__ import annotations

import re
from pathlib import Path

from telemetry.dcgm import HEALTH_COUNTERS_OFF_BY_DEFAULT

FIXTURE = (Path(__file__).parent / "fixtures" / "dcgm_exposition.txt").read_text()
URL = "/api/v1/ingest/prometheus"
A01_GPU0 = "GPU-3f6a1e0b-8c2d-4b7e-9a51-2d0c6e8f1a42"
A01_GPU1 = "GPU-9b27c4d1-5e3a-4f80-b6c2-7a1d3e5f9c08"
B07_GPU0 = "GPU-c1d8e2f3-4a5b-4c6d-8e7f-90a1b2c3d4e5"
# Families in the fixture that Chronicle does not keep.
UNMAPPED = [
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
]


def exposition(changes: dict[tuple[str, str], str] | None = None, *, text: str = FIXTURE) -> str:
    """The fixture with some samples' values replaced: {(GPU UUID, field): new value}."""
    lines = []
    for line in text.split("\n"):
        for (uuid, name), value in (changes or {}).items():
            if line.startswith(name + "{") and f'UUID="{uuid}"' in line:
                line = re.sub(r"\} \S+$", "} " + value, line)
        lines.append(line)
    return "\n".join(lines)


def default_counters_only(text: str = FIXTURE) -> str:
    """What an exporter run with its shipped default-counters.csv sends."""
    off = tuple(HEALTH_COUNTERS_OFF_BY_DEFAULT)
    return "\n".join(
        line
        for line in text.split("\n")
        if not line.startswith(off) and not line.startswith(tuple(f"# HELP {n}" for n in off))
    )


XID, DBE = "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
