"""Reads for runs and series, always scoped to what the user may see.

Interruption and checkpoint counts are reached through the reverse relations logbook
declares (by name, without importing logbook), so telemetry stays at the bottom of the
dependency order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from telemetry.downsample import minmax_indices, split_budget
from telemetry.models import (
    Attempt,
    Device,
    Host,
    Membership,
    MetricPoint,
    MetricSeries,
    Project,
    Run,
)

User = AbstractBaseUser | AnonymousUser


def projects_for_user(*, user: User, roles: Sequence[str] | None = None) -> QuerySet[Project]:
    """Projects the user is a member of (with one of `roles`, if given); all for superusers."""
    if not user.is_authenticated:
        return Project.objects.none()
    if getattr(user, "is_superuser", False):
        return Project.objects.all()
    memberships = Membership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=roles)
    return Project.objects.filter(pk__in=memberships.values("project_id"))


OPERATOR_ROLES = (Membership.Role.ONCALL, Membership.Role.ADMIN)


def project_get_for_admin(*, user: User, slug: str) -> Project:
    """The project, if the user administers it: 404 when not a member, 403 when a member
    without the admin role."""
    project = projects_for_user(user=user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    if not projects_for_user(user=user, roles=[Membership.Role.ADMIN]).filter(pk=project.pk):
        raise PermissionDenied("Only the project's admins can do this.")
    return project


def project_members(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("user__username")


def user_is_operator(*, user: User) -> bool:
    """On-call or admin somewhere: may act on shared hardware (quarantine a host)."""
    return projects_for_user(user=user, roles=OPERATOR_ROLES).exists()


def runs_for_user(*, user: User) -> QuerySet[Run]:
    """The user's runs with what the run list shows, in a fixed number of queries."""
    latest_attempt = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    latest_loss_series = MetricSeries.objects.filter(run=OuterRef(OuterRef("pk")), name="loss")
    last_loss = (
        MetricPoint.objects.filter(
            series=Subquery(latest_loss_series.order_by("-attempt__number").values("pk")[:1])
        )
        .order_by("-step")
        .values("value")[:1]
    )
    interruption_count = (
        Run.objects.filter(pk=OuterRef("pk")).annotate(n=Count("interruptions")).values("n")[:1]
    )
    return (
        Run.objects.filter(project__in=projects_for_user(user=user))
        .select_related("project")
        .annotate(
            current_attempt=Subquery(latest_attempt.values("number")[:1]),
            current_status=Subquery(latest_attempt.values("status")[:1]),
            interruption_count=Subquery(interruption_count, output_field=IntegerField()),
            last_loss=Subquery(last_loss),
        )
        .order_by("-last_seen_at", "project__slug", "name")
    )


def run_get_for_user(*, user: User, run_id: int) -> Run:
    """The run, if the user may see it; 404 otherwise (never 403: do not confirm it exists)."""
    run = (
        Run.objects.filter(pk=run_id, project__in=projects_for_user(user=user))
        .select_related("project")
        .first()
    )
    if run is None:
        raise Http404("No such run.")
    return run


def run_metric_names(*, run: Run) -> list[str]:
    names = set(MetricSeries.objects.filter(run=run).values_list("name", flat=True))
    # The loss first: it is what everyone looks at.
    return sorted(names, key=lambda name: (name != "loss", name))


def run_attempts(*, run: Run) -> QuerySet[Attempt]:
    return run.attempts.order_by("number").prefetch_related("hosts")


@dataclass(frozen=True)
class AttemptSeries:
    attempt: int
    total_points: int
    steps: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    # datetime64[us], NaT where the job sent no time.
    wall_times: npt.NDArray[np.datetime64]


# Above this many steps in all, PostgreSQL buckets the series itself (min and max per bucket,
# with their steps) instead of sending every row to Python: a million rows through the ORM
# cost ~10 s, the grouped query a fraction of a second.
SQL_BUCKETING_MIN_STEPS = 50_000


def series_for_run(*, run: Run, name: str, max_points: int) -> list[AttemptSeries]:
    """One metric of a run, per attempt, downsampled together to at most about `max_points`
    points with every bucket's minimum and maximum kept (and the first non-finite value of
    a bucket). A fixed number of queries, whatever the number of attempts or points."""
    attempt_by_series = dict(
        MetricSeries.objects.filter(run=run, name=name).values_list("pk", "attempt__number")
    )
    if connection.vendor == "postgresql" and attempt_by_series:
        spans = _step_spans(list(attempt_by_series))
        if sum(hi - lo + 1 for lo, hi in spans.values()) > SQL_BUCKETING_MIN_STEPS:
            return _series_bucketed_in_sql(attempt_by_series, spans, max_points)
    rows = (
        MetricPoint.objects.filter(series_id__in=attempt_by_series)
        .order_by("series_id", "step")
        .values_list("series_id", "step", "value", "wall_time")
    )
    by_series: dict[int, list[tuple[int, float | None, datetime | None]]] = {}
    for series_id, step, value, wall_time in rows:
        by_series.setdefault(series_id, []).append((step, value, wall_time))
    raw = sorted(
        (attempt_by_series[series_id], _arrays(points)) for series_id, points in by_series.items()
    )
    budgets = split_budget([arrays[0].size for _, arrays in raw], max_points)
    result = []
    for (number, (steps, values, times)), budget in zip(raw, budgets, strict=True):
        keep = minmax_indices(values, budget) if budget else np.arange(0)
        result.append(
            AttemptSeries(number, int(steps.size), steps[keep], values[keep], times[keep])
        )
    return result


def _step_spans(series_ids: list[int]) -> dict[int, tuple[int, int]]:
    """First and last step of each series: two index probes each (the primary key)."""
    table = MetricPoint._meta.db_table
    sql = (
        "SELECT s.id, "
        f"(SELECT step FROM {table} WHERE series_id = s.id ORDER BY step LIMIT 1), "
        f"(SELECT step FROM {table} WHERE series_id = s.id ORDER BY step DESC LIMIT 1) "
        "FROM unnest(%s::bigint[]) AS s(id)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [series_ids])
        return {sid: (lo, hi) for sid, lo, hi in cursor.fetchall() if lo is not None}


_FINITE = "p.value NOT IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)"
_POINT = "ARRAY[p.value, p.step::float8, extract(epoch FROM p.wall_time)::float8]"
_BAD_POINT = "ARRAY[p.step::float8, p.value, extract(epoch FROM p.wall_time)::float8]"


def _series_bucketed_in_sql(
    attempt_by_series: dict[int, int], spans: dict[int, tuple[int, int]], max_points: int
) -> list[AttemptSeries]:
    """Min and max (with their step and time) of each step-range bucket, grouped in
    PostgreSQL. Arrays compare element by element, so min(ARRAY[value, step, t]) is the
    bucket's smallest value with its step: an argmin without a sort."""
    series_ids = sorted(spans, key=lambda sid: attempt_by_series[sid])
    budgets = split_budget([spans[sid][1] - spans[sid][0] + 1 for sid in series_ids], max_points)
    # A third of the budget per bucket: its min, its max and possibly a non-finite value.
    buckets = [max(1, budget // 3) for budget in budgets]
    table = MetricPoint._meta.db_table
    sql = (
        "WITH b(series_id, lo, hi, nb) AS ("
        "  SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])) "
        "SELECT p.series_id, "
        "  floor((p.step - b.lo)::float8 * b.nb / (b.hi - b.lo + 1))::bigint AS bucket, "
        f"  count(*), min({_POINT}) FILTER (WHERE {_FINITE}), "
        f"  max({_POINT}) FILTER (WHERE {_FINITE}), "
        f"  min({_BAD_POINT}) FILTER (WHERE NOT {_FINITE}) "
        f"FROM {table} p JOIN b ON b.series_id = p.series_id "
        "GROUP BY 1, 2"
    )
    params = [
        series_ids,
        [spans[sid][0] for sid in series_ids],
        [spans[sid][1] for sid in series_ids],
        buckets,
    ]
    totals: dict[int, int] = dict.fromkeys(series_ids, 0)
    kept: dict[int, dict[int, tuple[float, float]]] = {sid: {} for sid in series_ids}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for series_id, _, count, low, high, bad in cursor.fetchall():
            totals[series_id] += count
            for point in (low, high):
                if point is not None:
                    kept[series_id][int(point[1])] = (point[0], point[2])
            if bad is not None:
                kept[series_id][int(bad[0])] = (bad[1], bad[2])
    result = []
    for sid in series_ids:
        steps = np.array(sorted(kept[sid]), dtype=np.int64)
        values = np.array([kept[sid][step][0] for step in steps], dtype=np.float64)
        epochs = np.array(
            [np.nan if kept[sid][step][1] is None else kept[sid][step][1] for step in steps],
            dtype=np.float64,
        )
        times = np.array(
            [np.datetime64("NaT") if np.isnan(e) else np.datetime64(int(e * 1e6), "us")
             for e in epochs],
            dtype="datetime64[us]",
        )  # fmt: skip
        result.append(AttemptSeries(attempt_by_series[sid], totals[sid], steps, values, times))
    return result


def _arrays(
    points: list[tuple[int, float | None, datetime | None]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.datetime64]]:
    count = len(points)
    steps = np.fromiter((p[0] for p in points), dtype=np.int64, count=count)
    # NULL is how SQLite stores NaN.
    values = np.fromiter(
        (math.nan if p[1] is None else p[1] for p in points), dtype=np.float64, count=count
    )
    times = np.array(
        [np.datetime64("NaT") if p[2] is None else np.datetime64(p[2].replace(tzinfo=None), "us")
         for p in points],
        dtype="datetime64[us]",
    )  # fmt: skip
    return steps, values, times


def json_number(value: float) -> float | str:
    """JSON has no NaN or Infinity: send them as the strings ingest accepts."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


@dataclass(frozen=True)
class QuarantinedHardware:
    kind: str  # "host" or "device"
    name: str
    host_name: str  # the host page to link to (a device's host)
    quarantined_at: datetime
    reason: str
    quarantined_by: str


def run_quarantined_hardware(*, run: Run) -> list[QuarantinedHardware]:
    """Quarantined hosts and devices the run touched: its attempts' hosts, the devices on
    them, and the hardware its incidents name (through logbook's reverse relations, by
    name). Two queries."""
    touched_hosts = (
        Q(attempts__run=run)
        | Q(interruptions__run=run)
        | Q(sdc_replays__run=run)
        | Q(sdc_suspicions__run=run)
    )
    hosts = (
        Host.objects.filter(touched_hosts, quarantined_at__isnull=False)
        .select_related("quarantined_by")
        .distinct()
        .order_by("name")
    )
    devices = (
        Device.objects.filter(
            Q(host__in=Host.objects.filter(touched_hosts))
            | Q(interruptions__run=run)
            | Q(sdc_replays__run=run),
            quarantined_at__isnull=False,
        )
        .select_related("host", "quarantined_by")
        .distinct()
        .order_by("uuid")
    )
    found = [
        QuarantinedHardware("host", h.name, h.name, h.quarantined_at, h.quarantine_reason,
                            h.quarantined_by.get_username() if h.quarantined_by else "")
        for h in hosts
    ]  # fmt: skip
    found += [
        QuarantinedHardware("device", d.uuid, d.host.name if d.host else "", d.quarantined_at,
                            d.quarantine_reason,
                            d.quarantined_by.get_username() if d.quarantined_by else "")
        for d in devices
    ]  # fmt: skip
    return found
