"""Celery tasks for notifications: thin, take ids, call a service, return what happened."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.db import OperationalError

from logbook.selectors import triage_learning as triage_learning_selectors
from logbook.selectors import webhooks as webhook_selectors
from logbook.services import alerts as alert_services
from logbook.services import autotriage as autotriage_services
from logbook.services import hangs as hang_services
from logbook.services import incident_groups as group_services
from logbook.services import stragglers as straggler_services
from logbook.services import triage_learning
from logbook.services import webhooks as webhook_services


@shared_task(
    name="logbook.webhook_deliver",
    ignore_result=True,
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
)
def webhook_deliver_task(delivery_pk: int) -> str:
    # Idempotent: the service claims the row with a conditional UPDATE, so a redelivered
    # message (acks_late) or the sweep racing this task sends at most once per attempt.
    return webhook_services.webhook_deliver(delivery_pk=delivery_pk)


@shared_task(name="logbook.webhooks_retry_due", ignore_result=True, soft_time_limit=240)
def webhooks_retry_due_task() -> int:
    # Enqueue rather than send here: one slow endpoint must not hold up the others.
    due = webhook_selectors.deliveries_due()
    for delivery_pk in due:
        webhook_services.delivery_enqueue(delivery_pk=delivery_pk)
    return len(due)


@shared_task(name="logbook.runs_stall_check", ignore_result=True, soft_time_limit=120)
def runs_stall_check_task() -> int:
    return webhook_services.run_stall_check()


@shared_task(name="logbook.rank_timings_refresh", ignore_result=True, soft_time_limit=240)
def rank_timings_refresh_task() -> int:
    # Each attempt resumes where its last pass left off, so a pass that runs late (a busy
    # worker) or fails skips nothing.
    return straggler_services.rank_timings_refresh()


@shared_task(name="logbook.hangs_check", ignore_result=True, soft_time_limit=120)
def hangs_check_task() -> int:
    return len(hang_services.hangs_check())


@shared_task(name="logbook.alerts_evaluate", ignore_result=True, soft_time_limit=120)
def alerts_evaluate_task() -> dict[str, int]:
    return alert_services.alerts_evaluate()


# Auto-triage tasks: idempotent (acks_late is safe), retried when the database blinks.
_TRIAGE_TASK = {
    "ignore_result": True,
    "acks_late": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": True,
    "max_retries": 3,
}


@shared_task(name="logbook.triage_suggest", soft_time_limit=30, time_limit=60, **_TRIAGE_TASK)
def triage_suggest_task(interruption_pk: int) -> str:
    # Idempotent: the same evidence stores the same suggestion, and a decided one is kept.
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption_pk)
    return suggestion.root_cause.slug if suggestion else "none"


@shared_task(name="logbook.triage_evidence", soft_time_limit=60, time_limit=90, **_TRIAGE_TASK)
def triage_evidence_task(event_pks: list[int]) -> int:
    return autotriage_services.suggestions_for_events(event_ids=event_pks)


@shared_task(name="logbook.triage_run_evidence", soft_time_limit=60, time_limit=90, **_TRIAGE_TASK)
def triage_run_evidence_task(run_pk: int, since: str, until: str | None) -> int:
    return autotriage_services.suggestions_for_run(
        run_id=run_pk,
        since=datetime.fromisoformat(since),
        until=datetime.fromisoformat(until) if until else None,
    )


@shared_task(
    name="logbook.triage_rules_changed", soft_time_limit=240, time_limit=300, **_TRIAGE_TASK
)
def triage_rules_changed_task(project_pk: int) -> int:
    # Idempotent: remaking a pending suggestion with the same rules stores the same one.
    return triage_learning.suggestions_remake(project_id=project_pk)


@shared_task(
    name="logbook.incident_groups_refresh", soft_time_limit=60, time_limit=90, **_TRIAGE_TASK
)
def incident_groups_refresh_task(interruption_pk: int) -> int:
    # Idempotent: the same incidents and topology leave the same groups.
    return len(group_services.incident_groups_refresh(interruption_id=interruption_pk))


# Training reads every triaged incident of the project and fits a small model (seconds at
# most); cross-validation fits it CV_FOLDS more times. Idempotent (unchanged data stores
# nothing), so acks_late and retries are safe.
@shared_task(
    name="logbook.triage_classifier_train", soft_time_limit=240, time_limit=300, **_TRIAGE_TASK
)
def triage_classifier_train_task(project_pk: int) -> str:
    before = triage_learning_selectors.classifier_of(project_id=project_pk)
    row = triage_learning.classifier_train(project_id=project_pk)
    if row is None:
        return "none"
    if before is None or before.fingerprint != row.fingerprint:
        triage_learning.suggestions_remake(project_id=project_pk)
    return f"{row.learned}/{row.triaged}"


@shared_task(name="logbook.triage_classifiers_refresh", ignore_result=True, soft_time_limit=600)
def triage_classifiers_refresh_task() -> int:
    """Every project with triaged incidents: a training whose enqueue was lost, or a category
    corrected after triage, is picked up here (unchanged projects cost one read)."""
    projects = triage_learning_selectors.projects_with_triage()
    for project_pk in projects:
        triage_classifier_train_task.delay(project_pk)
    return len(projects)
