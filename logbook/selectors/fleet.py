"""Reads of fleet health: hosts and devices with their incidents (interruptions and SDC
records) across the user's runs, repeat offenders, and quarantine state.

A host "touched" a run when an attempt ran on it or an interruption or SDC record of the run
names it (directly, through one of its devices, or among an attempt pair's hosts). Users see
hardware only through the runs they may see, and only those runs' incidents."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from logbook.models import Interruption, SdcReplay
from logbook.selectors.offenders import (
    _VIA_RANK,
    VIA_DEVICE,
    VIA_NAMED,
    Incident,
    OffenderRule,
    OffenderScore,
    offender_score,
)
from logbook.selectors.sdc import HardwareFilters, hosts_in_place, runs_in_scope
from telemetry import run_cache
from telemetry.models import Attempt, Cluster, Device, Host, Run, Site
from telemetry.selectors import User, projects_for_user


@dataclass
class HardwareHealth:
    """One host or device: its incidents in the filter window (newest first), how many fall
    in the offender window, and whether that makes it a repeat offender."""

    kind: str  # "host" or "device"
    row: Host | Device
    incidents: list[Incident] = field(default_factory=list)
    in_window: int = 0
    repeat_offender: bool = False
    blame: float = 0.0

    @property
    def name(self) -> str:
        return self.row.name if isinstance(self.row, Host) else self.row.uuid

    @property
    def host(self) -> Host | None:
        return self.row if isinstance(self.row, Host) else self.row.host

    @property
    def place(self) -> str:
        host = self.host
        if host is None or host.cluster is None:
            return ""
        return f"{host.cluster.site.name}/{host.cluster.name}"

    @property
    def interruptions(self) -> int:
        return sum(1 for one in self.incidents if one.kind == "interruption")

    @property
    def sdc(self) -> int:
        return sum(1 for one in self.incidents if one.kind == "sdc")

    @property
    def stragglers(self) -> int:
        return sum(1 for one in self.incidents if one.kind == "straggler")

    @property
    def last_incident_at(self) -> datetime | None:
        return self.incidents[0].occurred_at if self.incidents else None


@dataclass(frozen=True)
class FleetHealth:
    hosts: list[HardwareHealth]
    devices: list[HardwareHealth]
    rule: OffenderRule
    # SDC suspicions in the window that name no host or device, consecutive steps of one
    # attempt pair and metric as one record (see _collapsed), newest first.
    unattributed: list[Incident] = field(default_factory=list)
    # The counts in the offender window stay these until its end slides past this moment
    # (OffenderRule.holds_until; None: they never change with the clock).
    holds_until: datetime | None = None


def hosts_visible_to_user(*, user: User) -> QuerySet[Host]:
    """The hosts of the user's projects. Hardware belongs to the project whose data named
    it, so this is ownership, not "touched one of the user's runs": another project naming
    the same machine has a record of its own (telemetry.services.hosts_ensure)."""
    return Host.objects.filter(project__in=projects_for_user(user=user))


def _touching_runs(runs: QuerySet[Run] | list[int], host: str = "pk") -> Q:
    """Hosts (`host` names the host id column of the rows filtered) that touched one of
    `runs`. Correlated EXISTS, not IN: an IN over the attempts' hosts hashes every row of the
    attempt-host table (~1M at Llama 3 scale, ~120 ms) even to test a handful of hosts,
    while an EXISTS probes its index for the rows in question and stops at the first."""
    at = OuterRef(host)
    return (
        Exists(Attempt.hosts.through.objects.filter(host_id=at, attempt__run__in=runs))
        | Exists(Interruption.hosts.through.objects.filter(host_id=at, interruption__run__in=runs))
        | Exists(Device.objects.filter(host_id=at, interruptions__run__in=runs))
        | Exists(SdcReplay.objects.filter(host_id=at, run__in=runs))
        | Exists(Device.objects.filter(host_id=at, sdc_replays__run__in=runs))
        | Exists(SdcReplay.hosts.through.objects.filter(host_id=at, sdcreplay__run__in=runs))
    )


def host_get_for_user(*, user: User, name: str, project: str | None = None) -> Host:
    """The host of one of the user's projects (of the project with slug `project`, when
    given); 404 otherwise (never 403). A user of two projects that both name the machine
    gets the first project's record by slug unless `project` says which."""
    if "\x00" in name or (project and "\x00" in project):
        raise Http404("No such host.")  # PostgreSQL text cannot hold NUL: no host has one
    hosts = hosts_visible_to_user(user=user).filter(name=name)
    if project:
        hosts = hosts.filter(project__slug=project)
    host = (
        hosts.select_related("project", "cluster__site", "quarantined_by")
        .order_by("project__slug")
        .first()
    )
    if host is None:
        raise Http404("No such host.")
    return host


def fleet_health_key(*, user: User, filters: HardwareFilters, rule: OffenderRule) -> str:
    """What fleet_health(user=user, filters=filters, rule=rule) reads, as part of a cache key:
    the version of the fleet's data for the runs in scope (see _runs_and_version), the
    filters and the offender rule's K and length. Not the clock: what is cached under it is
    good while the sliding window holds the same incidents (FleetHealth.holds_until), which
    the caller checks (offenders.still_holds)."""
    scope = runs_in_scope(user=user, filters=filters).values_list("pk", flat=True)
    runs, version = _runs_and_version(scope)
    where = repr((runs, filters.since, filters.until, filters.site, filters.cluster))
    where += repr((rule.k, rule.window_days, rule.slides))
    return f"{version}:{hashlib.sha256(where.encode()).hexdigest()[:32]}"


def fleet_health(
    *,
    user: User,
    filters: HardwareFilters,
    rule: OffenderRule,
    host: Host | None = None,
) -> FleetHealth:
    """Hosts and devices with at least one incident in the filter window, or in quarantine,
    most incidents in the offender window first (a host listed for its quarantine alone may
    still be a repeat offender: the offender window is not the history window). With `host`,
    only it and its devices. A fixed number of queries whatever the fleet's size."""
    # The run ids once, as a list: every query below filters by them, and planning six
    # EXISTS probes that each nest membership -> project -> run subqueries cost more than
    # running them.
    scope = runs_in_scope(user=user, filters=filters).values_list("pk", flat=True)
    # Read back far enough for both the history window and the offender window; from the
    # start of the window's day, so that the rows' key below holds a day, not a microsecond
    # (earlier incidents count in neither).
    day = rule.window_start.replace(hour=0, minute=0, second=0, microsecond=0)
    since = min(filters.since, day) if filters.since else None
    if host is not None:
        by_host, by_device, hosts, devices, unattributed = _hardware(
            list(scope), since, filters, host
        )
    else:
        # The whole fleet's rows are most of the page's cost: read once per state of the
        # fleet's data (see _runs_and_version) for these runs and this window. What depends
        # on the clock (the offender window) is counted below, on every request.
        runs, version = _runs_and_version(scope)
        where = repr((runs, since, filters.until, filters.site, filters.cluster))
        digest = hashlib.sha256(where.encode()).hexdigest()[:32]
        by_host, by_device, hosts, devices, unattributed = run_cache.cached(
            f"fleet-rows:v2:{version}:{digest}", lambda: _hardware(runs, since, filters, None)
        )
    moments = [one.occurred_at for found in (by_host, by_device) for mine in found.values()
               for one in mine]  # fmt: skip
    return FleetHealth(
        hosts=_health(
            "host", hosts, by_host, filters=filters, rule=rule, keep_all=host is not None
        ),
        devices=_health("device", devices, by_device, filters=filters, rule=rule),
        rule=rule,
        unattributed=[
            one
            for one in unattributed
            if (filters.since is None or one.occurred_at >= filters.since) and host is None
        ],
        holds_until=rule.holds_until(moments),
    )


def _hardware(
    runs: list[int], since: datetime | None, filters: HardwareFilters, host: Host | None
) -> _Hardware:
    """Incidents by host and device id, the host and device rows to list, and the SDC
    suspicions that name no hardware."""
    by_host, by_device, unattributed = _incidents(
        runs=runs, since=since, until=filters.until, host=host
    )

    hosts = Host.objects.select_related("project", "cluster__site", "quarantined_by")
    devices = Device.objects.select_related(
        "host__project", "host__cluster__site", "quarantined_by"
    )
    if host is not None:
        hosts = hosts.filter(pk=host.pk)
        devices = devices.filter(Q(host=host) | Q(pk__in=list(by_device)))
    else:
        # Quarantined hardware is listed even without incidents, if its host touched a run
        # in scope; the EXISTS probes run only for the (few) quarantined rows.
        hosts = hosts.filter(
            Q(pk__in=list(by_host)) | (Q(quarantined_at__isnull=False) & _touching_runs(runs))
        )
        devices = devices.filter(
            Q(pk__in=list(by_device))
            | (Q(quarantined_at__isnull=False) & _touching_runs(runs, host="host_id"))
        )
    place = hosts_in_place(filters=filters)
    if place is not None:
        hosts = hosts.filter(pk__in=place)
        devices = devices.filter(host__in=place)
    host_rows, device_rows = list(hosts), list(devices)
    _share_related(host_rows, device_rows)
    return by_host, by_device, host_rows, device_rows, unattributed


def _share_related(hosts: list[Host], devices: list[Device]) -> None:
    """One instance per host, cluster and site across the rows (select_related builds one per
    row), so a cached copy unpickles each once: unpickling model instances was most of a
    cache hit's cost."""
    by_pk = {host.pk: host for host in hosts}
    for device in devices:
        if device.host is not None:  # loaded by select_related: no query
            device.host = by_pk.setdefault(device.host.pk, device.host)
    clusters: dict[int, Cluster] = {}
    sites: dict[int, Site] = {}
    for host in by_pk.values():
        if host.cluster is not None:
            cluster = clusters.setdefault(host.cluster.pk, host.cluster)
            cluster.site = sites.setdefault(cluster.site_id, cluster.site)
            host.cluster = cluster


def _runs_and_version(scope: QuerySet[Run, int]) -> tuple[list[int], str]:
    """The ids of `scope` (ascending) and a digest of their projects' fleet_version, which
    the services that change what the fleet pages list bump (telemetry.services
    .fleet_version_bump: incidents and the hardware they name, attempts' hosts, quarantines).
    One query, so the page's query count stays what it was before the cache."""
    rows = list(
        Run.objects.filter(pk__in=scope)
        .order_by("pk")
        .values_list("pk", "project_id", "project__fleet_version")
    )
    versions = sorted({(project, version) for _, project, version in rows})
    return [pk for pk, _, _ in rows], hashlib.sha256(repr(versions).encode()).hexdigest()[:32]


def _health(
    kind: str,
    rows: Iterable[Host] | Iterable[Device],
    incidents: dict[int, list[Incident]],
    *,
    filters: HardwareFilters,
    rule: OffenderRule,
    keep_all: bool = False,
) -> list[HardwareHealth]:
    result: list[HardwareHealth] = []
    scores: dict[int, OffenderScore] = {}
    for row in rows:
        mine = incidents.get(row.pk, [])
        history = [
            one
            for one in mine
            if (filters.since is None or one.occurred_at >= filters.since)
            and (filters.until is None or one.occurred_at < filters.until)
        ]
        if not keep_all and not history and row.quarantined_at is None:
            continue
        score = offender_score(records=mine, rule=rule)
        result.append(
            HardwareHealth(
                kind=kind,
                row=row,
                incidents=history,
                in_window=score.in_window,
                repeat_offender=score.repeat_offender,
                blame=score.blame,
            )
        )
        scores[id(result[-1])] = score
    result.sort(key=lambda one: (*scores[id(one)].rank_key, -len(one.incidents), one.name))
    return result


_Hardware = tuple[
    dict[int, list[Incident]], dict[int, list[Incident]], list[Host], list[Device], list[Incident]
]


def _incidents(
    *,
    runs: QuerySet[Run] | list[int],
    since: datetime | None,
    until: datetime | None,
    host: Host | None = None,
) -> tuple[dict[int, list[Incident]], dict[int, list[Incident]], list[Incident]]:
    """Incidents by host id and by device id, newest first, each listed once per piece of
    hardware (by its most direct link), and the SDC suspicions that name no hardware
    (unattributed, consecutive steps collapsed). Four queries."""
    interruptions = Interruption.objects.filter(run__in=runs)
    records = SdcReplay.objects.filter(run__in=runs)
    if since is not None:
        interruptions = interruptions.filter(occurred_at__gte=since)
        records = records.filter(detected_at__gte=since)
    if until is not None:
        interruptions = interruptions.filter(occurred_at__lt=until)
        records = records.filter(detected_at__lt=until)
    if host is not None:
        # One subquery a path, each an index lookup on the host: the OR across the joins (and
        # DISTINCT) joined every interruption of the runs with its hosts and devices, ~20 ms
        # at Llama scale in each of the three queries built on it.
        named = Interruption.hosts.through.objects.filter(host=host)
        on_device = Interruption.devices.through.objects.filter(device__host=host)
        interruptions = interruptions.filter(
            Q(pk__in=named.values("interruption_id"))
            | Q(pk__in=on_device.values("interruption_id"))
        )
        records = records.filter(Q(host=host) | Q(device__host=host))  # foreign keys: no repeats

    facts: dict[tuple[str, int], tuple[datetime, int, str, str, str, str, int | None]] = {}
    for pk, at, run_id, run_name, project, cause, planned, step in interruptions.values_list(
        "pk",
        "occurred_at",
        "run_id",
        "run__name",
        "run__project__slug",
        "root_cause__name",
        "planned",
        "step",
    ):
        status = "planned" if planned else "unexpected"
        facts[("interruption", pk)] = (at, run_id, run_name, project, cause, status, step)
    # (incident kind, hardware kind, hardware id, incident pk, via, weight, names a device)
    typed: list[tuple[str, str, int, int, str, float, bool]] = []
    unattributed: list[tuple[Incident, tuple[int, str, int | None, int | None]]] = []
    sdc_rows = records.values_list(
        "pk",
        "detected_at",
        "run_id",
        "run__name",
        "run__project__slug",
        "detection",
        "verdict",
        "step",
        "host_id",
        "device_id",
        "device__host_id",
        "metric_name",
        "attempt_id",
        "compared_attempt_id",
        "last_step",
    )
    detections = dict(SdcReplay.Detection.choices)
    for (pk, at, run_id, run_name, project, detection, verdict, step, h, d, dh, metric,
         attempt_id, compared_id, last_step) in sdc_rows:  # fmt: skip
        label = detections.get(detection, detection)
        facts[("sdc", pk)] = (at, run_id, run_name, project, label, verdict, step)
        if h is not None:
            typed.append(("sdc", "host", h, pk, VIA_NAMED, 1.0, False))
        if d is not None:
            typed.append(("sdc", "device", d, pk, VIA_NAMED, 1.0, True))
        if dh is not None:
            typed.append(("sdc", "host", dh, pk, VIA_DEVICE, 1.0, True))
        if h is None and d is None:
            one = Incident("sdc", pk, at, run_id, run_name, project, label, verdict, step, "",
                           last_step=last_step)  # fmt: skip
            unattributed.append((one, (run_id, metric, attempt_id, compared_id)))
    # A host's few interruptions by id: from the subquery, PostgreSQL guessed hundreds and
    # read all 16,384 GPUs of a Llama-scale fleet to join their links (10 ms).
    interruption_ids: Any = interruptions.values("pk")
    if host is not None:
        interruption_ids = [pk for kind, pk in facts if kind == "interruption"]
    host_links = list(
        Interruption.hosts.through.objects.filter(interruption__in=interruption_ids).values_list(
            "host_id", "interruption_id"
        )
    )
    device_links = list(
        Interruption.devices.through.objects.filter(interruption__in=interruption_ids).values_list(
            "device_id", "device__host_id", "interruption_id"
        )
    )
    named_hosts: dict[int, int] = {}
    device_hosts: dict[int, set[int]] = {}
    for _, pk in host_links:
        named_hosts[pk] = named_hosts.get(pk, 0) + 1
    for _, dh, pk in device_links:
        if dh is not None:
            device_hosts.setdefault(pk, set()).add(dh)
    for h, pk in host_links:
        pinned = h in device_hosts.get(pk, ())
        weight = 1.0 if pinned else 1.0 / named_hosts[pk]
        typed.append(("interruption", "host", h, pk, VIA_NAMED, weight, pinned))
    for d, dh, pk in device_links:
        typed.append(("interruption", "device", d, pk, VIA_NAMED, 1.0, True))
        if dh is not None:
            typed.append(("interruption", "host", dh, pk, VIA_DEVICE, 1.0, True))

    best: dict[tuple[str, int, str, int], tuple[str, float, bool]] = {}
    for incident_kind, hardware_kind, hardware_id, pk, via, weight, pinned in typed:
        if (incident_kind, pk) not in facts:
            continue
        key = (hardware_kind, hardware_id, incident_kind, pk)
        if key in best:
            seen_via, seen_weight, seen_pinned = best[key]
            if _VIA_RANK[seen_via] < _VIA_RANK[via]:
                via = seen_via
            weight, pinned = max(weight, seen_weight), pinned or seen_pinned
        best[key] = (via, weight, pinned)
    by_host: dict[int, list[Incident]] = {}
    by_device: dict[int, list[Incident]] = {}
    for (hardware_kind, hardware_id, incident_kind, pk), (via, weight, pinned) in best.items():
        at, run_id, run_name, project, label, status, step = facts[(incident_kind, pk)]
        target = by_host if hardware_kind == "host" else by_device
        target.setdefault(hardware_id, []).append(
            Incident(incident_kind, pk, at, run_id, run_name, project, label, status, step, via,
                     weight, pinned)
        )  # fmt: skip
    # --- ranks hook (issue 16), to be reconciled with the fleet rework at merge: straggler
    # records count as incidents of their host and device, so toward repeat offenders.
    from logbook.selectors.stragglers import straggler_incidents  # it imports Incident

    for hardware_kind, hardware_id, incident in straggler_incidents(
        runs=runs, since=since, until=until, host=host
    ):
        target = by_host if hardware_kind == "host" else by_device
        target.setdefault(hardware_id, []).append(incident)
    # --- end of ranks hook
    for incidents in (*by_host.values(), *by_device.values()):
        incidents.sort(key=lambda one: (one.occurred_at, one.kind, one.pk), reverse=True)
    return by_host, by_device, _collapsed(unattributed)


def _collapsed(
    records: list[tuple[Incident, tuple[int, str, int | None, int | None]]],
) -> list[Incident]:
    """One record per run of consecutive steps of one metric and attempt pair (a divergence
    over steps 3150-3155 is one suspicion, not six), newest first: the service records them
    so (logbook.services.sdc), and this also joins the per-step records stored before it
    did, and adjacent ranges two workers opened at once. Records without a metric (a job's
    own report naming no hardware) stay as they are."""
    collapsed: list[Incident] = []
    runs: dict[tuple[int, str, int | None, int | None], Incident] = {}
    for one, key in sorted(records, key=lambda pair: (repr(pair[1]), pair[0].step or 0)):
        if not key[1]:
            collapsed.append(one)
            continue
        current = runs.get(key)
        end = None if current is None else (current.last_step or current.step)
        if current is not None and end is not None and one.step == end + 1:
            runs[key] = replace(
                current,
                last_step=one.last_step or one.step,
                occurred_at=max(current.occurred_at, one.occurred_at),
            )
            continue
        if current is not None:
            collapsed.append(current)
        runs[key] = one
    collapsed += runs.values()
    collapsed.sort(key=lambda one: (one.occurred_at, one.pk), reverse=True)
    return collapsed


def host_runs(*, user: User, host: Host) -> QuerySet[Run]:
    """The user's runs the host touched, newest activity first."""
    runs = Run.objects.filter(project__in=projects_for_user(user=user))
    # One subquery a path, each an index lookup on the host: one OR across the joins
    # multiplied a Llama-scale run's 467 attempts x 2,048 hosts by its interruptions'
    # rows (5.7M hashed, 1.4 s a host page).
    touched = (
        Q(pk__in=Attempt.hosts.through.objects.filter(host=host).values("attempt__run_id"))
        | Q(
            pk__in=Interruption.hosts.through.objects.filter(host=host).values(
                "interruption__run_id"
            )
        )
        | Q(
            pk__in=Interruption.devices.through.objects.filter(device__host=host).values(
                "interruption__run_id"
            )
        )
        | Q(pk__in=SdcReplay.objects.filter(Q(host=host) | Q(device__host=host)).values("run_id"))
        | Q(pk__in=SdcReplay.hosts.through.objects.filter(host=host).values("sdcreplay__run_id"))
    )
    return (
        runs.filter(touched)
        .select_related("project")
        .order_by("-last_seen_at", "project__slug", "name")
    )


@dataclass(frozen=True)
class QuarantinedHardware:
    kind: str  # "host" or "device"
    name: str
    host_name: str  # the host page to link to (a device's host)
    quarantined_at: datetime
    reason: str
    quarantined_by: str


def quarantined_hardware_for_run(*, run: Run) -> list[QuarantinedHardware]:
    """Quarantined hosts and devices the run touched: its attempts' hosts, the devices on
    them, and the hardware its interruptions and SDC records name; for the run page. Two queries."""
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
