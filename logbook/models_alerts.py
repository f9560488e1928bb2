"""Metric alert rules and their firings (logbook.services.alerts evaluates them). A module of
their own beside logbook.models, which imports them so Django registers them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from telemetry.models import Attempt, Run


class AlertRule(models.Model):
    """A project's alert on a metric of its runs (logbook.alert_maths): the metric below or
    above a limit, or not finite, for a duration; the limit a value or a fraction of the
    metric's own median over a baseline window. Evaluated by the beat
    (logbook.services.alerts); a firing pages the project's webhooks and marks the run's
    charts."""

    class Comparison(models.TextChoices):
        BELOW = "below", "below"
        ABOVE = "above", "above"
        NOT_FINITE = "not_finite", "is NaN or infinite"

    class ThresholdKind(models.TextChoices):
        VALUE = "value", "a value"
        MEDIAN_FRACTION = "median_fraction", "a fraction of its median"

    class Severity(models.TextChoices):
        # PagerDuty's four (Events API v2), which Opsgenie's priorities map onto.
        INFO = "info", "Info"
        WARNING = "warning", "Warning"
        ERROR = "error", "Error"
        CRITICAL = "critical", "Critical"

    project = models.ForeignKey(
        "telemetry.Project", on_delete=models.CASCADE, related_name="alert_rules"
    )
    name = models.CharField(max_length=100)
    metric = models.CharField(max_length=200)
    # Which runs: a shell-style pattern of run names (fnmatch); empty: every run.
    runs = models.CharField(max_length=200, blank=True)
    comparison = models.CharField(
        max_length=16, choices=Comparison.choices, default=Comparison.BELOW
    )
    threshold_kind = models.CharField(
        max_length=16, choices=ThresholdKind.choices, default=ThresholdKind.VALUE
    )
    threshold = models.FloatField(default=0.0)
    baseline_s = models.PositiveIntegerField(default=3600)
    for_s = models.PositiveIntegerField(default=120)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="alert_rule_unique_name"),
            models.CheckConstraint(
                condition=Q(baseline_s__gte=60) & Q(for_s__lte=86400),
                name="alert_rule_windows_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project}:{self.name}"


class AlertFiring(models.Model):
    """One time a rule's condition held on a run: from `since` (the first breaching point) to
    `resolved_at` (when it no longer held); at most one open per rule and run, so a rule fires
    once however often the beat evaluates it."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="firings")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alert_firings")
    attempt = models.ForeignKey(
        Attempt, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    since = models.DateTimeField()
    fired_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField(null=True)
    limit = models.FloatField(null=True, blank=True)
    baseline = models.FloatField(null=True, blank=True)
    # The mark on the run's charts (an annotation tagged "alert").
    annotation = models.ForeignKey(
        "logbook.Annotation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-fired_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "run"],
                condition=Q(resolved_at__isnull=True),
                name="alert_firing_one_open_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rule} on {self.run} at {self.fired_at:%Y-%m-%d %H:%M}"
