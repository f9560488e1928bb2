"""Project webhooks: the endpoints, and each delivery with its attempts."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class WebhookEndpoint(models.Model):
    """Where a project's notifications go (Slack-compatible JSON)."""

    class Event(models.TextChoices):
        INTERRUPTION = "interruption", "New unexpected interruption"
        SDC_CONFIRMED = "sdc_confirmed", "SDC confirmed"
        RUN_STALLED = "run_stalled", "Run stopped reporting"
        ALERT = "alert", "Metric alert rule fired"
        SLOWDOWN = "slowdown", "Costly slowdown"

    class Format(models.TextChoices):
        # What the body looks like (logbook.webhook_formats): Slack's incoming-webhook JSON
        # (which Mattermost, Teams connectors and plain receivers also read), PagerDuty's
        # Events API v2, Opsgenie's Alert API.
        SLACK = "slack", "Slack-compatible JSON"
        PAGERDUTY = "pagerduty", "PagerDuty Events API v2"
        OPSGENIE = "opsgenie", "Opsgenie Alert API"

    project = models.ForeignKey(
        "telemetry.Project", on_delete=models.CASCADE, related_name="webhooks"
    )
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=1000)
    events = models.JSONField(default=list, help_text="Event kinds to send; empty: all.")
    enabled = models.BooleanField(default=True)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.SLACK)
    # PagerDuty's integration (routing) key or Opsgenie's API key: added to each request when
    # it is sent, never stored in a delivery's payload (admins read those).
    secret = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]

    def __str__(self) -> str:
        return f"{self.project}:{self.name}"


class WebhookDelivery(models.Model):
    """One notification to one endpoint, retried until delivered or given up; its outcome is
    shown to the project's admins."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (gave up)"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=16, choices=WebhookEndpoint.Event.choices)
    # What the notification is about, so an event is delivered once per endpoint.
    event_key = models.CharField(max_length=200)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "event_key"], name="delivery_unique_event_per_endpoint"
            ),
        ]
        indexes = [
            # The retry sweep: pending deliveries that are due.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="delivery_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.event} {self.status}"
