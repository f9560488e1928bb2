"""Celery tasks for ingest: thin, take ids, call a service."""

from __future__ import annotations

from celery import shared_task

from ingest import services


@shared_task(name="ingest.batch_process", ignore_result=True, acks_late=True)
def batch_process_task(batch_pk: int) -> str:
    return services.batch_process(batch_pk=batch_pk)


@shared_task(name="ingest.batches_sweep", ignore_result=True)
def batches_sweep_task() -> int:
    return services.batches_sweep()
