"""Reads of webhook deliveries: what the retry sweep sends next, and what the admins' page
shows."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max
from django.utils import timezone

from logbook.models import WebhookDelivery, WebhookEndpoint
from telemetry.models import Project


def deliveries_due(*, now: datetime | None = None, limit: int = 500) -> list[int]:
    """Pending deliveries whose next attempt is due: retries after their backoff, enqueues
    that were lost, claims whose worker died. Oldest due first."""
    now = now or timezone.now()
    due = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now
    ).order_by("next_attempt_at")
    return list(due.values_list("pk", flat=True)[:limit])


def last_delivery_times(*, project: Project) -> dict[int, datetime | None]:
    """Each endpoint's latest successful delivery (for the webhooks page)."""
    rows = (
        WebhookEndpoint.objects.filter(project=project)
        .annotate(last=Max("deliveries__delivered_at"))
        .values_list("pk", "last")
    )
    return dict(rows)
