"""Reads of ingest batches: the sweeper's work queue, the dead letters, a resend's original
and the backlog the fair share is measured against."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from ingest.models import IngestBatch
from telemetry.models import Project


def batches_pending_before(*, cutoff: datetime, limit: int) -> QuerySet[IngestBatch]:
    """Pending batches received before `cutoff`, oldest first (uses batch_pending_idx)."""
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING, received_at__lt=cutoff)[
        :limit
    ]


def batches_dead(*, project: Project) -> QuerySet[IngestBatch]:
    """The project's dead batches, newest first (uses batch_dead_idx); the body stays unread."""
    return (
        IngestBatch.objects.filter(project=project, status=IngestBatch.Status.DEAD)
        .select_related("token")
        .defer("body")
        .order_by("-received_at")
    )


def batch_accepted_get(*, project_id: int, batch_id: str) -> IngestBatch | None:
    """The project's batch of that id if one was accepted, without its body (the unique
    constraint batch_unique_id's index)."""
    return (
        IngestBatch.objects.filter(project_id=project_id, batch_id=batch_id).defer("body").first()
    )


def batch_backlog_count() -> int:
    return IngestBatch.objects.filter(status=IngestBatch.Status.PENDING).count()


def batch_project_pending_over(*, batch_pk: int, share: int) -> bool:
    """Whether the batch's project has more than `share` batches pending (this one among
    them); counts no further than share + 1."""
    project_id = IngestBatch.objects.filter(pk=batch_pk).values("project_id")[:1]
    pending = IngestBatch.objects.filter(
        project_id__in=project_id, status=IngestBatch.Status.PENDING
    )
    return pending[: share + 1].count() > share
