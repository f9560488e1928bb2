"""Auto-triage writes: make (or remake) the suggestion of one interruption in the worker,
enqueue that after the interruption or new evidence is committed, and confirm a suggestion
in one audited step. The rules themselves are logbook.autotriage (pure); the evidence is
read by logbook.selectors.triage."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from logbook import autotriage, triage_semantic
from logbook.models import IncidentSource, Interruption, RootCause, TriageSuggestion
from logbook.selectors import triage as triage_selectors
from logbook.services import triage, triage_learning
from logbook.taxonomy import UNKNOWN_SLUG
from logbook.triage_unexplained import unexplained_suggestion
from telemetry import services as telemetry_services
from telemetry.selectors import health_events as health_selectors

logger = logging.getLogger(__name__)

# What a stored suggestion keeps: the strongest evidence and the likeliest culprits.
EVIDENCE_KEPT = 12
HOSTS_KEPT = 16
DEVICES_KEPT = 32


def suggestion_make(
    *, interruption_id: int, now: datetime | None = None
) -> TriageSuggestion | None:
    """(Re)compute the suggestion of an open, unexpected interruption and store it; a decided
    one (confirmed or overridden) is left as it was. Returns the stored suggestion, or None
    when the interruption is gone, planned, no longer open, or nothing points anywhere (an
    earlier pending suggestion is then removed). Idempotent: the same evidence stores the
    same suggestion."""
    now = now or timezone.now()
    with transaction.atomic():
        # The row lock makes two workers remaking the same suggestion take turns.
        interruption = (
            Interruption.objects.select_for_update(of=("self",))
            .select_related("run")
            .filter(pk=interruption_id)
            .first()
        )
        if interruption is None or interruption.planned:
            return None
        existing = TriageSuggestion.objects.filter(interruption=interruption).first()
        if existing is not None and existing.outcome != TriageSuggestion.Outcome.PENDING:
            return existing
        if interruption.status != Interruption.Status.OPEN:
            return existing
        project_id = interruption.run.project_id
        names = triage_selectors.category_names(project_id=project_id)
        result = autotriage.suggest(
            triage_selectors.incident_facts(interruption),
            triage_selectors.evidence_for(interruption=interruption),
            rules=triage_selectors.rule_book(project_id=project_id),
            names=names,
            votes=_votes(interruption, names),
        )
        if (
            result is None
            and IncidentSource.objects.filter(
                interruption=interruption, kind=IncidentSource.Kind.MLFLOW
            ).exists()
        ):
            # MLflow's FAILED says nothing of why; still say where to look.
            result = unexplained_suggestion(
                occurred_at=interruption.occurred_at,
                step=interruption.step,
                source="MLflow",
                run_url=reverse("dashboard:run-detail", args=[interruption.run_id]),
            )
        if result is None:
            if existing is not None:
                existing.delete()
                _pages_refresh(interruption)
            return None
        visible = triage_selectors.root_causes_visible(project_id=project_id)
        root_cause = (
            visible.filter(slug=result.category).first()
            or visible.filter(slug=UNKNOWN_SLUG, project__isnull=True).first()
            or RootCause.objects.get(slug=UNKNOWN_SLUG, project__isnull=True)
        )
        values: dict[str, Any] = {
            "root_cause": root_cause,
            "component": result.component[:200],
            "hosts": result.hosts[:HOSTS_KEPT],
            "devices": result.devices[:DEVICES_KEPT],
            "confidence": result.confidence,
            "evidence": [item.as_json() for item in result.evidence[:EVIDENCE_KEPT]],
            "note": result.note,
            "made_at": now,
        }
        unchanged = existing is not None and all(
            getattr(existing, name) == value for name, value in values.items() if name != "made_at"
        )
        if unchanged:
            return existing
        suggestion, _created = TriageSuggestion.objects.update_or_create(
            interruption=interruption,
            defaults=values,
            create_defaults={**values, "first_made_at": now},
        )
        _pages_refresh(interruption)
        return suggestion


def _votes(interruption: Interruption, names: dict[str, str]) -> list[autotriage.EvidenceItem]:
    """The learned opinions of the message: the project's own classifier when it votes (it
    knows this fleet), else the public messages' reading by meaning (logbook.triage_semantic),
    which never stops the rules: without its model package, or failing, it is left out. That
    reading is of a job's own words: a message Chronicle wrote for a source that gives no
    reason (MLflow's FAILED, "see the job's logs") is not read for a cause."""
    votes = triage_learning.vote_evidence(interruption=interruption, names=names)
    if votes:
        return votes
    job_said = IncidentSource.objects.filter(
        interruption=interruption, kind=IncidentSource.Kind.JOB
    ).exists()
    if not job_said:
        return []
    try:
        return triage_semantic.vote_evidence(interruption.message, interruption.occurred_at, names)
    except Exception:
        logger.exception("semantic vote on interruption %s failed", interruption.pk)
        return []


def _pages_refresh(interruption: Interruption) -> None:
    # The queue and run pages are cached per project/run version.
    telemetry_services.run_data_version_bump(run_id=interruption.run_id)
    telemetry_services.fleet_version_bump(project_id=interruption.run.project_id)


def rules_changed(*, project_id: int) -> None:
    """A project's rules changed (a rule switched off, re-weighted, added or removed): after
    commit, the worker remakes the project's pending suggestions, so the queue reads as the
    rules now do, not as they did when each was made."""
    transaction.on_commit(lambda: _publish("rules", project_id))


def suggestion_enqueue(*, interruption_id: int) -> None:
    """After the current transaction commits, have the worker make the suggestion (never in
    the request that stored the interruption)."""
    transaction.on_commit(lambda: _publish("suggest", interruption_id))


def evidence_arrived(*, event_ids: Sequence[int]) -> None:
    """New GPU health events were stored: after commit, the worker remakes the suggestions of
    the interruptions whose window they fall in."""
    if event_ids:
        ids = list(event_ids)
        transaction.on_commit(lambda: _publish("evidence", ids))


def run_evidence_arrived(*, run_id: int, since: datetime, until: datetime | None = None) -> None:
    """A straggler or SDC record of the run was stored: after commit, the worker remakes the
    suggestions of the run's open interruptions that occurred since (until) then."""
    window = [run_id, since.isoformat(), until.isoformat() if until else None]
    transaction.on_commit(lambda: _publish("run", window))


def suggestions_for_run(*, run_id: int, since: datetime, until: datetime | None) -> int:
    """Remake the suggestions of the run's open interruptions in the window; how many."""
    remade = 0
    for interruption_id in triage_selectors.interruptions_open_of_run(
        run_id=run_id, since=since, until=until
    ):
        if suggestion_make(interruption_id=interruption_id) is not None:
            remade += 1
    return remade


def _publish(what: str, payload: Any) -> None:
    """Publish a task; a failed publish is logged, not raised (the interruption is stored;
    the next evidence or a manual triage still works)."""
    from logbook import tasks  # tasks import this module

    try:
        if what == "suggest":
            tasks.triage_suggest_task.delay(payload)
        elif what == "run":
            tasks.triage_run_evidence_task.delay(*payload)
        elif what == "rules":
            tasks.triage_rules_changed_task.delay(payload)
        else:
            tasks.triage_evidence_task.delay(payload)
    except Exception:
        logger.exception("could not enqueue auto-triage (%s %s)", what, payload)


def suggestions_for_events(*, event_ids: Sequence[int]) -> int:
    """Remake the suggestions the events may change; returns how many were remade."""
    events = health_selectors.health_events_by_id(event_ids=event_ids)
    remade = 0
    for interruption_id in triage_selectors.interruptions_near_events(events=events):
        if suggestion_make(interruption_id=interruption_id) is not None:
            remade += 1
    return remade


@transaction.atomic
def suggestion_confirm(*, interruption: Interruption, user: Any, version: int) -> Interruption:
    """On-call's one click: file the incident under the suggested category, component,
    hosts and devices, and mark it triaged; both steps are audited like any triage edit
    (incident_transition records the suggestion as confirmed). Raises triage.StaleEdit if the
    incident moved past `version`, ValidationError if there is nothing to confirm."""
    suggestion = (
        TriageSuggestion.objects.select_related("root_cause")
        .filter(interruption=interruption, outcome=TriageSuggestion.Outcome.PENDING)
        .first()
    )
    if suggestion is None:
        raise ValidationError("There is no pending suggestion to confirm.")
    changes: dict[str, Any] = {
        "root_cause": suggestion.root_cause,
        "component": suggestion.component,
    }
    if suggestion.hosts:
        changes["hosts"] = suggestion.hosts
    if suggestion.devices:
        changes["devices"] = suggestion.devices
    updated = triage.incident_update(
        interruption=interruption, user=user, version=version, changes=changes
    )
    return triage.incident_transition(
        interruption=updated,
        user=user,
        version=updated.version,
        status=Interruption.Status.TRIAGED,
    )
