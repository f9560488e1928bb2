"""Projects and who may see them (memberships and their roles)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Project(models.Model):
    """A team's space. Runs, tokens and memberships belong to exactly one project."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Moves whenever what the fleet pages list for this project's runs changes (incidents and
    # the hardware they name, quarantines): their cached rows are keyed on it. Bumped by
    # telemetry.services.fleet_version_bump, in the transaction of the change.
    fleet_version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        ONCALL = "oncall", "On-call"
        ADMIN = "admin", "Admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"
