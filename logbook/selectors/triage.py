"""Reads for auto-triage: the evidence around an interruption (as the plain facts
logbook.autotriage weighs), the admins' message patterns, which interruptions a newly
arrived health event may explain, and the suggestions' accuracy."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q, QuerySet, Value
from django.urls import reverse

from logbook import triage_config
from logbook.autotriage import EvidenceFact, IncidentFacts, MessageRule, RuleBook, XidRule
from logbook.incident_groups import SHARED_CATEGORY, SHARED_PART
from logbook.models import (
    AuditEvent,
    IncidentGroup,
    Interruption,
    LogbookEntry,
    RootCause,
    SdcReplay,
    StragglerRecord,
    TriageRule,
    TriageRuleSetting,
    TriageSuggestion,
)
from logbook.triage_combine import Category
from telemetry import configs
from telemetry.selectors import User, projects_for_user
from telemetry.selectors import attempts as attempt_selectors
from telemetry.selectors import health_events as health_selectors
from telemetry.selectors.health_events import HealthEventRow

# Evidence is read from this long before the interruption (an XID, then minutes of a stalled
# collective until the watchdog fires: PyTorch's default NCCL timeout is 10 minutes) to this
# long after it (a DCGM push lands up to a scrape interval later, stamped on arrival).
WINDOW_BEFORE = timedelta(minutes=15)
WINDOW_AFTER = timedelta(minutes=5)
# An SDC suspicion is usually found after the fact (a replay, a scanner): hours back.
SDC_WINDOW_BEFORE = timedelta(hours=6)
HANG_KEY_PREFIX = "hang:"


def shifted(at: datetime, delta: timedelta) -> datetime:
    """`at + delta`, held at the first or last moment a datetime has: the ingest contract
    accepts any time a datetime holds (year 1 to 9999), and a window around one at either end
    overflowed (OverflowError, a failed batch)."""
    try:
        return at + delta
    except OverflowError:
        edge = datetime.min if delta < timedelta(0) else datetime.max
        return edge.replace(tzinfo=at.tzinfo)


DECIDED = (TriageSuggestion.Outcome.CONFIRMED, TriageSuggestion.Outcome.OVERRIDDEN)
FIRST_SILENT_WORDS = "Ranks that stopped reporting first:"


def incident_facts(interruption: Interruption) -> IncidentFacts:
    return IncidentFacts(
        message=interruption.message,
        occurred_at=interruption.occurred_at,
        hosts=tuple(sorted(host.name for host in interruption.hosts.all())),
        devices=tuple(sorted(device.uuid for device in interruption.devices.all())),
    )


def evidence_for(*, interruption: Interruption) -> list[EvidenceFact]:
    """DCGM events on the interruption's hosts (or its attempt's) in its window, straggler
    records of its attempt, the first-silent ranks of its attempt's hangs, a config change at
    its attempt's start, and SDC records of its run in the hours before it."""
    run = interruption.run
    own = {host.pk: host.name for host in interruption.hosts.all()}
    attempt_hosts = (
        health_selectors.attempt_host_ids(attempt_id=interruption.attempt_id)
        if interruption.attempt_id
        else {}
    )
    at = interruption.occurred_at
    events = health_selectors.health_events_near(
        project_id=run.project_id,
        host_ids=sorted(set(own) | set(attempt_hosts)),
        since=shifted(at, -WINDOW_BEFORE),
        until=shifted(at, WINDOW_AFTER),
    )
    facts = [_event_fact(event, own_host=event.host_id in own) for event in events]
    if interruption.attempt_id:
        facts += _straggler_facts(interruption, own=set(own.values()))
        facts += _first_silent_facts(interruption)
        facts += _config_facts(interruption)
    facts += _sdc_facts(interruption)
    facts += _group_facts(interruption)
    return facts


def _group_facts(interruption: Interruption) -> list[EvidenceFact]:
    """The incident group holding the interruption: several hosts of one rack, pod, cluster
    or site failing within minutes (logbook.incident_groups)."""
    facts = []
    for group in IncidentGroup.objects.filter(incidents=interruption):
        minutes = max(1, round((group.ended_at - group.started_at).total_seconds() / 60))
        count = group.incidents.count()
        facts.append(
            EvidenceFact(
                kind="group",
                at=group.started_at,
                text=(
                    f"One failure with {count - 1} other incident(s) on {len(group.hosts)} "
                    f"hosts of {group.name} within {minutes} min (group {group.pk}): "
                    f"{SHARED_PART[group.level]}"
                ),
                url=f"{reverse('logbook:fleet')}#incident-group-{group.pk}",
                category=SHARED_CATEGORY[group.level],
                component=group.suggested_component,
            )
        )
    return facts


def _event_fact(event: HealthEventRow, *, own_host: bool) -> EvidenceFact:
    url = reverse("logbook:host-detail", args=[event.host_name]) if event.host_name else ""
    return EvidenceFact(
        kind="dcgm",
        at=event.occurred_at,
        text=event.message,
        url=url,
        host=event.host_name,
        device=event.device_uuid,
        event_kind=event.kind,
        xid=event.xid,
        own_host=own_host,
    )


def _straggler_facts(interruption: Interruption, *, own: set[str]) -> list[EvidenceFact]:
    records = StragglerRecord.objects.filter(attempt_id=interruption.attempt_id).select_related(
        "host", "device"
    )
    url = reverse("dashboard:run-ranks", args=[interruption.run_id])
    return [
        EvidenceFact(
            kind="straggler",
            at=record.last_window_at,
            text=(
                f"Rank {record.rank} straggled for {record.windows} report windows "
                f"(relative score {record.relative_score:.2f})"
                + (f" on {record.host.name}" if record.host else "")
            ),
            url=url,
            host=record.host.name if record.host else "",
            device=record.device.uuid if record.device else "",
            own_host=bool(record.host and record.host.name in own),
        )
        for record in records.order_by("relative_score", "rank")[:8]
    ]


def _first_silent_facts(interruption: Interruption) -> list[EvidenceFact]:
    hangs = (
        Interruption.objects.filter(
            attempt_id=interruption.attempt_id, source_key__startswith=HANG_KEY_PREFIX
        )
        .prefetch_related("hosts")
        .order_by("occurred_at")
    )
    facts = []
    for hang in hangs:
        ranks = hang.message.partition(FIRST_SILENT_WORDS)[2].strip()
        url = reverse("logbook:incident-detail", args=[hang.pk])
        for host in hang.hosts.all():
            text = f"Stopped reporting first (hang at step {hang.step}): {ranks or host.name}"
            facts.append(EvidenceFact("first_silent", hang.occurred_at, text[:300], url, host.name))
    return facts


def _config_facts(interruption: Interruption) -> list[EvidenceFact]:
    """The config change the interruption's attempt started with: its run_info.config against
    the last earlier attempt's that sent one, less the keys every earlier restart changed
    (logbook.triage_config), and the changes logbook entries tied to the attempt record (a
    job's config_change note, on-call's entry). One fact: they are one change, told twice.
    Three queries."""
    attempt = interruption.attempt
    changes, routine, header = _attempt_config_changes(interruption.run_id, attempt.number)
    since = attempt.started_at
    entries = list(
        LogbookEntry.objects.filter(run_id=interruption.run_id, attempt_id=interruption.attempt_id)
        .filter(Q(kind=LogbookEntry.Kind.CONFIG_CHANGE) | ~Q(config_changes=[]))
        .order_by("occurred_at", "pk")
        .values_list("title", "config_changes", "occurred_at")
    )
    seen = {key for key, _, _ in changes}
    said: list[str] = []  # titles of entries that name no setting
    for title, rows, occurred_at in entries:
        told = [
            (row["key"], row.get("before", ""), row.get("after", ""))
            for row in rows or []
            if isinstance(row, dict) and row.get("key") and row["key"] not in routine
        ]
        new = [change for change in told if change[0] not in seen]
        changes += new
        seen.update(key for key, _, _ in told)
        if not rows:
            said.append(title)
        if (new or not rows) and occurred_at <= interruption.occurred_at:
            # A change made during the attempt is as recent as the entry that records it.
            since = max(since, occurred_at) if since else occurred_at
    if not changes and not said:
        return []
    after_s = (interruption.occurred_at - since).total_seconds() if since else None
    return [
        EvidenceFact(
            kind="config",
            at=since,
            text=triage_config.config_text(header, changes, said)[:300],
            url=reverse("dashboard:run-detail", args=[interruption.run_id]),
            category=triage_config.config_category(changes, said),
            after_s=after_s,
        )
    ]


def _attempt_config_changes(
    run_id: int, number: int
) -> tuple[list[triage_config.Change], set[str], str]:
    """What attempt `number`'s run_info.config changed from the last earlier attempt's that
    sent one, less the routine keys; those keys; the evidence line's header. One query."""
    sent = attempt_selectors.attempt_configs(run_ids=[run_id]).get(run_id, [])
    numbers = [sent_number for sent_number, _ in sent]
    index = numbers.index(number) if number in numbers else 0
    if not index:  # not sent, or the first attempt that sent a config: nothing to compare
        return [], set(), triage_config.LOGBOOK_HEADER
    transitions = [
        configs.config_changes(before, after)
        for (_, before), (_, after) in itertools.pairwise(sent[: index + 1])
    ]
    routine = triage_config.routine_keys(transitions[:-1])
    changes = [change for change in transitions[-1] if change[0] not in routine]
    if not changes:
        return [], routine, triage_config.LOGBOOK_HEADER
    return changes, routine, triage_config.attempt_header(number, numbers[index - 1])


def _sdc_facts(interruption: Interruption) -> list[EvidenceFact]:
    at = interruption.occurred_at
    records = (
        SdcReplay.objects.filter(
            run_id=interruption.run_id,
            detected_at__gte=shifted(at, -SDC_WINDOW_BEFORE),
            detected_at__lte=shifted(at, WINDOW_AFTER),
        )
        .exclude(verdict=SdcReplay.Verdict.NOT_REPRODUCED)
        .select_related("host", "device")
        .order_by("-detected_at")[:8]
    )
    url = reverse("logbook:sdc") + f"?run={interruption.run_id}"
    return [
        EvidenceFact(
            kind="sdc",
            at=record.detected_at,
            text=f"SDC {record.get_verdict_display().lower()} at step {record.step}"
            + (f" on {record.host.name}" if record.host else ""),
            url=url,
            host=record.host.name if record.host else "",
            device=record.device.uuid if record.device else "",
            verdict=record.verdict,
        )
        for record in records
    ]


def root_causes_visible(*, project_id: int | None) -> QuerySet[RootCause]:
    """The taxonomy one project sees: the site-wide categories and its own."""
    scope = Q(project__isnull=True)
    if project_id is not None:
        scope |= Q(project_id=project_id)
    return RootCause.objects.filter(scope)


def root_causes_of_project(*, project_id: int) -> QuerySet[RootCause]:
    """The project's own categories (not the site-wide ones)."""
    return RootCause.objects.filter(project_id=project_id).order_by("name")


def triage_settings_history(*, project_id: int, limit: int) -> list[AuditEvent]:
    """The latest audited changes to the project's rules and categories, newest first."""
    return list(
        AuditEvent.objects.filter(
            project_id=project_id,
            entity__in=(AuditEvent.Entity.TRIAGE_RULE, AuditEvent.Entity.ROOT_CAUSE),
        ).order_by("-at", "-pk")[:limit]
    )


@dataclass(frozen=True)
class RuleRow:
    """A rule as one project reads it: the row, and that project's change to it (if any)."""

    rule: TriageRule
    setting: TriageRuleSetting | None

    @property
    def enabled(self) -> bool:
        return self.rule.enabled and (self.setting is None or self.setting.enabled)

    @property
    def weight(self) -> float:
        if self.setting is not None and self.setting.weight is not None:
            return self.setting.weight
        return self.rule.weight

    @property
    def changed(self) -> bool:
        return self.setting is not None and (
            not self.setting.enabled or self.setting.weight is not None
        )


def triage_rules_for_project(*, project_id: int) -> list[RuleRow]:
    """Every rule a project's suggestions read, in reading order: the site-wide rules (the
    seeded built-ins and those superusers added) with the project's changes, then the
    project's own. Disabled rules are listed too (the settings page shows them)."""
    rules = TriageRule.objects.filter(
        Q(project__isnull=True) | Q(project_id=project_id)
    ).select_related("root_cause")
    settings = {row.rule_id: row for row in TriageRuleSetting.objects.filter(project_id=project_id)}
    rows = [RuleRow(rule, settings.get(rule.pk)) for rule in rules]
    # Site-wide first, then the project's own, each in position order.
    rows.sort(key=lambda row: (row.rule.project_id is not None, row.rule.position, row.rule.pk))
    return rows


def builtin_rules_stored() -> dict[str, dict[str, Any]]:
    """The built-in rule rows as stored, by name (field values, category as its slug)."""
    return {
        rule.name: {
            "kind": rule.kind,
            "name": rule.name,
            "pattern": rule.pattern,
            "xid": rule.xid,
            "dcgm_kind": rule.dcgm_kind,
            "category": rule.root_cause.slug,
            "component": rule.component,
            "weight": rule.weight,
            "source": rule.source,
            "position": rule.position,
        }
        for rule in TriageRule.objects.filter(builtin=True, project__isnull=True)
        .select_related("root_cause")
        .order_by("position")
    }


def rule_book(*, project_id: int) -> RuleBook:
    """The rules and categories one project's suggestions weigh (read on every suggestion:
    a change on the settings page counts at once; no other project's rows are read)."""
    message: list[MessageRule] = []
    xids: dict[int, XidRule] = {}
    kinds: dict[str, XidRule] = {}
    for row in triage_rules_for_project(project_id=project_id):
        rule = row.rule
        component = rule.component or rule.root_cause.name
        if not row.enabled:
            # A disabled XID or DCGM rule weighs nothing (rather than falling back to the
            # reading of a code the table lacks); a disabled message rule is not read.
            off = XidRule(rule.root_cause.slug, component, 0.0)
            if rule.kind == TriageRule.Kind.XID and rule.xid is not None:
                xids.setdefault(rule.xid, off)
            elif rule.kind == TriageRule.Kind.DCGM:
                kinds.setdefault(rule.dcgm_kind, off)
            continue
        if rule.kind == TriageRule.Kind.MESSAGE:
            message.append(
                MessageRule(
                    rule.name, rule.pattern, rule.root_cause.slug, component, row.weight,
                    rule.source,
                )
            )  # fmt: skip
        elif rule.kind == TriageRule.Kind.XID and rule.xid is not None:
            # A project's own XID rule (read after the site-wide ones) replaces that code's.
            xids[rule.xid] = XidRule(rule.root_cause.slug, component, row.weight)
        elif rule.kind == TriageRule.Kind.DCGM:
            kinds[rule.dcgm_kind] = XidRule(rule.root_cause.slug, component, row.weight)
    return RuleBook(tuple(message), xids, kinds, categories_for_project(project_id=project_id))


def categories_for_project(*, project_id: int | None) -> dict[str, Category]:
    """Family, hardware and name of each category the project sees, read from RootCause."""
    rows = root_causes_visible(project_id=project_id).values_list(
        "slug", "name", "family", "is_hardware"
    )
    return {slug: Category(slug, name, family, hardware) for slug, name, family, hardware in rows}


def category_names(*, project_id: int | None = None) -> dict[str, str]:
    return dict(root_causes_visible(project_id=project_id).values_list("slug", "name"))


def interruptions_near_events(*, events: Sequence[HealthEventRow]) -> list[int]:
    """Open, unexpected, undecided interruptions whose evidence window holds one of the events
    on one of their hosts or their attempt's hosts."""
    placed = [event for event in events if event.host_id is not None and not event.first_sight]
    if not placed:
        return []
    host_ids = sorted({event.host_id for event in placed if event.host_id is not None})
    moments = [event.occurred_at for event in placed]
    return list(
        Interruption.objects.filter(
            planned=False,
            status=Interruption.Status.OPEN,
            occurred_at__gte=shifted(min(moments), -WINDOW_AFTER),
            occurred_at__lte=shifted(max(moments), WINDOW_BEFORE),
        )
        .filter(Q(hosts__in=host_ids) | Q(attempt__hosts__in=host_ids))
        .exclude(suggestion__outcome__in=DECIDED)
        .values_list("pk", flat=True)
        .distinct()
        .order_by("pk")
    )


def interruptions_open_of_run(
    *, run_id: int, since: datetime, until: datetime | None = None
) -> list[int]:
    """The run's open, unexpected, undecided interruptions that occurred since (until)."""
    found = Interruption.objects.filter(
        run_id=run_id, planned=False, status=Interruption.Status.OPEN, occurred_at__gte=since
    )
    if until is not None:
        found = found.filter(occurred_at__lte=until)
    return list(
        found.exclude(suggestion__outcome__in=DECIDED).values_list("pk", flat=True).order_by("pk")
    )


# --- Accuracy ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CategoryAccuracy:
    slug: str
    name: str
    suggested: int
    confirmed: int
    overridden: int
    pending: int
    # Decided suggestions that named culprit hosts, and those whose hosts are the incident's
    # hosts as triaged (a Confirm that filed a wrong host, corrected later, counts wrong).
    hosts_named: int = 0
    hosts_right: int = 0

    @property
    def confirmed_share(self) -> float | None:
        decided = self.confirmed + self.overridden
        return self.confirmed / decided if decided else None

    @property
    def hosts_right_share(self) -> float | None:
        return self.hosts_right / self.hosts_named if self.hosts_named else None


@dataclass(frozen=True)
class TriageAccuracy:
    categories: list[CategoryAccuracy]
    median_to_triage_with_s: float | None
    median_to_triage_without_s: float | None
    triaged_with: int
    triaged_without: int

    @property
    def confirmed(self) -> int:
        return sum(row.confirmed for row in self.categories)

    @property
    def overridden(self) -> int:
        return sum(row.overridden for row in self.categories)


def _suggestions_for_user(user: User) -> QuerySet[TriageSuggestion]:
    return TriageSuggestion.objects.filter(
        interruption__run__project__in=projects_for_user(user=user)
    )


def triage_accuracy(*, user: User) -> TriageAccuracy:
    """Per suggested category: suggestions made, confirmed, overridden and still pending; and
    the median time from detection (else occurrence) to triage of the user's triaged
    incidents, with a suggestion and without one."""
    counts: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    hosts: dict[str, list[int]] = {}  # slug: [named, right]
    rows = _suggestions_for_user(user).values_list(
        "root_cause__slug",
        "root_cause__name",
        "outcome",
        "hosts",
        ArrayAgg("interruption__hosts__name", distinct=True, default=Value([])),
    )
    for slug, name, outcome, suggested_hosts, filed_hosts in rows:
        names[slug] = name
        counts.setdefault(slug, {}).setdefault(outcome, 0)
        counts[slug][outcome] += 1
        if outcome in DECIDED and suggested_hosts:
            tally = hosts.setdefault(slug, [0, 0])
            tally[0] += 1
            tally[1] += set(suggested_hosts) == {h for h in filed_hosts if h}
    categories = sorted(
        (
            CategoryAccuracy(
                slug,
                names[slug],
                sum(by.values()),
                by.get("confirmed", 0),
                by.get("overridden", 0),
                by.get("pending", 0),
                *hosts.get(slug, [0, 0]),
            )
            for slug, by in counts.items()
        ),
        key=lambda row: (-row.suggested, row.name),
    )
    triaged = Interruption.objects.filter(
        run__project__in=projects_for_user(user=user), planned=False, triaged_at__isnull=False
    ).values_list("occurred_at", "detected_at", "triaged_at", "suggestion__pk")
    with_s: list[float] = []
    without_s: list[float] = []
    for occurred, detected, triaged_at, suggestion_pk in triaged:
        spent = (triaged_at - (detected or occurred)).total_seconds()
        (with_s if suggestion_pk else without_s).append(max(spent, 0.0))
    return TriageAccuracy(
        categories=categories,
        median_to_triage_with_s=statistics.median(with_s) if with_s else None,
        median_to_triage_without_s=statistics.median(without_s) if without_s else None,
        triaged_with=len(with_s),
        triaged_without=len(without_s),
    )
