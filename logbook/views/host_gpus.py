"""The host page's GPUs: a table of each GPU's index, PCI bus id and UUID with its newest
readings and energy, and temperature, power, SM clock and utilisation over time, a line per
GPU, from what the dcgm-exporter pushes stored (raw samples for DEVICE_SAMPLE_RETENTION_DAYS,
5-minute means before that)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from django.conf import settings
from django.http import QueryDict
from django.utils import timezone

from logbook import fleet_charts
from telemetry import dcgm
from telemetry.charts import as_payload
from telemetry.models import Host
from telemetry.selectors.dcgm import (
    CURVE_FIELDS,
    ENERGY_FIELD,
    dcgm_device_health,
    host_gpu_history,
)

DEFAULT_HOURS = 24
MAX_HOURS = 24 * 30
SHOWN = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK",
         "DCGM_FI_DEV_GPU_UTIL")  # fmt: skip


@dataclass(frozen=True)
class GpuRow:
    index: int | None
    pci_bus_id: str
    uuid: str
    model: str
    latest: list[tuple[str, float | None, str]]  # (label, value, unit) of SHOWN
    energy_total_kwh: float | None  # since the driver loaded (the counter's value)
    energy_window_kwh: float | None  # used over the charted window
    last_xid: int
    last_push_at: datetime

    @property
    def name(self) -> str:
        """How the charts' legends name it: "GPU 3 · 3B:00.0"."""
        index = f"GPU {self.index}" if self.index is not None else self.uuid[:12]
        return f"{index} · {short_bus_id(self.pci_bus_id)}" if self.pci_bus_id else index


def short_bus_id(bus_id: str) -> str:
    """The bus:device.function a kernel log prints, without dcgm's domain ("00000000:")."""
    return bus_id.split(":", 1)[1] if bus_id.count(":") == 2 else bus_id


def hours_param(params: QueryDict) -> tuple[int, str]:
    """The charts' window (?hours=, 1 to MAX_HOURS) and what was wrong with it ("" if fine)."""
    raw = (params.get("hours") or "").strip()
    if not raw:
        return DEFAULT_HOURS, ""
    if raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_HOURS:
        return int(raw), ""
    return DEFAULT_HOURS, f"hours: a whole number from 1 to {MAX_HOURS}; showing {DEFAULT_HOURS}."


def gpu_panel(*, host: Host, params: QueryDict, now: datetime | None = None) -> dict[str, Any]:
    """The page's GPU table, charts (as charts_script payload entries) and window."""
    now = now or timezone.now()
    hours, error = hours_param(params)
    since = now - timedelta(hours=hours)
    health = dcgm_device_health(host=host)
    if not health:
        # No GPU of the host ever pushed (every push keeps its state): no rows, no curves,
        # and no history query or frames to build (most hosts of a fleet without exporters).
        empty = {"gpus": [], "gpu_charts": [], "gpu_payload": [], "gpu_window_kwh": None}
        return {**empty, "gpu_hours": hours, "gpu_hours_error": error,
                "raw_retention_days": settings.DEVICE_SAMPLE_RETENTION_DAYS}  # fmt: skip
    history = pd.DataFrame(
        host_gpu_history(host=host, since=since, until=now + timedelta(seconds=1), now=now),
        columns=["device_id", "at", "field", "value"],
    )
    energy = history[history["field"] == ENERGY_FIELD]
    rows = []
    names: dict[int, str] = {}
    for one in health:
        device, state = one.device, one.state
        last = state.last_values()
        counter = last.get(ENERGY_FIELD)
        mine = energy[energy["device_id"] == device.pk]["value"].tolist()
        row = GpuRow(
            index=device.index_on_host,
            pci_bus_id=device.pci_bus_id,
            uuid=device.uuid,
            model=state.model_name or device.accelerator_type,
            latest=[
                (dcgm.FIELDS[name].label, last.get(name), dcgm.FIELDS[name].unit) for name in SHOWN
            ],
            energy_total_kwh=dcgm.kwh(float(counter)) if counter is not None else None,
            energy_window_kwh=dcgm.energy_used_kwh(mine),
            last_xid=state.last_xid,
            last_push_at=state.last_push_at,
        )
        rows.append(row)
        names[device.pk] = row.name
    order = {device_id: position for position, device_id in enumerate(names)}
    payload = []
    curves = history[history["field"].isin(CURVE_FIELDS) & history["device_id"].isin(names)]
    for position, field in enumerate(CURVE_FIELDS):
        frame = curves[curves["field"] == field]
        if frame.empty:
            continue
        spec = dcgm.FIELDS[field]
        # One line per GPU in index order, each oldest first.
        frame = frame.assign(
            gpu=frame["device_id"].map(names), order=frame["device_id"].map(order)
        ).sort_values(["order", "at"], kind="stable")
        figure = fleet_charts.host_gpu_figure(
            frame[["gpu", "at", "value"]], title=f"{spec.label} per GPU", unit=spec.unit
        )
        payload.append({"id": f"chart-gpu-{position}", "figure": as_payload(figure)})
    window_kwh = [row.energy_window_kwh for row in rows if row.energy_window_kwh is not None]
    return {
        "gpus": rows,
        "gpu_charts": [entry["id"] for entry in payload],
        "gpu_payload": payload,
        "gpu_hours": hours,
        "gpu_hours_error": error,
        "gpu_window_kwh": sum(window_kwh) if window_kwh else None,
        "raw_retention_days": settings.DEVICE_SAMPLE_RETENTION_DAYS,
    }
