"""Auto-triage's suggestion for an interruption: the root cause it proposes and why."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from logbook.models.incidents import Interruption, RootCause


class TriageSuggestion(models.Model):
    """What auto-triage suggests for one unexpected interruption (logbook.autotriage), made
    by the worker when the interruption is stored and again when evidence arrives in its
    window, until on-call decides: confirming takes it, triaging to another category
    overrides it. Decided suggestions are kept as they were, for the accuracy page."""

    class Outcome(models.TextChoices):
        PENDING = "pending", "Not yet triaged"
        CONFIRMED = "confirmed", "Confirmed"
        OVERRIDDEN = "overridden", "Overridden"

    interruption = models.OneToOneField(
        Interruption, on_delete=models.CASCADE, related_name="suggestion"
    )
    root_cause = models.ForeignKey(RootCause, on_delete=models.PROTECT, related_name="+")
    component = models.CharField(max_length=200, blank=True)
    hosts = models.JSONField(default=list, blank=True)  # host names, culprit first
    devices = models.JSONField(default=list, blank=True)  # device UUIDs
    confidence = models.FloatField()
    # [{"kind", "at", "text", "url"}, ...], what supports the category first.
    evidence = models.JSONField(default=list, blank=True)
    # Where the message and the evidence disagree, which was believed and why.
    note = models.TextField(blank=True)
    first_made_at = models.DateTimeField()
    made_at = models.DateTimeField()
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.PENDING)
    # The category on-call triaged it as (the suggested one when confirmed).
    decided_root_cause = models.ForeignKey(
        RootCause, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-made_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                name="triage_suggestion_confidence_in_unit_range",
            ),
            models.CheckConstraint(
                condition=Q(outcome="pending", decided_at__isnull=True)
                | (~Q(outcome="pending") & Q(decided_at__isnull=False)),
                name="triage_suggestion_decided_has_time",
            ),
            models.CheckConstraint(
                condition=Q(made_at__gte=F("first_made_at")),
                name="triage_suggestion_made_after_first",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.interruption_id}: {self.root_cause_id} ({self.confidence:.2f})"
