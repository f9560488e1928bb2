"""Reads of the SDC ledger: SDC replay records per run and across the fleet, scoped to the
runs of projects the user may see, with the weekly rate they add up to."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
from django.db.models import Exists, Max, Min, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from logbook import sdc_maths
from logbook.models import Interruption, LogbookEntry, SdcReplay
from logbook.selectors.filters import FilterParams
from logbook.triage_config import CONFIG_CHANGE_SLUG
from telemetry import configs
from telemetry.models import Attempt, Cluster, Host, Run
from telemetry.selectors import User, projects_for_user, run_get_for_user
from telemetry.selectors import attempts as attempt_selectors

LEDGER_MAX_ROWS = 500


@dataclass(frozen=True)
class HardwareFilters:
    """What the ledger and fleet pages may be narrowed to. `run` is already checked against
    the user's projects; times are aware UTC; `until` is exclusive."""

    run: Run | None = None
    since: datetime | None = None
    until: datetime | None = None
    site: str = ""
    cluster: str = ""  # "<site>/<cluster>"
    verdict: str = ""

    def as_query(self) -> dict[str, str]:
        """The filters as they came in, for links and for the JSON answer."""
        return {
            "run": str(self.run.pk) if self.run else "",
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "site": self.site,
            "cluster": self.cluster,
            "verdict": self.verdict,
        }


def filters_parse(*, user: User, params: Mapping[str, str]) -> HardwareFilters:
    """Read run, since, until, site, cluster and verdict from query parameters. A run the user
    may not see is a 404 (run_get_for_user); an unreadable value raises FilterError."""
    reader = FilterParams(params)
    run_id = reader.run_id()
    run = run_get_for_user(user=user, run_id=run_id) if run_id is not None else None
    since, until = reader.window("since", "until")
    verdict = reader.choice("verdict", SdcReplay.Verdict.values)
    cluster = reader.cluster()
    site = reader.text("site")
    reader.check()
    return HardwareFilters(
        run=run,
        since=since,
        until=until,
        site=site,
        cluster=cluster,
        verdict=verdict,
    )


def runs_in_scope(*, user: User, filters: HardwareFilters) -> QuerySet[Run]:
    if filters.run is not None:
        return Run.objects.filter(pk=filters.run.pk)
    return Run.objects.filter(project__in=projects_for_user(user=user))


def hosts_in_place(*, filters: HardwareFilters) -> QuerySet[Host] | None:
    """Hosts of the site/cluster filter, or None when there is no such filter."""
    if not filters.site and not filters.cluster:
        return None
    hosts = Host.objects.all()
    if filters.site:
        hosts = hosts.filter(cluster__site__name=filters.site)
    if filters.cluster:
        site, _, name = filters.cluster.partition("/")
        hosts = hosts.filter(cluster__site__name=site, cluster__name=name)
    return hosts


def clusters_for_user(*, user: User) -> list[Cluster]:
    """Clusters holding a host that touched one of the user's runs (for the filter menus)."""
    runs = Run.objects.filter(project__in=projects_for_user(user=user))
    # EXISTS per cluster, stopping at the first hit: an IN over the attempts' hosts hashes
    # ~1M attempt-host rows at Llama 3 scale.
    used = Attempt.hosts.through.objects.filter(host__cluster=OuterRef("pk"), attempt__run__in=runs)
    return list(
        Cluster.objects.filter(Exists(used)).select_related("site").order_by("site__name", "name")
    )


def sdc_records_for_user(*, user: User, filters: HardwareFilters) -> QuerySet[SdcReplay]:
    """SDC records of the user's runs matching the filters, newest first. A site/cluster
    filter keeps records whose host, device's host or implicated hosts are there."""
    records = SdcReplay.objects.filter(run__in=runs_in_scope(user=user, filters=filters))
    if filters.since:
        records = records.filter(detected_at__gte=filters.since)
    if filters.until:
        records = records.filter(detected_at__lt=filters.until)
    if filters.verdict:
        records = records.filter(verdict=filters.verdict)
    place = hosts_in_place(filters=filters)
    if place is not None:
        # Through a subquery of ids: joining the M2M directly would repeat records.
        touching = SdcReplay.objects.filter(
            Q(host__in=place) | Q(device__host__in=place) | Q(hosts__in=place)
        ).values("pk")
        records = records.filter(pk__in=touching)
    return (
        records.select_related(
            "run__project",
            "attempt",
            "compared_attempt",
            "device",
            "host__cluster__site",
        )
        .prefetch_related("hosts")
        .order_by("-detected_at", "-pk")
    )


# The failure breakdown's category whose interruptions are SDC events too (Table 5).
SDC_ROOT_CAUSE = "silent-data-corruption"


def sdc_interruptions_for_user(*, user: User, filters: HardwareFilters) -> QuerySet[Interruption]:
    """Interruptions filed as Silent Data Corruption in the same scope as the records: the
    failure breakdown counts them, so the ledger (and its rate) must too."""
    found = Interruption.objects.filter(
        run__in=runs_in_scope(user=user, filters=filters), root_cause__slug=SDC_ROOT_CAUSE
    )
    if filters.since:
        found = found.filter(occurred_at__gte=filters.since)
    if filters.until:
        found = found.filter(occurred_at__lt=filters.until)
    place = hosts_in_place(filters=filters)
    if place is not None:
        touching = Interruption.objects.filter(
            Q(hosts__in=place) | Q(devices__host__in=place)
        ).values("pk")
        found = found.filter(pk__in=touching)
    return found.select_related("run__project", "attempt").order_by("-occurred_at", "-pk")


@dataclass(frozen=True)
class SdcLedger:
    records: list[SdcReplay]
    # Interruptions filed as SDC (Table 5's category), counted in `total` and the rate.
    interruptions: list[Interruption]
    total: int
    truncated: bool
    rate: sdc_maths.WeeklyRate
    weekly: pd.DataFrame  # week_start, count
    span_source: str  # where the span's ends come from, shown beside the rate
    by_verdict: dict[str, int]
    # Attempt pairs the divergence check skipped, and why ("attempt 8 vs 7 and earlier not
    # compared: config changed: ...").
    not_compared: list[str] = field(default_factory=list)


def sdc_ledger_key(*, user: User, filters: HardwareFilters) -> str:
    """What sdc_ledger(user=user, filters=filters) reads beyond the filters themselves, as
    part of a cache key: the runs in scope, their projects' fleet_version (SDC records and
    interruptions bump it) and their latest activity to the minute (the observed span ends
    there; a live run moves it with every batch). One query."""
    rows = list(
        runs_in_scope(user=user, filters=filters)
        .order_by("pk")
        .values_list("pk", "project__fleet_version", "last_seen_at")
    )
    seen = [moment for _, _, moment in rows if moment is not None]
    latest = max(seen).replace(second=0, microsecond=0) if seen else None
    scope = repr(([(pk, version) for pk, version, _ in rows], latest))
    return hashlib.sha256(scope.encode()).hexdigest()[:32]


def sdc_ledger(*, user: User, filters: HardwareFilters) -> SdcLedger:
    """The ledger's rows (at most LEDGER_MAX_ROWS, newest first) and the weekly rate of all
    matching records over the observed span: the filter window where given, otherwise from
    the first attempt start (or record) to the end of the data of the runs in scope."""
    records_qs = sdc_records_for_user(user=user, filters=filters)
    facts = list(records_qs.values_list("detected_at", "verdict"))
    # A verdict filter is about replay records; interruptions have no verdict.
    interruptions = (
        [] if filters.verdict else list(sdc_interruptions_for_user(user=user, filters=filters))
    )
    detected = sorted(
        [moment for moment, _ in facts] + [i.occurred_at for i in interruptions], reverse=True
    )
    span_start, span_end, span_source = _span(user=user, filters=filters, detected=detected)
    by_verdict = {value: 0 for value in SdcReplay.Verdict.values}
    for _, verdict in facts:
        by_verdict[verdict] = by_verdict.get(verdict, 0) + 1
    total = len(facts) + len(interruptions)
    return SdcLedger(
        records=list(records_qs[:LEDGER_MAX_ROWS]),
        interruptions=interruptions,
        total=total,
        truncated=len(facts) > LEDGER_MAX_ROWS,
        rate=sdc_maths.weekly_rate(records=total, span_start=span_start, span_end=span_end),
        weekly=sdc_maths.weekly_counts(detected, span_start=span_start, span_end=span_end),
        span_source=span_source,
        by_verdict=by_verdict,
        not_compared=_not_compared(user=user, filters=filters),
    )


def _not_compared(*, user: User, filters: HardwareFilters) -> list[str]:
    """What the divergence check left out in the runs in scope: attempts a config change
    separates are not compared (their values are expected to differ). Three queries."""
    runs = runs_in_scope(user=user, filters=filters)
    names = dict(runs.values_list("pk", "name"))
    return [
        f"{names[run_id]}: attempt {change.attempt} vs {change.attempt - 1}"
        + (" and earlier" if change.attempt > 2 else "")
        + f" not compared: {change.reason}"
        for run_id, changes in config_changes_by_run(runs=list(names)).items()
        for change in changes
        if change.attempt > 1
    ]


def _span(
    *, user: User, filters: HardwareFilters, detected: list[datetime]
) -> tuple[datetime | None, datetime | None, str]:
    runs = runs_in_scope(user=user, filters=filters)
    activity = Run.objects.filter(pk__in=runs).aggregate(
        first_start=Min("attempts__started_at"),
        # The time the data covers, not when it arrived (see failures.run_spans).
        data_end=Max(Coalesce("data_until", "last_seen_at")),
        last_end=Max("attempts__ended_at"),
    )
    start_candidates = [m for m in (activity["first_start"], *detected[-1:]) if m is not None]
    end_candidates = [
        m for m in (activity["data_end"], activity["last_end"], *detected[:1]) if m is not None
    ]
    first = min(start_candidates) if start_candidates else None
    last = max(end_candidates) if end_candidates else None
    # The observed span is the window cut to the data: a window wider than the runs' life
    # would count (and chart) weeks nothing was watched.
    start = max(filters.since, first) if filters.since and first else (filters.since or first)
    end = min(filters.until, last) if filters.until and last else (filters.until or last)
    source = (
        ("since" if filters.since else "first attempt start or record")
        + " to "
        + ("until" if filters.until else "end of the data of the runs in scope")
    )
    return start, end, source


def config_changes(*, run: Run) -> list[sdc_maths.ConfigChange]:
    """The run's config changes between attempts (see config_changes_by_run)."""
    return config_changes_by_run(runs=[run.pk]).get(run.pk, [])


def config_changes_by_run(
    *, runs: QuerySet[Run] | list[int]
) -> dict[int, list[sdc_maths.ConfigChange]]:
    """Each run's config changes between attempts, by attempt: logbook entries of kind
    config_change (or listing config changes) tied to the attempt they apply to, and planned
    config-change interruptions (the change applies to the attempt after the one they
    stopped). Two queries."""
    rows = [
        (run_id, number, f"config changed: {title}")
        for run_id, number, title in LogbookEntry.objects.filter(
            run__in=runs, attempt__isnull=False
        )
        .filter(Q(kind=LogbookEntry.Kind.CONFIG_CHANGE) | ~Q(config_changes=[]))
        .values_list("run_id", "attempt__number", "title")
    ]
    rows += [
        (run_id, number + 1, f"planned config change (incident #{pk})")
        for run_id, pk, number in Interruption.objects.filter(
            run__in=runs, attempt__isnull=False, root_cause__slug=CONFIG_CHANGE_SLUG
        ).values_list("run_id", "pk", "attempt__number")
    ]
    # And the attempts' own configs (run_info.config, kept per attempt): an attempt that ran
    # a config other than the one before it that sent one changed it, whatever else says so.
    run_ids = list(runs) if isinstance(runs, list) else list(runs.values_list("pk", flat=True))
    for run_id, sent in attempt_selectors.attempt_configs(run_ids=run_ids).items():
        for (_, before), (number, after) in itertools.pairwise(sent):
            keys = [key for key, _, _ in configs.config_changes(before, after)]
            if keys:
                rows.append((run_id, number, f"config changed: {', '.join(keys[:5])}"))
    changes: dict[int, list[sdc_maths.ConfigChange]] = {}
    for run_id, number, reason in sorted(rows, key=lambda row: (row[0], row[1], row[2])):
        changes.setdefault(run_id, []).append(sdc_maths.ConfigChange(number, reason))
    return changes
