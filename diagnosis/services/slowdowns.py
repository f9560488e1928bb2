"""Writes for slowdowns: the periodic pass that finds and explains them (detect, weigh, store,
notify), and on-call's decisions (confirm, correct the cause, dismiss), audited, with a
logbook draft for each confirmed one."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from diagnosis import slowdown_rules as rules
from diagnosis.models import Slowdown, SlowdownCause, SlowdownScan
from diagnosis.selectors import slowdowns as slowdown_selectors
from diagnosis.slowdown_detect import Analysed, Window, detect, lost_seconds
from diagnosis.slowdown_facts import facts_for
from diagnosis.slowdown_text import draft_text, webhook_lines
from logbook.models import AuditEvent, LogbookEntry
from logbook.services import audit as audit_services
from logbook.services import entries as entry_services
from logbook.services import webhooks as webhook_services
from telemetry import services as telemetry_services
from telemetry.models import Run
from telemetry.selectors import attempts as attempt_selectors

logger = logging.getLogger(__name__)

# One pass at a time (pg_try_advisory_lock's key: "slow" in ASCII).
SLOWDOWN_PASS_LOCK = 0x736C6F77
ENTITY = AuditEvent.Entity.SLOWDOWN


@dataclass(frozen=True)
class Found:
    """A window the detector found, in the run's terms, with its ranked causes."""

    attempt_number: int
    start_step: int
    end_step: int
    start_time: datetime | None
    end_time: datetime | None
    baseline: float
    value: float
    drop_pct: float
    lost_s: float
    gpu_hours_lost: float | None
    ongoing: bool
    causes: list[rules.Cause]


def _moment(epoch: float) -> datetime | None:
    return datetime.fromtimestamp(float(epoch), tz=UTC) if epoch == epoch else None


def _found(points: Analysed, window: Window, causes: list[rules.Cause], metric: str,
           gpus: int | None) -> Found:  # fmt: skip
    inverted = metric in slowdown_selectors.INVERTED
    lost_s = lost_seconds(points, window)
    return Found(
        attempt_number=int(points.attempts[window.first]),
        start_step=int(points.steps[window.first]),
        end_step=int(points.steps[window.last]),
        start_time=_moment(points.times[window.first]),
        end_time=_moment(points.times[window.last]),
        # Step time is stored as seconds, as the job sent it.
        baseline=1.0 / window.baseline if inverted else window.baseline,
        value=1.0 / window.value if inverted else window.value,
        drop_pct=round(window.drop_pct, 2),
        lost_s=lost_s,
        gpu_hours_lost=round(lost_s * gpus / 3600.0, 3) if gpus else None,
        ongoing=window.last == len(points.values) - 1,
        causes=causes,
    )


def slowdowns_find(*, run: Run) -> tuple[str | None, list[Found]]:
    """Detect and explain the run's slowdowns (reads only)."""
    metric = slowdown_selectors.throughput_metric(run=run)
    if metric is None:
        return None, []
    points, windows = detect(slowdown_selectors.run_throughput(run=run, metric=metric))
    source = slowdown_selectors.DatabaseSource(run)
    found = []
    for window in windows:
        facts = facts_for(points, window, source)
        gpus = source.gpu_count(int(points.attempts[window.first]))
        found.append(_found(points, window, rules.causes_rank(facts), metric, gpus))
    return metric, found


def _overlaps(slowdown: Slowdown, one: Found) -> bool:
    if slowdown.attempt.number != one.attempt_number:
        return False
    return slowdown.start_step <= one.end_step and one.start_step <= slowdown.end_step


def slowdowns_scan(*, run_id: int, now: datetime | None = None) -> int:
    """Find, explain and store one run's slowdowns: a window that overlaps a stored one
    updates it (its figures, and its causes while nobody decided it); an open, undecided one
    no longer found is removed (more data showed it was not one); a new one is created.
    Notifies the project's webhooks once for a slowdown past SLOWDOWN_WEBHOOK_GPU_HOURS.
    Records the data version read. Returns how many slowdowns changed."""
    now = now or timezone.now()
    run = Run.objects.select_related("project").filter(pk=run_id).first()
    if run is None:
        return 0
    metric, found = slowdowns_find(run=run)
    attempt_ids = {one.number: one.id for one in attempt_selectors.attempt_facts(run=run)}
    changed = 0
    with transaction.atomic():
        stored = list(
            Slowdown.objects.select_for_update()
            .filter(run=run)
            .select_related("attempt")
            .order_by("pk")
        )
        kept: set[int] = set()
        for one in found:
            match = next((s for s in stored if s.pk not in kept and _overlaps(s, one)), None)
            if match is None:
                if one.attempt_number not in attempt_ids:
                    continue
                match = Slowdown(run=run, attempt_id=attempt_ids[one.attempt_number])
            if _store(match, one, metric or ""):
                changed += 1
            kept.add(match.pk)
            _notify_if_costly(match)
        for slowdown in stored:
            if slowdown.pk not in kept and slowdown.status == Slowdown.Status.OPEN:
                slowdown.delete()
                changed += 1
        if changed:
            telemetry_services.run_data_version_bump(run_id=run.pk)
            telemetry_services.fleet_version_bump(project_id=run.project_id)
        version = Run.objects.values_list("data_version", flat=True).get(pk=run.pk)
        SlowdownScan.objects.update_or_create(
            run=run, defaults={"data_version": version, "scanned_at": now}
        )
    return changed


_FIGURES = ("start_step", "end_step", "start_time", "end_time", "baseline", "value",
            "drop_pct", "lost_s", "gpu_hours_lost", "ongoing")  # fmt: skip


def _store(slowdown: Slowdown, one: Found, metric: str) -> bool:
    """Write the window's figures, and its causes while it is undecided; True if anything
    changed."""
    new = slowdown.pk is None
    changed = new
    slowdown.metric = metric
    for name in _FIGURES:
        value = getattr(one, name)
        if getattr(slowdown, name) != value:
            setattr(slowdown, name, value)
            changed = True
    undecided = slowdown.decided_at is None
    top = one.causes[0].kind if one.causes else Slowdown.Kind.UNKNOWN
    if undecided and slowdown.cause_kind != top:
        slowdown.cause_kind = top
        changed = True
    if not changed:
        return False
    slowdown.save()
    if undecided:
        rows = [_cause_row(slowdown, position, cause) for position, cause in enumerate(one.causes)]
        current = [] if new else [_cause_key(c) for c in slowdown.causes.order_by("position")]
        if current != [_cause_key(c) for c in rows]:
            slowdown.causes.all().delete()
            SlowdownCause.objects.bulk_create(rows)
    return True


def _cause_row(slowdown: Slowdown, position: int, cause: rules.Cause) -> SlowdownCause:
    return SlowdownCause(
        slowdown=slowdown,
        position=position,
        kind=cause.kind,
        detail=cause.detail,
        hosts=list(cause.hosts),
        ranks=list(cause.ranks),
        devices=list(cause.devices),
        config_keys=list(cause.config_keys),
        confidence=cause.confidence,
        evidence=list(cause.lines),
        gpu_hours=cause.gpu_hours,
    )


def _cause_key(cause: SlowdownCause) -> tuple[object, ...]:
    return (cause.kind, cause.detail, tuple(cause.hosts), tuple(cause.ranks),
            tuple(cause.config_keys), cause.confidence, tuple(cause.evidence))  # fmt: skip


def _notify_if_costly(slowdown: Slowdown) -> None:
    threshold = settings.SLOWDOWN_WEBHOOK_GPU_HOURS
    if slowdown.notified_at is not None or slowdown.gpu_hours_lost is None:
        return
    if slowdown.gpu_hours_lost < threshold:
        return
    causes = list(slowdown.causes.order_by("position")[:1])
    top = causes[0] if causes else None
    link = reverse("dashboard:run-detail", args=[slowdown.run_id]) + f"#slowdown-{slowdown.pk}"
    webhook_services.slowdown_notify(
        project=slowdown.run.project,
        slowdown_id=slowdown.pk,
        title=f"Slowdown: {slowdown.run.name} lost {slowdown.gpu_hours_lost:.1f} GPU-hours",
        lines=webhook_lines(slowdown, top),
        path=link,
        facts={
            "run": {
                "id": slowdown.run_id,
                "name": slowdown.run.name,
                "project": slowdown.run.project.slug,
            },
            "slowdown": slowdown.pk,
            "drop_pct": slowdown.drop_pct,
            "gpu_hours_lost": slowdown.gpu_hours_lost,
            "start_step": slowdown.start_step,
            "cause": top.kind if top else "unknown",
            "hosts": list(top.hosts) if top else [],
        },
    )
    Slowdown.objects.filter(pk=slowdown.pk).update(notified_at=timezone.now())
    slowdown.notified_at = timezone.now()


def slowdowns_refresh(*, now: datetime | None = None) -> int:
    """The periodic pass: scan every run whose data changed (diagnosis.selectors.slowdowns.
    runs_to_scan). One pass at a time. Returns how many runs it scanned."""
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [SLOWDOWN_PASS_LOCK])
        if not cursor.fetchone()[0]:
            return 0
    try:
        runs = slowdown_selectors.runs_to_scan(now=now)
        for run_id in runs:
            try:
                slowdowns_scan(run_id=run_id, now=now)
            except Exception:
                # One run's bad data must not stop the others' slowdowns.
                logger.exception("slowdown scan of run %s failed", run_id)
        return len(runs)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [SLOWDOWN_PASS_LOCK])


# --- On-call's decisions ---------------------------------------------------------------------


class DecisionError(ValueError):
    pass


@transaction.atomic
def slowdown_decide(
    *, slowdown: Slowdown, user: object, status: str, cause_kind: str = "", note: str = ""
) -> Slowdown:
    """Confirm a slowdown (optionally correcting the cause it is charged to) or dismiss it,
    audited. A confirmed one gets its logbook draft (once; kept if edited)."""
    if status not in (Slowdown.Status.CONFIRMED, Slowdown.Status.DISMISSED, Slowdown.Status.OPEN):
        raise DecisionError(f"status must be confirmed, dismissed or open, not {status!r}.")
    kinds = {kind for kind, _ in Slowdown.Kind.choices}
    if cause_kind and cause_kind not in kinds:
        raise DecisionError(f"cause must be one of {', '.join(sorted(kinds))}, not {cause_kind!r}.")
    slowdown = (
        Slowdown.objects.select_for_update()
        .select_related("run__project", "attempt")
        .get(pk=slowdown.pk)
    )
    before = {"status": slowdown.status, "cause_kind": slowdown.cause_kind,
              "decision_note": slowdown.decision_note}  # fmt: skip
    slowdown.status = status
    if cause_kind:
        slowdown.cause_kind = cause_kind
    slowdown.decision_note = note[:2000]
    reopened = status == Slowdown.Status.OPEN
    slowdown.decided_by = None if reopened else user  # type: ignore[assignment]
    slowdown.decided_at = None if reopened else timezone.now()
    slowdown.save()
    after = {"status": slowdown.status, "cause_kind": slowdown.cause_kind,
             "decision_note": slowdown.decision_note}  # fmt: skip
    audit_services.audit_record(
        project=slowdown.run.project,
        entity=ENTITY,
        object_id=slowdown.pk,
        user=user,
        changes={k: [before[k], after[k]] for k in after if before[k] != after[k]},
    )
    if status == Slowdown.Status.CONFIRMED:
        slowdown_draft(slowdown=slowdown)
    telemetry_services.run_data_version_bump(run_id=slowdown.run_id)
    telemetry_services.fleet_version_bump(project_id=slowdown.run.project_id)
    return slowdown


def slowdown_draft(*, slowdown: Slowdown) -> LogbookEntry:
    """The logbook draft of a confirmed slowdown (keyed by the slowdown: written once)."""
    causes: Sequence[SlowdownCause] = list(slowdown.causes.order_by("position"))
    charged = next((c for c in causes if c.kind == slowdown.cause_kind), None)
    title, body = draft_text(slowdown, charged)
    config = []
    if charged is not None and charged.kind == Slowdown.Kind.CONFIG_CHANGE:
        config = [
            {"key": key, "before": before, "after": after}
            for key, before, after in _config_changes(slowdown)
        ]
    return entry_services.logbook_entry_create(
        run=slowdown.run,
        user=None,
        kind=LogbookEntry.Kind.ANALYSIS,
        role=LogbookEntry.Role.AUTOMATION,
        title=title,
        body=body,
        occurred_at=slowdown.start_time or timezone.now(),
        step=slowdown.start_step,
        step_end=slowdown.end_step,
        attempt=slowdown.attempt,
        config_changes=config,
        is_automatic=True,
        source_key=f"draft:slowdown:{slowdown.pk}",
    )


def _config_changes(slowdown: Slowdown) -> list[tuple[str, str, str]]:
    """(key, before, after) between the slowdown's attempt's config and the config of the
    latest attempt before it that sent one."""
    configs = {
        one.number: one.config
        for one in attempt_selectors.attempt_facts(run=slowdown.run_id)
        if one.config is not None
    }
    number = slowdown.attempt.number
    earlier = [n for n in configs if n < number]
    if number not in configs or not earlier:
        return []
    return rules.config_differences(configs[max(earlier)], configs[number])
