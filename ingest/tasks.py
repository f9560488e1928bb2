"""Celery tasks for ingest: thin, take ids, call a service."""

from __future__ import annotations

import random

from celery import Task, shared_task
from django.db import OperationalError

from ingest import services


@shared_task(
    name="ingest.batch_process", bind=True, ignore_result=True, acks_late=True, max_retries=None
)
def batch_process_task(self: Task, batch_pk: int) -> str:
    try:
        return services.batch_process(batch_pk=batch_pk)
    except OperationalError as exc:
        if not services.is_retryable(exc):
            raise
        # Soon, and out of step with the other transaction. batch_process counts every try
        # against INGEST_MAX_PROCESS_ATTEMPTS, so this ends, at worst with the batch dead.
        raise self.retry(exc=exc, countdown=random.uniform(0.05, 0.5)) from exc


@shared_task(name="ingest.batches_sweep", ignore_result=True)
def batches_sweep_task() -> int:
    return services.batches_sweep()
