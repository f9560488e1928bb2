"""Celery tasks for notifications: thin, take ids, call a service, return what happened."""

from __future__ import annotations

from celery import shared_task

from logbook.selectors import webhooks as webhook_selectors
from logbook.services import hangs as hang_services
from logbook.services import stragglers as straggler_services
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
