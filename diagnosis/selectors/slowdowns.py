"""Reads for slowdowns: a run's throughput as the detector takes it, the database's answers to
diagnosis.slowdown_facts.TelemetrySource (through telemetry's and the logbook's selectors),
which runs the periodic pass should read, and the slowdowns the pages and the API show."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from django.db.models import F, OuterRef, Prefetch, Q, QuerySet, Subquery

from diagnosis import slowdown_text
from diagnosis.models import Slowdown, SlowdownCause, SlowdownScan
from diagnosis.slowdown_detect import AttemptThroughput
from diagnosis.slowdown_facts import FIELDS, Reading
from logbook.selectors import checkpoints as checkpoint_selectors
from telemetry.goodput_slowdowns import share_inside
from telemetry.models import Run
from telemetry.selectors import User, packed, projects_for_user, ranks
from telemetry.selectors import attempts as attempt_selectors
from telemetry.selectors import dcgm as dcgm_selectors
from telemetry.selectors.series import run_metric_names

# The throughput series a slowdown is looked for in, in order of preference; step time is
# inverted (a longer step is slower).
THROUGHPUT_METRICS = ("tokens_per_s", "step_time_s", "mfu")
INVERTED = {"step_time_s"}
# A run is read again for this long after its last data: rank timings and DCGM readings of
# a window arrive (and are rolled up) after the throughput that opened it.
RESCAN_AFTER_DATA = timedelta(minutes=5)


def throughput_metric(*, run: Run) -> str | None:
    names = set(run_metric_names(run=run))
    return next((name for name in THROUGHPUT_METRICS if name in names), None)


def run_throughput(*, run: Run, metric: str) -> list[AttemptThroughput]:
    """Each attempt's points of `metric` (inverted for step time), with its blocking
    checkpoint saves' steps excluded. Two queries and the checkpoints'."""
    series = packed.metric_series_attempts(run=run, metric=metric)
    points = packed.series_points_packed(series_ids=list(series))
    saves = checkpoint_selectors.blocking_save_steps(run=run)
    found = []
    for series_id, (_, number) in series.items():
        if series_id not in points:
            continue
        steps, values, times = points[series_id]
        if metric in INVERTED:
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.where(values > 0, 1.0 / values, np.nan)
        found.append(
            AttemptThroughput(
                attempt=number,
                steps=steps,
                values=values,
                times=times,
                excluded_steps=frozenset(saves.get(number, ())),
            )
        )
    return sorted(found, key=lambda one: one.attempt)


def _moment(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


@dataclass
class DatabaseSource:
    """diagnosis.slowdown_facts.TelemetrySource over one run's rows."""

    run: Run

    def __post_init__(self) -> None:
        self._attempts = {one.number: one for one in attempt_selectors.attempt_facts(run=self.run)}
        self._placements: dict[int, Mapping[int, tuple[str, str]]] = {}

    def attempt_id(self, attempt: int) -> int | None:
        one = self._attempts.get(attempt)
        return one.id if one else None

    def attempt_config(self, attempt: int) -> Mapping[str, object]:
        one = self._attempts.get(attempt)
        return (one.config if one and one.config is not None else None) or {}

    def attempt_hosts(self, attempt: int) -> frozenset[str]:
        one = self._attempts.get(attempt)
        return one.hosts if one else frozenset()

    def placements(self, attempt: int) -> Mapping[int, tuple[str, str]]:
        if attempt not in self._placements:
            attempt_id = self.attempt_id(attempt)
            self._placements[attempt] = (
                ranks.rank_placements(attempt_id=attempt_id) if attempt_id else {}
            )
        return self._placements[attempt]

    def gpu_count(self, attempt: int) -> int | None:
        one = self._attempts.get(attempt)
        count = (one.accelerator_count if one else None) or self.run.accelerator_count
        return count or len(self.placements(attempt)) or None

    def section_buckets(
        self, attempt: int, since: float, until: float
    ) -> Sequence[tuple[float, str, Mapping[int, float]]]:
        attempt_id = self.attempt_id(attempt)
        if attempt_id is None:
            return []
        return ranks.rank_buckets_between(
            attempt_id=attempt_id, since=_moment(since), until=_moment(until)
        )

    def readings(
        self, hosts: Iterable[str], since: float, until: float
    ) -> Mapping[str, Sequence[Reading]]:
        return dcgm_selectors.host_readings_between(
            project_id=self.run.project_id,
            host_names=hosts,
            fields=FIELDS,
            since=_moment(since),
            until=_moment(until),
        )


def runs_to_scan(*, now: datetime) -> list[int]:
    """Runs whose data changed since the pass last read them, or that had data within
    RESCAN_AFTER_DATA of that read (their rank timings and readings may have come since)."""
    scans = SlowdownScan.objects.filter(run=OuterRef("pk"))
    return list(
        Run.objects.annotate(
            scanned_version=Subquery(scans.values("data_version")[:1]),
            scanned_at=Subquery(scans.values("scanned_at")[:1]),
        )
        .filter(
            Q(scanned_version__isnull=True)
            | ~Q(scanned_version=F("data_version"))
            | Q(last_seen_at__gt=F("scanned_at") - RESCAN_AFTER_DATA)
        )
        .filter(Q(last_seen_at__isnull=False) | Q(scanned_version__isnull=True))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _with_causes(slowdowns: QuerySet[Slowdown]) -> QuerySet[Slowdown]:
    return slowdowns.select_related("attempt").prefetch_related(
        Prefetch("causes", queryset=SlowdownCause.objects.order_by("position"))
    )


def run_slowdowns(*, run: Run) -> list[Slowdown]:
    """The run's slowdowns, oldest first, with their causes ranked (two queries)."""
    return list(_with_causes(Slowdown.objects.filter(run=run)).order_by("start_time", "start_step"))


def with_words(slowdowns: list[Slowdown]) -> list[Slowdown]:
    """Each slowdown with its summary and cost in words (`summary`, `cost`), for templates."""
    for one in slowdowns:
        one.summary = slowdown_text.summary(one)  # type: ignore[attr-defined]
        one.cost = slowdown_text.cost(one)  # type: ignore[attr-defined]
    return slowdowns


def open_slowdowns_for_user(*, user: User, limit: int = 200) -> list[Slowdown]:
    """Open slowdowns across the projects the user sees, the costliest first."""
    return list(
        _with_causes(
            Slowdown.objects.filter(
                run__project__in=projects_for_user(user=user), status=Slowdown.Status.OPEN
            ).select_related("run__project")
        ).order_by(F("gpu_hours_lost").desc(nulls_last=True), "-detected_at")[:limit]
    )


def slowdown_get_for_user(*, user: User, slowdown_id: int) -> Slowdown | None:
    return _with_causes(
        Slowdown.objects.filter(
            pk=slowdown_id, run__project__in=projects_for_user(user=user)
        ).select_related("run__project")
    ).first()


def lost_by_cause(*, run: Run) -> dict[str, float]:
    """Wall seconds the run lost to slowdowns, by the kind each is charged to (dismissed
    ones are not slowdowns)."""
    totals: dict[str, float] = {}
    rows = (
        Slowdown.objects.filter(run=run)
        .exclude(status=Slowdown.Status.DISMISSED)
        .values_list("cause_kind", "lost_s", "start_time", "end_time")
    )
    for kind, lost_s, _, _ in rows:
        totals[kind] = totals.get(kind, 0.0) + lost_s
    return totals


def lost_windows(*, run: Run) -> list[tuple[str, float, float, float]]:
    """(cause kind, start epoch, end epoch, lost seconds) of each slowdown that is not
    dismissed and has times: goodput's slowdown bucket, clipped to its window."""
    rows = (
        Slowdown.objects.filter(run=run, start_time__isnull=False, end_time__isnull=False)
        .exclude(status=Slowdown.Status.DISMISSED)
        .values_list("cause_kind", "start_time", "end_time", "lost_s")
    )
    return [(kind, a.timestamp(), b.timestamp(), lost) for kind, a, b, lost in rows]


def gpu_hours_lost_by_run(*, run_ids: Sequence[int]) -> dict[int, float]:
    """GPU-hours each run lost to slowdowns (not dismissed): the run list's column."""
    totals: dict[int, float] = {}
    rows = (
        Slowdown.objects.filter(run_id__in=list(run_ids), gpu_hours_lost__isnull=False)
        .exclude(status=Slowdown.Status.DISMISSED)
        .values_list("run_id", "gpu_hours_lost")
    )
    for run_id, hours in rows:
        totals[run_id] = totals.get(run_id, 0.0) + hours
    return totals


@dataclass(frozen=True)
class SlowdownLoss:
    """What the slowdowns (not dismissed) of some runs lost inside a window: wall seconds and
    GPU-hours, each by the cause it is charged to, and how many slowdowns that is."""

    slowdowns: int
    seconds_by_cause: dict[str, float]
    gpu_hours_by_cause: dict[str, float]
    without_gpu_count: int  # slowdowns whose run's GPU count is unknown: no GPU-hours

    @property
    def seconds(self) -> float:
        return sum(self.seconds_by_cause.values())

    @property
    def gpu_hours(self) -> float:
        return sum(self.gpu_hours_by_cause.values())


def lost_in_scope(
    *, runs: QuerySet[Run], start: datetime | None, end: datetime | None
) -> SlowdownLoss:
    """The slowdowns of `runs` inside [start, end) (an open end: no bound), each counted for
    the share of its window inside, as goodput's slowdown bucket counts them
    (telemetry.goodput_slowdowns.lost_in_window): a run's GPU-hours here are its goodput
    bucket's seconds times its GPUs. One query."""
    rows = (
        Slowdown.objects.filter(run__in=runs, start_time__isnull=False, end_time__isnull=False)
        .exclude(status=Slowdown.Status.DISMISSED)
        .values_list("cause_kind", "start_time", "end_time", "lost_s", "gpu_hours_lost")
    )
    low = start.timestamp() if start is not None else -math.inf
    high = end.timestamp() if end is not None else math.inf
    count = without_gpu_count = 0
    seconds: dict[str, float] = {}
    gpu_hours: dict[str, float] = {}
    for kind, began, ended, lost_s, hours in rows:
        share = share_inside(began.timestamp(), ended.timestamp(), start=low, end=high)
        if share <= 0 or lost_s <= 0:
            continue
        count += 1
        seconds[kind] = seconds.get(kind, 0.0) + lost_s * share
        if hours is None:
            without_gpu_count += 1
        else:
            gpu_hours[kind] = gpu_hours.get(kind, 0.0) + hours * share
    return SlowdownLoss(count, seconds, gpu_hours, without_gpu_count)
