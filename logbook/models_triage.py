"""Auto-triage's rules (logbook.models imports them so Django registers them). Apart from
models.py only for its length; relations by name, so this module imports no other model."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from logbook.safe_patterns import pattern_problem


class TriageRule(models.Model):
    """One rule auto-triage weighs (logbook.autotriage): a message pattern (RE2, searched
    case-insensitively in the interruption's message), an XID code, or a DCGM event kind,
    pointing at a category with a weight. The built-in rules are site-wide rows seeded by
    migrations (`builtin`, each citing its `source`); superusers add site-wide rules, project
    admins their project's own (TriageRuleSetting disables or re-weights a site-wide rule for
    one project). Read on every suggestion: no deploy, no cache."""

    class Kind(models.TextChoices):
        MESSAGE = "message", "Message pattern"
        XID = "xid", "XID code"
        DCGM = "dcgm", "DCGM event kind"

    project = models.ForeignKey(
        "telemetry.Project",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: site-wide (superusers only)",
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.MESSAGE)
    name = models.SlugField(max_length=64)
    pattern = models.CharField(
        max_length=500, blank=True, help_text="RE2 regular expression (message rules)"
    )
    xid = models.PositiveIntegerField(null=True, blank=True)
    dcgm_kind = models.CharField(max_length=32, blank=True)
    root_cause = models.ForeignKey("logbook.RootCause", on_delete=models.PROTECT, related_name="+")
    component = models.CharField(max_length=200, blank=True)
    # How sure a match alone makes the category (the built-ins use 0.1 to 0.95).
    weight = models.FloatField(default=0.7)
    enabled = models.BooleanField(default=True)
    source = models.CharField(max_length=500, blank=True, help_text="Where the rule comes from")
    builtin = models.BooleanField(default=False)
    # Message rules are read in this order (the built-ins' order, then the added ones').
    position = models.PositiveIntegerField(default=1000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(weight__gt=0) & Q(weight__lte=1),
                name="triage_rule_weight_in_unit_range",
            ),
            models.CheckConstraint(
                condition=(Q(kind="message") & ~Q(pattern=""))
                | (Q(kind="xid") & Q(xid__isnull=False))
                | (Q(kind="dcgm") & ~Q(dcgm_kind="")),
                name="triage_rule_kind_has_its_key",
            ),
            models.UniqueConstraint(
                fields=["name"], condition=Q(project__isnull=True), name="triage_rule_site_name"
            ),
            models.UniqueConstraint(
                fields=["project", "name"],
                condition=Q(project__isnull=False),
                name="triage_rule_project_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} -> {self.root_cause_id}"

    def clean(self) -> None:
        # A pattern RE2 cannot compile would be skipped by the rules: refuse it at save.
        if self.kind == self.Kind.MESSAGE and (problem := pattern_problem(self.pattern)):
            raise ValidationError({"pattern": problem})


class TriageRuleSetting(models.Model):
    """A project's change to a site-wide rule: disabled for it, or weighed differently.
    Other projects read the rule as it is."""

    project = models.ForeignKey("telemetry.Project", on_delete=models.CASCADE, related_name="+")
    rule = models.ForeignKey(
        "logbook.TriageRule", on_delete=models.CASCADE, related_name="settings"
    )
    enabled = models.BooleanField(default=True)
    weight = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "rule"], name="triage_rule_setting_unique"),
            models.CheckConstraint(
                condition=Q(weight__isnull=True) | (Q(weight__gt=0) & Q(weight__lte=1)),
                name="triage_rule_setting_weight_in_unit_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project_id}: {self.rule_id} enabled={self.enabled} weight={self.weight}"
