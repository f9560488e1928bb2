"""The at-risk list measured on a replayed stream: a seeded fleet of GPUs whose hourly DCGM
readings hold failures with precursors, failures without, and healthy GPUs with the noise
that makes false alarms (a benign burst of correctable errors, a hot afternoon's throttling,
PCIe replays after a reseat). The detector (telemetry.risk.assess, what GET
/api/v1/fleet/at-risk runs) is asked every EVAL_EVERY of the stream, as the page would be
read, and scored against the failures:

- flagged in advance: the share of failures flagged at some point in the HORIZON before
  them (and still flagged, or flagged again, up to the failure does not matter);
- lead time: from the first such flag to the failure, median over the flagged ones;
- false alarms: flags (a GPU going from not at risk to at risk) with no failure of that GPU in
  the HORIZON after, per 1,000 GPU-days of the stream.

The stream is synthetic, so the figures measure the detector against this generator's
assumptions (docs/at-risk.md says which), not against a real fleet. `python -m
bench.risk_replay` prints them; tests/telemetry/test_risk.py prints and checks them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from telemetry import risk

START = datetime(2026, 11, 1, tzinfo=UTC)
STEP = timedelta(hours=1)
EVAL_EVERY = timedelta(hours=2)
HORIZON = timedelta(hours=72)


@dataclass(frozen=True)
class Replay:
    gpus: int
    days: int
    failures: int
    with_precursors: int
    flagged: int
    lead_times_h: list[float]
    false_alarms: int

    @property
    def flagged_share(self) -> float:
        return self.flagged / self.failures if self.failures else 0.0

    @property
    def median_lead_h(self) -> float | None:
        return statistics.median(self.lead_times_h) if self.lead_times_h else None

    @property
    def false_alarms_per_1000_gpu_days(self) -> float:
        return 1000 * self.false_alarms / (self.gpus * self.days)

    def lines(self) -> list[str]:
        lead = self.median_lead_h
        return [
            f"replayed stream: {self.gpus} GPUs x {self.days} days, {self.failures} failures "
            f"({self.with_precursors} with precursors, {self.failures - self.with_precursors} "
            "without)",
            f"flagged in advance: {self.flagged}/{self.failures} = {self.flagged_share:.0%}",
            f"median lead time: {lead:.1f} h" if lead is not None else "median lead time: -",
            f"false alarms: {self.false_alarms} = "
            f"{self.false_alarms_per_1000_gpu_days:.2f} per 1,000 GPU-days",
        ]


@dataclass
class _Gpu:
    readings: list[risk.Reading]
    xids: list[risk.XidSeen]
    failed_at: datetime | None
    precursors: bool


def _gpu_stream(rng: np.random.Generator, hours: int, kind: str) -> _Gpu:
    """One GPU's hourly readings. kind: "healthy", "memory" (a failing HBM: its correctable
    rate grows for 6-72 h, often a row remap left pending, sometimes XID 92, then XID 79),
    "thermal" (throttling grows for 12-48 h before it falls off the bus) or "sudden" (XID 79
    with nothing before)."""
    fail_hour = int(rng.integers(96, hours)) if kind != "healthy" else None
    lead = {"memory": rng.uniform(6, 72), "thermal": rng.uniform(12, 48)}.get(kind, 0.0)
    sbe = pcie = thermal_us = 0.0
    pending = 0.0
    xids: list[risk.XidSeen] = []
    readings: list[risk.Reading] = []
    burst_left = hot_left = replay_left = 0
    for hour in range(hours if fail_hour is None else fail_hour):
        at = START + hour * STEP
        to_fail = (fail_hour - hour) if fail_hour is not None else None
        rate = 0.05  # a healthy GPU: about one correctable error a day
        throttle = 0.0
        replays = float(rng.poisson(0.2))
        # Benign noise on every GPU: a short burst of correctable errors (a rare ~1-in-300
        # GPU-days event), a hot afternoon, a reseated riser's replays.
        if burst_left == 0 and rng.random() < 1 / (300 * 24):
            burst_left = int(rng.integers(2, 6))
        if burst_left:
            rate, burst_left = float(rng.uniform(5, 30)), burst_left - 1
        if hot_left == 0 and rng.random() < 1 / (60 * 24):
            hot_left = int(rng.integers(2, 6))
        if hot_left:
            throttle, hot_left = float(rng.uniform(0.005, 0.04)), hot_left - 1
        if replay_left == 0 and rng.random() < 1 / (400 * 24):
            replay_left = int(rng.integers(1, 4))
        if replay_left:
            replays, replay_left = replays + float(rng.uniform(20, 80)), replay_left - 1
        if to_fail is not None and to_fail <= lead:
            progress = 1 - to_fail / lead
            if kind == "memory":
                rate = 0.05 + 60 * progress**2
                if pending == 0 and progress > 0.4 and rng.random() < 0.08:
                    pending = 1.0
                if progress > 0.6 and rng.random() < 0.04:
                    xids.append(risk.XidSeen(at, 92))
            else:
                throttle = max(throttle, 0.01 + 0.12 * progress)
        sbe += float(rng.poisson(rate))
        pcie += replays
        thermal_us += throttle * 3.6e9
        readings.append(
            risk.Reading(
                at,
                {
                    risk.ECC_SBE[0]: sbe,
                    risk.PCIE_REPLAY: pcie,
                    risk.THERMAL_VIOLATION: thermal_us,
                    risk.ROW_REMAP_PENDING: pending,
                },
            )
        )
    failed_at = START + fail_hour * STEP if fail_hour is not None else None
    return _Gpu(readings, xids, failed_at, precursors=kind in ("memory", "thermal"))


def replay(*, gpus: int = 160, days: int = 21, seed: int = 36) -> Replay:
    rng = np.random.default_rng(seed)
    hours = days * 24
    kinds = ["memory"] * 14 + ["thermal"] * 4 + ["sudden"] * 10
    kinds += ["healthy"] * (gpus - len(kinds))
    streams = [_gpu_stream(rng, hours, kind) for kind in kinds]
    every = int(EVAL_EVERY / STEP)
    window = int(risk.LOOKBACK / STEP) + 1
    flagged = false_alarms = 0
    leads: list[float] = []
    for gpu in streams:
        first_flag: datetime | None = None
        was = False
        for index in range(every - 1, len(gpu.readings), every):
            now = gpu.readings[index].at
            readings = gpu.readings[max(0, index + 1 - window) : index + 1]
            xids = [one for one in gpu.xids if one.at <= now]
            flagged_now = risk.assess(readings, xids, now=now).at_risk
            if flagged_now and not was:
                real = gpu.failed_at is not None and gpu.failed_at - now <= HORIZON
                if real and first_flag is None:
                    first_flag = now
                elif not real:
                    false_alarms += 1
            was = flagged_now
        if gpu.failed_at is not None and first_flag is not None:
            flagged += 1
            leads.append((gpu.failed_at - first_flag).total_seconds() / 3600)
    failures = sum(1 for gpu in streams if gpu.failed_at is not None)
    return Replay(
        gpus=gpus,
        days=days,
        failures=failures,
        with_precursors=sum(1 for gpu in streams if gpu.failed_at is not None and gpu.precursors),
        flagged=flagged,
        lead_times_h=sorted(leads),
        false_alarms=false_alarms,
    )


if __name__ == "__main__":
    for line in replay().lines():
        print(line)
