"""Celery tasks of diagnosis: thin, take ids, call a service."""

from __future__ import annotations

from celery import shared_task

from diagnosis.services import slowdowns as slowdown_services


@shared_task(name="diagnosis.slowdowns_refresh", ignore_result=True, soft_time_limit=240)
def slowdowns_refresh_task() -> int:
    # Each pass reads only the runs whose data changed since the last one read them
    # (SlowdownScan), so a pass that runs late or fails skips nothing.
    return slowdown_services.slowdowns_refresh()
