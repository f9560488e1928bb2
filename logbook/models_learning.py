"""Auto-triage's learned model, one row per project (logbook.triage_classifier): registered
with logbook's models (imported at the end of logbook.models), in a module of its own for
length."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from telemetry.models import Project


class TriageClassifier(models.Model):
    """A project's auto-triage classifier (logbook.triage_classifier): what its triaged
    incidents taught, trained by the worker (logbook.triage_classifier_train) and read by
    each suggestion. One row per project, replaced by each training; `model` is None while
    too few incidents of too few categories are triaged (the counts say how far it is)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="+")
    trained_at = models.DateTimeField()
    # Which triaged incidents it was trained on (a hash of their ids, categories and
    # messages): a training on unchanged data stores nothing (the task is idempotent).
    fingerprint = models.CharField(max_length=64)
    triaged = models.PositiveIntegerField()  # triaged incidents with a message, all read
    learned = models.PositiveIntegerField()  # of them, in categories with enough examples
    # {slug: triaged incidents}, every category read (the page shows what is not learned yet).
    categories = models.JSONField(default=dict)
    cv_right = models.PositiveIntegerField(null=True, blank=True)
    cv_total = models.PositiveIntegerField(null=True, blank=True)
    # Vocabulary, idf and weights as numbers (never pickled), or None (not enough to learn).
    model = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["project"]
        constraints = [
            models.CheckConstraint(
                condition=Q(cv_right__isnull=True, cv_total__isnull=True)
                | Q(cv_right__lte=F("cv_total")),
                name="triage_classifier_cv_right_of_total",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project_id}: {self.learned} of {self.triaged}"

    @property
    def cv_accuracy(self) -> float | None:
        return self.cv_right / self.cv_total if self.cv_total else None
