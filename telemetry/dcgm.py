"""NVIDIA dcgm-exporter fields Chronicle keeps, and the health events they signal. Pure: no
ORM, no I/O.

Field names are dcgm-exporter's own (`DCGM_FI_DEV_*`), so what an operator reads here is what
they grep for in the exporter's counters CSV and in Grafana. Which fields the exporter sends
by default, and which it leaves commented out, is from its etc/default-counters.csv.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise


@dataclass(frozen=True)
class DcgmField:
    name: str
    label: str
    unit: str
    kind: str  # "gauge" or "counter", as the exporter's counters CSV declares it
    group: str
    on_by_default: bool


_FIELDS = [
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature", "°C", "gauge", "temperature", True),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature", "°C", "gauge", "temperature", True),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "Power draw", "W", "gauge", "power", True),
    DcgmField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Energy since boot", "mJ", "counter", "power", True
    ),
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "SM clock", "MHz", "gauge", "clocks", True),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "Memory clock", "MHz", "gauge", "clocks", True),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "GPU utilization", "%", "gauge", "utilization", True),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization", "%", "gauge", "utilization", True),
    DcgmField("DCGM_FI_DEV_XID_ERRORS", "Last XID error", "code", "gauge", "xid", True),
    DcgmField("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ECC single-bit (volatile)", "errors", "counter",
              "ecc", False),
    DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ECC double-bit (volatile)", "errors", "counter",
              "ecc", False),
    DcgmField("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "ECC single-bit (aggregate)", "errors", "counter",
              "ecc", False),
    DcgmField("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "ECC double-bit (aggregate)", "errors", "counter",
              "ecc", False),
    DcgmField("DCGM_FI_DEV_RETIRED_SBE", "Retired pages (single-bit)", "pages", "counter", "ecc",
              False),
    DcgmField("DCGM_FI_DEV_RETIRED_DBE", "Retired pages (double-bit)", "pages", "counter", "ecc",
              False),
    DcgmField("DCGM_FI_DEV_RETIRED_PENDING", "Pages pending retirement", "pages", "counter", "ecc",
              False),
    DcgmField("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Remapped rows (uncorrectable)", "rows",
              "counter", "row_remap", True),
    DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Remapped rows (correctable)", "rows",
              "counter", "row_remap", True),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Row remapping failed", "1 = failed", "gauge",
              "row_remap", True),
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "PCIe replays", "retries", "counter", "pcie",
              True),
    DcgmField("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "NVLink flow-control CRC errors",
              "errors", "counter", "nvlink", False),
    DcgmField("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "NVLink data CRC errors", "errors",
              "counter", "nvlink", False),
    DcgmField("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "NVLink replays", "retries",
              "counter", "nvlink", False),
    DcgmField("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "NVLink recovery errors", "errors",
              "counter", "nvlink", False),
    DcgmField("DCGM_FI_DEV_THERMAL_VIOLATION", "Thermal throttling", "µs", "counter", "thermal",
              False),
    DcgmField("DCGM_FI_DEV_POWER_VIOLATION", "Power throttling", "µs", "counter", "power", False),
    # DCGM field 396: a row remap recorded but applied only at the next GPU reset (the
    # at-risk list's "pending row remap"); the exporter's default counters leave it out.
    DcgmField("DCGM_FI_DEV_ROW_REMAP_PENDING", "Row remap pending", "1 = pending", "gauge",
              "row_remap", False),
    # NVML's clock event (throttle) reasons bitmask (nvmlClocksEventReasons): what a slowdown's
    # thermal and power causes read (diagnosis.slowdown_rules). Appended: FIELDS is append-only.
    DcgmField("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Clock event reasons", "bitmask", "gauge",
              "clocks", False),
]  # fmt: skip

FIELDS: dict[str, DcgmField] = {field.name: field for field in _FIELDS}

# The health counters dcgm-exporter ships commented out: without them Chronicle cannot see
# ECC errors, NVLink errors or thermal throttling, so the UI warns when a host lacks them.
HEALTH_COUNTERS_OFF_BY_DEFAULT: list[str] = [
    field.name for field in _FIELDS if not field.on_by_default
]

XID = "DCGM_FI_DEV_XID_ERRORS"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
MEMORY_TEMP = "DCGM_FI_DEV_MEMORY_TEMP"
THERMAL_VIOLATION = "DCGM_FI_DEV_THERMAL_VIOLATION"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
# Uncorrectable memory errors: double-bit ECC (volatile, since the driver loaded; aggregate,
# over the board's life) and the pages retired because of them.
UNCORRECTABLE_ECC = [
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_RETIRED_DBE",
]

# Thermal limits. NVIDIA data-centre boards report a "GPU Max Operating Temp" of about 85-87 °C
# and an HBM "Memory Max Operating Temp" of about 95 °C in `nvidia-smi -q`; at these readings
# the board is throttling or about to. Tune per fleet.
GPU_TEMP_LIMIT_C = 87.0
MEMORY_TEMP_LIMIT_C = 95.0

# DCGM's "blank" sentinels (no value for this field on this GPU) are int64 values just below
# 2^63; old exporters print them as numbers, so anything this large is not a reading.
BLANK_SENTINEL_MIN = float(2**63 - 20)

# XID texts (dcgm-exporter's xid_errors.go; NVIDIA's XID catalog).
XID_MESSAGES: dict[int, str] = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    140: "Unrecovered ECC Error",
    143: "GPU Initialization Failure",
    144: "NVLINK: SAW Error",
    145: "NVLINK: RLW Error",
    149: "NVLINK: NETIR Error",
    154: "GPU Recovery Action Changed",
}


@dataclass
class GpuReadings:
    """What one push says about one GPU."""

    host: str
    uuid: str
    gpu_index: int | None = None
    model_name: str = ""
    pci_bus_id: str = ""
    xid_message: str = ""
    values: dict[str, float] = field(default_factory=dict)
    # Epoch seconds, only for samples that carried a timestamp.
    timestamps: dict[str, float] = field(default_factory=dict)
    # Every mapped field the exporter sent, blank or not: what its counters file enables.
    fields_sent: set[str] = field(default_factory=set)
    # Where the host sits, from the push's labels ({"rack": ..., "site": ...}; levels not
    # labelled are absent): telemetry.services.topology places the host.
    placement: dict[str, str] = field(default_factory=dict)


def is_reading(value: float) -> bool:
    """Whether an exported value is a measurement (not NaN, not a DCGM blank sentinel)."""
    return not math.isnan(value) and abs(value) < BLANK_SENTINEL_MIN


def xid_message(code: int) -> str:
    return XID_MESSAGES.get(code, "see NVIDIA's XID catalog")


class EventKind:
    XID = "xid"
    ECC_UNCORRECTABLE = "ecc_uncorrectable"
    ROW_REMAP = "row_remap"
    ROW_REMAP_FAILURE = "row_remap_failure"
    THERMAL = "thermal"


@dataclass(frozen=True)
class HealthEvent:
    """A health signal found by comparing a device's previous readings with new ones.

    `first_sight`: the reading describes a state that may predate Chronicle's knowledge of the
    device (a non-zero XID gauge or a failed row remap on the first push): worth a fleet
    record, but not evidence that the run now using the device was hit by it."""

    kind: str
    field: str
    previous: float | None
    value: float
    message: str
    first_sight: bool = False
    xid: int | None = None


def events_detect(
    *, previous: Mapping[str, float] | None, current: Mapping[str, float]
) -> list[HealthEvent]:
    """Health events between two readings of one device (`previous` None: never seen).

    Rules (a repeat of the same readings finds nothing):
    - XID: the last-XID gauge changes to a non-zero code other than the previous one.
    - Uncorrectable ECC: a double-bit ECC or retired-DBE-page counter increases.
    - Row remap: the uncorrectable remapped-rows counter increases.
    - Row remap failure: the failure gauge becomes 1.
    - Thermal: GPU or memory temperature crosses its limit upwards, or the thermal violation
      counter increases.
    A counter that goes down (reboot, driver reload) only sets a new baseline."""
    before = previous or {}
    events: list[HealthEvent] = []

    xid_now = current.get(XID)
    if xid_now is not None and xid_now != 0 and before.get(XID) != xid_now:
        code = int(xid_now)
        events.append(
            HealthEvent(
                kind=EventKind.XID,
                field=XID,
                previous=before.get(XID),
                value=xid_now,
                message=f"XID {code}: {xid_message(code)}",
                first_sight=XID not in before,
                xid=code,
            )
        )

    increases = _increases(before, current, UNCORRECTABLE_ECC)
    if increases:
        name, old, new = increases[0]
        events.append(
            HealthEvent(
                kind=EventKind.ECC_UNCORRECTABLE,
                field=name,
                previous=old,
                value=new,
                message="Uncorrectable ECC: " + "; ".join(_rise_text(*one) for one in increases),
            )
        )

    increases = _increases(before, current, [UNCORRECTABLE_REMAPPED_ROWS])
    if increases:
        name, old, new = increases[0]
        events.append(
            HealthEvent(
                kind=EventKind.ROW_REMAP,
                field=name,
                previous=old,
                value=new,
                message="Rows remapped for uncorrectable errors: " + _rise_text(name, old, new),
            )
        )

    failure = current.get(ROW_REMAP_FAILURE)
    if failure is not None and failure >= 1 and before.get(ROW_REMAP_FAILURE, 0) < 1:
        events.append(
            HealthEvent(
                kind=EventKind.ROW_REMAP_FAILURE,
                field=ROW_REMAP_FAILURE,
                previous=before.get(ROW_REMAP_FAILURE),
                value=failure,
                message="Row remapping failed: the GPU has no spare rows left for a bad one",
                first_sight=ROW_REMAP_FAILURE not in before,
            )
        )

    thermal = _thermal(before, current)
    if thermal:
        name, old, new = thermal[0][1:]
        events.append(
            HealthEvent(
                kind=EventKind.THERMAL,
                field=name,
                previous=old,
                value=new,
                message="Thermal limit: " + "; ".join(text for text, *_ in thermal),
            )
        )
    return events


def _increases(
    before: Mapping[str, float], current: Mapping[str, float], names: list[str]
) -> list[tuple[str, float, float]]:
    # A counter seen for the first time is a baseline: its count may be years old.
    return [
        (name, before[name], current[name])
        for name in names
        if name in current and name in before and current[name] > before[name]
    ]


def _rise_text(name: str, old: float, new: float) -> str:
    return f"{FIELDS[name].label} {old:g} → {new:g} (+{new - old:g})"


def _thermal(
    before: Mapping[str, float], current: Mapping[str, float]
) -> list[tuple[str, str, float | None, float]]:
    found: list[tuple[str, str, float | None, float]] = []
    for name, limit in ((GPU_TEMP, GPU_TEMP_LIMIT_C), (MEMORY_TEMP, MEMORY_TEMP_LIMIT_C)):
        now = current.get(name)
        old = before.get(name)
        if now is not None and now >= limit and (old is None or old < limit):
            text = f"{FIELDS[name].label} {now:g} °C ≥ limit {limit:g} °C"
            found.append((text, name, old, now))
    for name, old, new in _increases(before, current, [THERMAL_VIOLATION]):
        text = f"thermal throttling for {(new - old) / 1e6:g} s more ({name})"
        found.append((text, name, old, new))
    return found


# dcgm-exporter's energy counter is in millijoules since the driver loaded; 1 kWh = 3.6e9 mJ.
MJ_PER_KWH = 3.6e9


def kwh(millijoules: float) -> float:
    return millijoules / MJ_PER_KWH


def energy_used_kwh(readings_mj: Sequence[float]) -> float | None:
    """kWh used over a series of the energy counter (mJ), oldest first: the sum of its
    increases; a drop is a driver reload or a reset, after which the new value is what was
    used since. None with fewer than two readings."""
    if len(readings_mj) < 2:
        return None
    used = 0.0
    for before, after in pairwise(readings_mj):
        used += after - before if after >= before else after
    return kwh(used)
