"""Reads behind the failure breakdown: interruption rows and run spans, scoped to the user's
projects and narrowed by run, time window, site and cluster."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import pandas as pd
from django.db.models import Exists, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from logbook.failure_maths import (
    INTERRUPTION_COLUMNS,
    SPAN_FROM_EVENTS,
    Derived,
    Downtime,
    FailureReport,
    RunSpan,
    failure_report,
    lost_to_interruptions,
    observed_spans,
)
from logbook.models import Interruption
from logbook.selectors.filters import FilterParams
from telemetry.models import Attempt, Cluster, Host, Run
from telemetry.selectors import User, projects_for_user, run_get_for_user

PROJECTION_DEFAULT = 100_000
PROJECTION_LIMIT = 10_000_000


@dataclass(frozen=True)
class FailureFilters:
    run_id: int | None = None
    start: datetime | None = None
    end: datetime | None = None  # exclusive
    site: str = ""  # a site name
    cluster: str = ""  # "<site>/<cluster>", as the SDC and fleet pages write it
    projection_accelerators: int = PROJECTION_DEFAULT
    pod: str = ""  # the breakdown, MTBF and projection of one pod's or rack's hosts
    rack: str = ""

    def as_dict(self) -> dict[str, object]:
        values = asdict(self)
        for key in ("start", "end"):
            values[key] = values[key].isoformat() if values[key] else None
        return values


def failure_filters_parse(params: Mapping[str, str]) -> FailureFilters:
    """The filters from query parameters run, start, end, site, cluster, accelerators."""
    reader = FilterParams(params)
    run_id = reader.run_id()
    cluster = reader.cluster()
    start, end = reader.window("start", "end")
    accelerators = reader.integer(
        "accelerators", default=PROJECTION_DEFAULT, low=1, high=PROJECTION_LIMIT
    )
    site = reader.text("site")
    pod, rack = reader.text("pod"), reader.text("rack")
    reader.check()
    return FailureFilters(
        run_id=run_id,
        start=start,
        end=end,
        site=site,
        cluster=cluster,
        projection_accelerators=accelerators,
        pod=pod,
        rack=rack,
    )


def _host_filter(prefix: str, filters: FailureFilters) -> Q:
    condition = Q()
    if filters.site:
        # A host's site is its own (telemetry.services.topology), its cluster's for hosts
        # placed before hosts had one.
        condition &= Q(**{f"{prefix}__site__name": filters.site}) | Q(
            **{f"{prefix}__cluster__site__name": filters.site}
        )
    if filters.pod:
        condition &= Q(**{f"{prefix}__pod": filters.pod})
    if filters.rack:
        condition &= Q(**{f"{prefix}__rack": filters.rack})
    if filters.cluster:
        site, _, name = filters.cluster.partition("/")
        condition &= Q(**{f"{prefix}__cluster__site__name": site, f"{prefix}__cluster__name": name})
    return condition


def runs_in_scope(*, user: User, filters: FailureFilters) -> QuerySet[Run]:
    """The runs the numbers cover. A run filter the user may not see is a 404. With a site or
    cluster, the runs that had an attempt or an interruption on a host there."""
    if filters.run_id is not None:
        run = run_get_for_user(user=user, run_id=filters.run_id)
        runs = Run.objects.filter(pk=run.pk)
    else:
        runs = Run.objects.filter(project__in=projects_for_user(user=user))
    if filters.site or filters.cluster or filters.pod or filters.rack:
        used = Attempt.objects.filter(_host_filter("hosts", filters)).values("run_id")
        hit = Interruption.objects.filter(_host_filter("hosts", filters)).values("run_id")
        runs = runs.filter(Q(pk__in=used) | Q(pk__in=hit))
    return runs


def _interruptions(*, runs: QuerySet[Run], filters: FailureFilters) -> QuerySet[Interruption]:
    """The interruptions the page counts: of the runs in scope, occurring in the window, on a
    host of the site, cluster, pod or rack when one is chosen."""
    interruptions = Interruption.objects.filter(run__in=runs)
    if filters.start is not None:
        interruptions = interruptions.filter(occurred_at__gte=filters.start)
    if filters.end is not None:
        interruptions = interruptions.filter(occurred_at__lt=filters.end)
    host_condition = _host_filter("hosts", filters)
    if host_condition:
        # Several hosts of one interruption may match: count the interruption once.
        interruptions = interruptions.filter(host_condition).distinct()
    return interruptions


def interruptions_in_scope(*, runs: QuerySet[Run], filters: FailureFilters) -> pd.DataFrame:
    """One row per interruption (INTERRUPTION_COLUMNS), in one query."""
    interruptions = _interruptions(runs=runs, filters=filters)
    rows = interruptions.order_by("occurred_at", "pk").values_list(
        "run_id",
        "root_cause__name",
        "root_cause__group",
        "root_cause__is_hardware",
        "planned",
        "occurred_at",
        "detected_at",
        "recovered_at",
        "manual_intervention",
    )
    return pd.DataFrame(list(rows), columns=INTERRUPTION_COLUMNS)


def run_spans(
    *, runs: QuerySet[Run], filters: FailureFilters, now: datetime | None = None
) -> list[RunSpan]:
    """Each run's observed time, cut to the window: first attempt start to the end of the
    data (the later of the last attempt end and run.data_until, the latest time its events
    and points carry; now for a running run that has reported nothing yet). Never the
    receive time (last_seen_at), which for a run sent after the fact is the day it was sent;
    only a run whose data carries no time at all falls back to it. One query, and one more
    when an attempt has its own accelerator count (a resized cluster)."""
    now = now or timezone.now()
    latest = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number").values("status")[:1]
    # Subqueries, not joins: aggregating over attempts and interruptions in one join would
    # multiply the rows of each by the other.
    events = Interruption.objects.filter(run=OuterRef("pk")).order_by().values("run")
    first_event = Subquery(events.annotate(at=Min("occurred_at")).values("at")[:1])
    last_event = Subquery(
        events.annotate(at=Max(Greatest("occurred_at", "recovered_at"))).values("at")[:1]
    )
    rows = list(
        runs.annotate(
            first_start=Min("attempts__started_at"),
            last_end=Max("attempts__ended_at"),
            latest_status=Subquery(latest),
            first_event=first_event,
            last_event=last_event,
            resized=Exists(
                Attempt.objects.filter(run=OuterRef("pk"), accelerator_count__isnull=False)
            ),
        )
        .order_by("pk")
        .values_list(
            "pk",
            "first_start",
            "last_end",
            "data_until",
            "last_seen_at",
            "latest_status",
            "accelerator_count",
            "first_event",
            "last_event",
            "resized",
        )
    )
    resized_ids = [row[0] for row in rows if row[-1]]
    resized = (
        _attempt_weighted_accelerators(run_ids=resized_ids, filters=filters, now=now)
        if resized_ids
        else {}
    )
    spans = []
    for row in rows:
        (
            run_id,
            first_start,
            last_end,
            data_until,
            last_seen,
            status,
            run_accelerators,
            first_ev,
            last_ev,
            _,
        ) = row
        accelerators = resized.get(run_id, run_accelerators)
        if first_start is None:
            if first_ev is not None:
                # No attempt times (a chronicle from a logbook): the span of its events, so
                # its interruptions are not divided by zero hours.
                spans.append(RunSpan(run_id, first_ev, last_ev, accelerators, SPAN_FROM_EVENTS))
            continue  # never started and no event: no observed time
        # The receive time only for a job whose data has no time (metrics without `time`
        # and no event): nothing else says how long it was watched.
        data_end = data_until if data_until is not None else last_seen
        ends = [t for t in (last_end, data_end, last_ev) if t is not None]
        if not ends and status == Attempt.Status.RUNNING:
            # Nothing received yet from a running job: it has been observed until now. Once
            # it reports, its data's time is the truth (a hung job must not stretch its MTBF).
            ends.append(now)
        end = max([first_start, *ends])
        spans.append(RunSpan(run_id, first_start, end, accelerators))
    return observed_spans(spans, filters.start, filters.end)


def _attempt_weighted_accelerators(
    *, run_ids: list[int], filters: FailureFilters, now: datetime
) -> dict[int, int]:
    """For runs where an attempt has its own accelerator count (a resized cluster), the
    count weighted by each attempt's time in the window, attempts without one taking the
    run's: {run id: weighted count} (one query). Rounded: the spans carry whole counts."""
    rows = (
        Attempt.objects.filter(run_id__in=run_ids, started_at__isnull=False)
        .order_by("run_id", "number")
        .values_list(
            "run_id", "started_at", "ended_at", "accelerator_count", "run__accelerator_count"
        )
    )
    totals: dict[int, list[float]] = {}
    for run_id, started, ended, own, run_count in rows:
        start = max(started, filters.start) if filters.start else started
        end = ended or now
        end = min(end, filters.end) if filters.end else end
        count = own or run_count
        seconds = max(0.0, (end - start).total_seconds())
        if not count or not seconds:
            continue
        weighted, total = totals.setdefault(run_id, [0.0, 0.0])
        totals[run_id] = [weighted + count * seconds, total + seconds]
    return {run_id: round(weighted / total) for run_id, (weighted, total) in totals.items()}


def failure_report_key(*, user: User, filters: FailureFilters) -> str:
    """What failure_report_for_user(user=user, filters=filters) reads, as part of a cache
    key: the runs in scope, their projects' fleet_version (every incident change bumps it)
    and the minute. Observed time moves with the clock and with every batch of a live run,
    so a report keyed on it is at most a minute old; incidents show at once. One query."""
    rows = list(
        runs_in_scope(user=user, filters=filters)
        .order_by("pk")
        .values_list("pk", "project__fleet_version")
    )
    minute = timezone.now().replace(second=0, microsecond=0)
    scope = repr((rows, filters.as_dict(), minute))
    return hashlib.sha256(scope.encode()).hexdigest()[:32]


def failure_report_for_user(
    *, user: User, filters: FailureFilters, now: datetime | None = None
) -> FailureReport:
    """The breakdown, rates and projection over what the filters select (three queries,
    plus one for a run filter)."""
    runs = runs_in_scope(user=user, filters=filters)
    rows = interruptions_in_scope(runs=runs, filters=filters)
    spans = run_spans(runs=runs, filters=filters, now=now)
    return failure_report(rows, spans, filters.projection_accelerators)


# An interruption's Downtime, in its fields' order (then its attempt's step time sums): the
# GPUs it held are its attempt's count, else its run's.
_DOWNTIME_FIELDS = (
    "planned",
    "occurred_at",
    "recovered_at",
    Coalesce("attempt__accelerator_count", "run__accelerator_count"),
    "lost_steps",
    "attempt__throughput_sum__timed_positive_sum_s",
    "attempt__throughput_sum__timed_positive_count",
)


def _downtime(row: Sequence[Any]) -> Downtime:
    """A row of _DOWNTIME_FIELDS: the step time is the attempt's mean step_time_s
    (telemetry.models.ThroughputSum), when it reported one."""
    *fields, step_sum_s, steps = row
    return Downtime(*fields, step_time_s=step_sum_s / steps if steps else None)


def interruption_loss(*, runs: QuerySet[Run], filters: FailureFilters) -> Derived:
    """GPU-hours the interruptions the page counts (of `runs`, runs_in_scope's) cost
    (failure_maths.lost_to_interruptions), each at its attempt's accelerator count, else its
    run's. One query."""
    rows = _interruptions(runs=runs, filters=filters).values_list(*_DOWNTIME_FIELDS)
    return lost_to_interruptions([_downtime(row) for row in rows], filters.end)


def interruption_gpu_hours_by_run(*, run_ids: Sequence[int]) -> dict[int, float]:
    """GPU-hours each run's interruptions cost, as the failure page counts them for that run
    alone (interruption_loss): the run list's column. One query."""
    downtimes: dict[int, list[Downtime]] = {}
    rows = Interruption.objects.filter(run_id__in=list(run_ids)).values_list(
        "run_id", *_DOWNTIME_FIELDS
    )
    for run_id, *fields in rows:
        downtimes.setdefault(run_id, []).append(_downtime(fields))
    found = {run_id: lost_to_interruptions(ones, None).value for run_id, ones in downtimes.items()}
    return {run_id: hours for run_id, hours in found.items() if hours is not None}


@dataclass(frozen=True)
class FilterOptions:
    runs: list[tuple[int, str]]
    sites: list[str]
    clusters: list[str]  # "<site>/<cluster>"


def filter_options(*, user: User) -> FilterOptions:
    """What the filter form offers: the user's runs, and the sites and clusters of the hosts
    their runs used (topology is shared, so only what touches the user's runs is listed)."""
    runs = Run.objects.filter(project__in=projects_for_user(user=user))
    run_ids = runs.values("pk")
    # EXISTS per cluster (a handful), each stopping at its first hit: a join through the
    # attempts' hosts would walk ~1M attempt-host rows at Llama 3 scale.
    used = Exists(
        Attempt.hosts.through.objects.filter(host__cluster=OuterRef("pk"), attempt__run__in=run_ids)
    ) | Exists(
        Interruption.hosts.through.objects.filter(
            host__cluster=OuterRef("pk"), interruption__run__in=run_ids
        )
    )
    clusters = list(
        Cluster.objects.filter(used).select_related("site").order_by("site__name", "name")
    )
    return FilterOptions(
        runs=[
            (pk, f"{project}/{name}")
            for pk, project, name in runs.order_by("project__slug", "name").values_list(
                "pk", "project__slug", "name"
            )
        ],
        sites=sorted(
            {c.site.name for c in clusters}
            | set(
                Host.objects.filter(project__in=projects_for_user(user=user), site__isnull=False)
                .values_list("site__name", flat=True)
                .distinct()
            )
        ),
        clusters=[f"{c.site.name}/{c.name}" for c in clusters],
    )
