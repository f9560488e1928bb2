"""Metric alert rules: create, change and delete them (audited), and evaluate them all in the
beat's periodic pass (logbook.alerts_evaluate, every 30 s).

A rule's condition (logbook.alert_maths) is judged on each run it watches, on the latest
attempt's points of its metric. When it holds and the run has no open firing of the rule, a
firing is recorded (once: one open firing per rule and run, a unique constraint), marked on
the run's charts as an annotation tagged "alert", audited, and sent to the project's
webhooks (event "alert", in each endpoint's format: Slack, PagerDuty, Opsgenie). When it no
longer holds, the firing is resolved: its mark ends there, and PagerDuty is sent the
resolve for the same dedup key.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from logbook import alert_maths
from logbook.models import AlertFiring, AlertRule, Annotation, AuditEvent
from logbook.selectors import alerts as alert_selectors
from logbook.services import webhooks
from logbook.services.audit import audit_record
from telemetry import services as telemetry_services
from telemetry.models import Project, Run
from telemetry.selectors import User

logger = logging.getLogger(__name__)

RULE_FIELDS = (
    "name",
    "metric",
    "runs",
    "comparison",
    "threshold_kind",
    "threshold",
    "baseline_s",
    "for_s",
    "severity",
    "enabled",
)
ALERT_TAG = "alert"


def spec_of(rule: AlertRule) -> alert_maths.RuleSpec:
    return alert_maths.RuleSpec(
        comparison=rule.comparison,
        threshold_kind=rule.threshold_kind,
        threshold=rule.threshold,
        for_s=float(rule.for_s),
        baseline_s=float(rule.baseline_s),
    )


def rule_text(rule: AlertRule) -> str:
    return alert_maths.describe(spec_of(rule), rule.metric)


# --- Rules (admins) ------------------------------------------------------------------------


def _clean(values: dict[str, Any]) -> dict[str, Any]:
    errors: dict[str, list[str]] = {}
    name = str(values.get("name", "")).strip()
    metric = str(values.get("metric", "")).strip()
    if not name:
        errors["name"] = ["Name the rule."]
    if not metric:
        errors["metric"] = ["Name the metric the rule watches (e.g. tokens_per_s)."]
    if values.get("comparison") not in AlertRule.Comparison.values:
        errors["comparison"] = [f"One of {', '.join(AlertRule.Comparison.values)}."]
    if values.get("threshold_kind") not in AlertRule.ThresholdKind.values:
        errors["threshold_kind"] = [f"One of {', '.join(AlertRule.ThresholdKind.values)}."]
    if values.get("severity") not in AlertRule.Severity.values:
        errors["severity"] = [f"One of {', '.join(AlertRule.Severity.values)}."]
    threshold = values.get("threshold", 0.0)
    if not isinstance(threshold, int | float) or not math.isfinite(threshold):
        errors["threshold"] = ["A finite number."]
    elif values.get("threshold_kind") == AlertRule.ThresholdKind.MEDIAN_FRACTION and not (
        threshold > 0
    ):
        errors["threshold"] = ["A fraction of the median above 0 (0.9 is 90%)."]
    for field, low, high in (("for_s", 0, 86_400), ("baseline_s", 60, 30 * 86_400)):
        value = values.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            errors[field] = [f"Whole seconds from {low} to {high}."]
    if errors:
        raise ValidationError(errors)
    return {
        **values,
        "name": name[:100],
        "metric": metric[:200],
        "runs": str(values.get("runs", "")).strip()[:200],
        "threshold": float(threshold),
    }


@transaction.atomic
def alert_rule_create(
    *,
    project: Project,
    user: User | None,
    name: str,
    metric: str,
    comparison: str = AlertRule.Comparison.BELOW,
    threshold_kind: str = AlertRule.ThresholdKind.VALUE,
    threshold: float = 0.0,
    for_s: int = 120,
    baseline_s: int = 3600,
    severity: str = AlertRule.Severity.WARNING,
    runs: str = "",
    enabled: bool = True,
) -> AlertRule:
    """Add a rule to the project (audited). ValidationError names each bad field."""
    values = _clean(
        {
            "name": name,
            "metric": metric,
            "runs": runs,
            "comparison": comparison,
            "threshold_kind": threshold_kind,
            "threshold": threshold,
            "baseline_s": baseline_s,
            "for_s": for_s,
            "severity": severity,
            "enabled": bool(enabled),
        }
    )
    if AlertRule.objects.filter(project=project, name=values["name"]).exists():
        raise ValidationError({"name": ["The project has a rule of that name."]})
    authenticated = user is not None and user.is_authenticated
    rule = AlertRule.objects.create(
        project=project, created_by=user if authenticated else None, **values
    )
    audit_record(
        project=project,
        entity=AuditEvent.Entity.ALERT_RULE,
        object_id=rule.pk,
        user=user,
        action="create",
        changes={field: [None, getattr(rule, field)] for field in RULE_FIELDS},
    )
    return rule


@transaction.atomic
def alert_rule_set_enabled(*, rule: AlertRule, user: User | None, enabled: bool) -> AlertRule:
    if rule.enabled != enabled:
        audit_record(
            project=rule.project,
            entity=AuditEvent.Entity.ALERT_RULE,
            object_id=rule.pk,
            user=user,
            changes={"enabled": [rule.enabled, enabled]},
        )
        rule.enabled = enabled
        rule.save(update_fields=["enabled"])
    return rule


@transaction.atomic
def alert_rule_delete(*, rule: AlertRule, user: User | None) -> None:
    audit_record(
        project=rule.project,
        entity=AuditEvent.Entity.ALERT_RULE,
        object_id=rule.pk,
        user=user,
        action="delete",
        changes={field: [getattr(rule, field), None] for field in RULE_FIELDS},
    )
    rule.delete()


# --- Evaluation (the beat) -----------------------------------------------------------------


def alerts_evaluate(*, now: datetime | None = None) -> dict[str, int]:
    """Judge every enabled rule on every run it watches: fire new breaches, resolve ended
    ones. Each (rule, run) in its own transaction, so one bad series does not stop the
    pass. Returns how many fired and resolved."""
    now = now or timezone.now()
    counts = {"fired": 0, "resolved": 0}
    for rule in alert_selectors.alert_rules_enabled():
        for run, attempt_id in alert_selectors.alert_rule_runs(rule=rule, now=now):
            try:
                outcome = alert_evaluate_one(rule=rule, run=run, attempt_id=attempt_id, now=now)
            except Exception:
                logger.exception("alert rule %s on run %s failed", rule.pk, run.pk)
                continue
            if outcome:
                counts[outcome] += 1
    return counts


def alert_evaluate_one(*, rule: AlertRule, run: Run, attempt_id: int, now: datetime) -> str | None:
    """Fire or resolve `rule` on `run` (its latest attempt `attempt_id`). Returns "fired",
    "resolved" or None (no change)."""
    spec = spec_of(rule)
    window_s = spec.baseline_s + spec.for_s + alert_maths.STALE_AFTER.total_seconds()
    rows = alert_selectors.recent_points(
        run_id=run.pk,
        attempt_id=attempt_id,
        metric=rule.metric,
        since=now - timedelta(seconds=window_s),
    )
    steps = {at: step for at, _, step in rows}
    found = alert_maths.breach([(at, value) for at, value, _ in rows], spec, now=now)
    open_firing = alert_selectors.alert_firing_open(rule=rule, run=run)
    if found is not None and open_firing is None:
        return "fired" if _fire(rule, run, attempt_id, found, steps, now) else None
    if found is None and open_firing is not None:
        _resolve(open_firing, rows, now)
        return "resolved"
    return None


@transaction.atomic
def _fire(
    rule: AlertRule,
    run: Run,
    attempt_id: int,
    found: alert_maths.Breach,
    steps: dict[datetime, int],
    now: datetime,
) -> AlertFiring | None:
    text = rule_text(rule)
    shown = _number(found.value)
    detail = f"{rule.metric} = {shown}"
    if found.limit is not None:
        detail += f" (limit {_number(found.limit)}"
        detail += f", median {_number(found.baseline)})" if found.baseline is not None else ")"
    annotation = Annotation.objects.create(
        run=run,
        time=found.since,
        step=steps.get(found.since),
        text=f"Alert {rule.name}: {text}. {detail}",
        tags=[ALERT_TAG, rule.severity],
    )
    try:
        with transaction.atomic():  # a savepoint: a concurrent pass may have fired it
            firing = AlertFiring.objects.create(
                rule=rule,
                run=run,
                attempt_id=attempt_id,
                since=found.since,
                fired_at=now,
                value=found.value if math.isfinite(found.value) else None,
                limit=found.limit,
                baseline=found.baseline,
                annotation=annotation,
            )
    except IntegrityError:
        annotation.delete()
        return None
    audit_record(
        project=rule.project,
        entity=AuditEvent.Entity.ALERT_RULE,
        object_id=rule.pk,
        user=None,
        action="fired",
        changes={
            "run": [None, run.name],
            "since": [None, found.since.isoformat()],
            "value": [None, shown],
        },
    )
    webhooks.alert_notify(firing=firing, text=text, detail=detail)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    return firing


@transaction.atomic
def _resolve(firing: AlertFiring, rows: list[tuple[datetime, float, int]], now: datetime) -> None:
    latest = max(rows, default=None)
    updated = AlertFiring.objects.filter(pk=firing.pk, resolved_at__isnull=True).update(
        resolved_at=now
    )
    if not updated:
        return
    firing.resolved_at = now
    if firing.annotation_id is not None:
        end_at = latest[0] if latest is not None else now
        Annotation.objects.filter(pk=firing.annotation_id).update(
            time_end=max(end_at, firing.since),
            step_end=latest[2] if latest is not None else None,
        )
    audit_record(
        project=firing.rule.project,
        entity=AuditEvent.Entity.ALERT_RULE,
        object_id=firing.rule_id,
        user=None,
        action="resolved",
        changes={"run": [firing.run.name, firing.run.name], "resolved_at": [None, now.isoformat()]},
    )
    webhooks.alert_notify(firing=firing, text=rule_text(firing.rule), detail="resolved")
    telemetry_services.run_data_version_bump(run_id=firing.run_id)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def runs_matching(pattern: str, names: list[str]) -> list[str]:
    """The run names a rule's pattern watches (for the form's preview)."""
    return [name for name in names if not pattern or fnmatchcase(name, pattern)]
