"""Failure statistics from interruption records: the Llama 3 Table 5 breakdown, the rates
(MTBF, MTTR, time to detect, per-accelerator failure rate) and the projection of MTBF to
another accelerator count. Pure: rows and spans in, numbers out; no ORM.

Every derived number comes back as a `Derived`, which carries its formula and the values
that went into it, so pages and the API can show both beside the number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

SECONDS_PER_DAY = 86_400.0
PER_ACCELERATOR_DAYS = 1_000  # failure rates are quoted per 1,000 accelerator-days

# The columns an interruption row must have (a DataFrame or a sequence of mappings).
INTERRUPTION_COLUMNS = [
    "run_id",
    "component",
    "group",
    "is_hardware",
    "planned",
    "occurred_at",
    "detected_at",
    "recovered_at",
    "manual_intervention",
]


@dataclass(frozen=True)
class Derived:
    """A computed number with the formula and inputs that produced it. `value` is None when
    an input is missing (no unexpected interruption yet, no accelerator count...)."""

    value: float | None
    unit: str
    formula: str
    inputs: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "unit": self.unit,
            "formula": self.formula,
            "inputs": self.inputs,
            "note": self.note,
        }


@dataclass(frozen=True)
class BreakdownRow:
    component: str
    group: str
    is_hardware: bool
    count: int
    percent: float  # of the table's total, unrounded


@dataclass(frozen=True)
class Breakdown:
    """Unexpected interruptions by component and by group (Table 5 lists only unexpected
    ones), plus the planned/unexpected split and the hardware share."""

    rows: list[BreakdownRow]
    groups: list[BreakdownRow]  # component is "" on group rows
    total: int  # unexpected interruptions: the denominator of every percent above
    planned: int
    unexpected: int
    hardware: int
    planned_percent: Derived
    hardware_share: Derived


SPAN_FROM_ATTEMPTS = "attempts"
SPAN_FROM_EVENTS = "events"


@dataclass(frozen=True)
class RunSpan:
    """The observed time of one run: first attempt start to the end of its data, or, for a run
    whose attempts carry no times (a chronicle brought in from a logbook), the span of its
    interruptions (`basis` says which)."""

    run_id: int
    start: datetime
    end: datetime
    accelerator_count: int | None
    basis: str = SPAN_FROM_ATTEMPTS

    def clipped(self, window_start: datetime | None, window_end: datetime | None) -> RunSpan:
        start = self.start if window_start is None else max(self.start, window_start)
        end = self.end if window_end is None else min(self.end, window_end)
        return RunSpan(self.run_id, start, max(start, end), self.accelerator_count, self.basis)

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Rates:
    observed_days: Derived
    accelerator_days: Derived
    interruptions_per_day: Derived
    unexpected_per_day: Derived
    job_mtbf_h: Derived
    mttr_min: Derived
    time_to_detect_min: Derived
    failure_rate_per_1000_accelerator_days: Derived
    manual_interventions: int


def interruptions_frame(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Normalise rows to a DataFrame with INTERRUPTION_COLUMNS (missing optional ones empty)."""
    frame = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    for column in INTERRUPTION_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    frame = frame[INTERRUPTION_COLUMNS].copy()
    for column in ("is_hardware", "planned", "manual_intervention"):
        frame[column] = frame[column].fillna(False).astype(bool)
    for column in ("occurred_at", "detected_at", "recovered_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def _percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def breakdown(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> Breakdown:
    frame = interruptions_frame(rows)
    unexpected = frame[~frame["planned"]]
    total = len(unexpected)
    by_component = (
        unexpected.groupby(["component", "group", "is_hardware"], dropna=False)
        .size()
        .reset_index(name="count")
        # Largest first as in the paper; the name breaks ties so the order is stable.
        .sort_values(["count", "component"], ascending=[False, True])
    )
    table = [
        BreakdownRow(
            str(row.component),
            str(row.group),
            bool(row.is_hardware),
            int(row.count),
            _percent(int(row.count), total),
        )
        for row in by_component.itertuples()
    ]
    by_group = (
        unexpected.groupby("group", dropna=False)
        .size()
        .reset_index(name="count")
        .sort_values(["count", "group"], ascending=[False, True])
    )
    # A group is hardware when every component counted in it is (GPU, Host, Network).
    hardware_groups = unexpected.groupby("group", dropna=False)["is_hardware"].all()
    groups = [
        BreakdownRow(
            "",
            str(row.group),
            bool(hardware_groups[row.group]),
            int(row.count),
            _percent(int(row.count), total),
        )
        for row in by_group.itertuples()
    ]
    planned = int(frame["planned"].sum())
    hardware = int(unexpected["is_hardware"].sum())
    return Breakdown(
        rows=table,
        groups=groups,
        total=total,
        planned=planned,
        unexpected=total,
        hardware=hardware,
        planned_percent=Derived(
            _percent(planned, len(frame)) if len(frame) else None,
            "%",
            "planned / (planned + unexpected) · 100",
            {"planned": planned, "unexpected": total},
        ),
        hardware_share=Derived(
            _percent(hardware, total) if total else None,
            "%",
            "unexpected interruptions with a hardware root cause / unexpected · 100",
            {"hardware": hardware, "unexpected": total},
            "Hardware: root-cause categories flagged is_hardware in the taxonomy.",
        ),
    )


def observed_spans(
    spans: Sequence[RunSpan], window_start: datetime | None, window_end: datetime | None
) -> list[RunSpan]:
    """Each run's span cut to the window (a run outside it contributes zero time)."""
    return [span.clipped(window_start, window_end) for span in spans]


def _mean_minutes(later: pd.Series, earlier: pd.Series) -> tuple[float | None, int]:
    known = later.notna() & earlier.notna()
    if not known.any():
        return None, 0
    deltas = (later[known] - earlier[known]).dt.total_seconds() / 60.0
    return float(deltas.mean()), int(known.sum())


def _mtbf_note(n_unexpected: int, observed_s: float) -> str:
    if not n_unexpected:
        return "No unexpected interruption: MTBF exceeds the observed time."
    if not observed_s:
        return "Not computable: no observed time (no attempt times, and one event time at most)."
    return ""


def rates(rows: pd.DataFrame | Iterable[Mapping[str, Any]], spans: Sequence[RunSpan]) -> Rates:
    """Rates over the observed time of `spans` (already clipped to any window).

    Job MTBF = observed time / unexpected interruptions (planned ones are not failures);
    the per-accelerator rate = unexpected interruptions / accelerator-time, over only the runs
    whose accelerator count is known, for numerator and denominator alike.
    MTTR and time to detect average the unexpected interruptions that have both times."""
    frame = interruptions_frame(rows)
    # One set of runs for numerator and denominator: interruptions count only for the runs
    # whose time is observed (a run with neither attempt times nor event times has none).
    observed_ids = {span.run_id for span in spans}
    frame = frame[frame["run_id"].isin(observed_ids)]
    unexpected = frame[~frame["planned"]]
    n_unexpected = len(unexpected)
    observed_s = sum(span.seconds for span in spans)
    observed_days = observed_s / SECONDS_PER_DAY
    from_events = sum(1 for span in spans if span.basis == SPAN_FROM_EVENTS)
    counted = [span for span in spans if span.accelerator_count]
    counted_ids = {span.run_id for span in counted}
    accelerator_days = sum(span.accelerator_count * span.seconds for span in counted) / (
        SECONDS_PER_DAY
    )
    n_counted = int(unexpected["run_id"].isin(counted_ids).sum())
    uncounted_runs = len({span.run_id for span in spans} - counted_ids)
    mttr, n_mttr = _mean_minutes(unexpected["recovered_at"], unexpected["detected_at"])
    ttd, n_ttd = _mean_minutes(unexpected["detected_at"], unexpected["occurred_at"])
    days_input = {"observed_days": observed_days}
    return Rates(
        observed_days=Derived(
            observed_days,
            "days",
            "Σ over runs of (end of data - first attempt start), cut to the window",
            {"runs": len(spans), "runs_observed_from_events": from_events},
            f"{from_events} run(s) without attempt times: observed from their first to their "
            "last interruption event (the span of its events)."
            if from_events
            else "",
        ),
        accelerator_days=Derived(
            accelerator_days if counted else None,
            "accelerator-days",
            "Σ over runs of accelerator_count · observed days",
            {"runs_with_accelerator_count": len(counted)},
            f"{uncounted_runs} run(s) without an accelerator count left out."
            if uncounted_runs
            else "",
        ),
        interruptions_per_day=Derived(
            len(frame) / observed_days if observed_days else None,
            "per day",
            "all interruptions / observed days",
            {"interruptions": len(frame), **days_input},
        ),
        unexpected_per_day=Derived(
            n_unexpected / observed_days if observed_days else None,
            "per day",
            "unexpected interruptions / observed days",
            {"unexpected": n_unexpected, **days_input},
        ),
        job_mtbf_h=Derived(
            observed_s / 3600.0 / n_unexpected if n_unexpected and observed_s else None,
            "h",
            "observed time / unexpected interruptions",
            {"observed_h": observed_s / 3600.0, "unexpected": n_unexpected},
            _mtbf_note(n_unexpected, observed_s),
        ),
        mttr_min=Derived(
            mttr,
            "min",
            "mean(recovered_at - detected_at) over unexpected interruptions",
            {"interruptions_with_both_times": n_mttr},
        ),
        time_to_detect_min=Derived(
            ttd,
            "min",
            "mean(detected_at - occurred_at) over unexpected interruptions",
            {"interruptions_with_both_times": n_ttd},
        ),
        failure_rate_per_1000_accelerator_days=Derived(
            PER_ACCELERATOR_DAYS * n_counted / accelerator_days if accelerator_days else None,
            "per 1,000 accelerator-days",
            "1000 · unexpected interruptions / accelerator-days",
            {"unexpected": n_counted, "accelerator_days": accelerator_days},
        ),
        manual_interventions=int(frame["manual_intervention"].sum()),
    )


def projected_mtbf_min(
    failure_rate_per_1000_accelerator_days: float | None, accelerator_count: int
) -> Derived:
    """Job MTBF at `accelerator_count` accelerators if each fails independently at the
    measured rate: the job stops when any one does, so the rates add up."""
    if accelerator_count <= 0:
        raise ValueError("accelerator_count must be positive")
    inputs = {
        "failure_rate_per_1000_accelerator_days": failure_rate_per_1000_accelerator_days,
        "accelerator_count": accelerator_count,
    }
    formula = "1 / (rate per accelerator-day · accelerator count), in minutes"
    if not failure_rate_per_1000_accelerator_days:
        return Derived(None, "min", formula, inputs, "No measured failure rate to project.")
    per_day = failure_rate_per_1000_accelerator_days / PER_ACCELERATOR_DAYS * accelerator_count
    return Derived(SECONDS_PER_DAY / 60.0 / per_day, "min", formula, inputs)


@dataclass(frozen=True)
class Downtime:
    """One interruption's stop: when it occurred, when the job was back (None when not
    reported), the accelerators it held (the attempt's, else the run's; None unknown), and
    the steps the restart ran again with the interrupted attempt's mean step time (None
    when not known)."""

    planned: bool
    occurred_at: datetime
    recovered_at: datetime | None
    accelerators: int | None
    lost_steps: int | None = None
    step_time_s: float | None = None


def lost_to_interruptions(downtimes: Iterable[Downtime], window_end: datetime | None) -> Derived:
    """GPU-hours the interruptions cost: each one's accelerators times its downtime
    (occurrence to recovery, cut at the window's end) and the time of the steps its restart
    ran again (lost steps · the attempt's mean step time): what goodput counts as
    infrastructure recovery and wasted progress. Planned ones count too (maintenance holds
    the GPUs as well). One without a recovery time or an accelerator count is left out, its
    recomputed steps too when their number or the step time is unknown; each said so."""
    counted = planned = no_recovery = no_count = no_steps = 0
    down_h = again_h = gpu_hours = 0.0
    for one in downtimes:
        if one.recovered_at is None:
            no_recovery += 1
            continue
        if not one.accelerators:
            no_count += 1
            continue
        end = one.recovered_at if window_end is None else min(one.recovered_at, window_end)
        down = max(0.0, (end - one.occurred_at).total_seconds()) / 3600.0
        again = 0.0
        if one.lost_steps and one.step_time_s is not None:
            again = one.lost_steps * one.step_time_s / 3600.0
        elif one.lost_steps != 0:  # unknown: no lost steps reported, or no step time
            no_steps += 1
        counted += 1
        planned += one.planned
        down_h, again_h = down_h + down, again_h + again
        gpu_hours += one.accelerators * (down + again)
    left_out = []
    if no_recovery:
        left_out.append(f"{no_recovery} without a recovery time")
    if no_count:
        left_out.append(f"{no_count} of runs without an accelerator count")
    note = f"Left out: {' and '.join(left_out)}." if left_out else ""
    if no_steps:
        note += f" {no_steps} counted without the steps run again (no lost steps or step time)."
    return Derived(
        # Unknown only when every interruption had to be left out; none at all is 0.
        gpu_hours if counted or not left_out else None,
        "GPU-hours",
        "Σ accelerators · (recovered_at - occurred_at + lost_steps · mean step time), cut at "
        "the window's end",
        {
            "interruptions": counted,
            "planned": planned,
            "downtime_h": down_h,
            "recomputed_h": again_h,
        },
        note.strip(),
    )


@dataclass(frozen=True)
class FailureReport:
    breakdown: Breakdown
    rates: Rates
    projection: Derived


def failure_report(
    rows: pd.DataFrame | Iterable[Mapping[str, Any]],
    spans: Sequence[RunSpan],
    projection_accelerators: int,
) -> FailureReport:
    frame = interruptions_frame(rows)
    measured = rates(frame, spans)
    return FailureReport(
        breakdown=breakdown(frame),
        rates=measured,
        projection=projected_mtbf_min(
            measured.failure_rate_per_1000_accelerator_days.value, projection_accelerators
        ),
    )


def _row_dict(row: BreakdownRow) -> dict[str, Any]:
    return {
        "component": row.component,
        "group": row.group,
        "is_hardware": row.is_hardware,
        "count": row.count,
        "percent": row.percent,
    }


def failure_report_as_dict(report: FailureReport) -> dict[str, Any]:
    """The report as JSON-ready data (the API's body and the page's numbers are the same)."""
    table = report.breakdown
    measured = report.rates
    return {
        "breakdown": {
            "percent_formula": "count / unexpected total · 100",
            "total": table.total,
            "planned": table.planned,
            "unexpected": table.unexpected,
            "hardware": table.hardware,
            "rows": [_row_dict(row) for row in table.rows],
            "groups": [
                {key: value for key, value in _row_dict(row).items() if key != "component"}
                for row in table.groups
            ],
            "planned_percent": table.planned_percent.as_dict(),
            "hardware_share": table.hardware_share.as_dict(),
        },
        "rates": {
            **{name: getattr(measured, name).as_dict() for name in RATE_NAMES},
            "manual_interventions": measured.manual_interventions,
        },
        "projection": report.projection.as_dict(),
    }


RATE_NAMES = [
    "observed_days",
    "accelerator_days",
    "interruptions_per_day",
    "unexpected_per_day",
    "job_mtbf_h",
    "mttr_min",
    "time_to_detect_min",
    "failure_rate_per_1000_accelerator_days",
]
