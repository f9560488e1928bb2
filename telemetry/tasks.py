"""Celery tasks for telemetry: thin, call a service."""

from __future__ import annotations

from celery import shared_task

from telemetry.services import device_samples, rank_timings


@shared_task(name="telemetry.rank_partitions_maintain", ignore_result=True, soft_time_limit=120)
def rank_partitions_maintain_task() -> int:
    # Idempotent: creating a partition that exists is skipped, dropping only expired ones.
    created, dropped = rank_timings.rank_partitions_maintain()
    return len(created) + len(dropped)


@shared_task(
    name="telemetry.device_sample_partitions_maintain", ignore_result=True, soft_time_limit=120
)
def device_sample_partitions_maintain_task() -> int:
    # Idempotent, like the rank timings' upkeep: raw DCGM samples, daily partitions.
    created, dropped = device_samples.device_sample_partitions_maintain()
    return len(created) + len(dropped)
