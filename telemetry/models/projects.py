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


class SsoIdentity(models.Model):
    """The single sign-on identity a user logs in with: the identity provider (its issuer)
    and the provider's subject for them. Logins are matched on this pair, never on a name or
    an e-mail address the provider lets users choose, so an identity cannot take over a
    local account of the same name (local accounts, the break-glass superuser among them,
    have none)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    # The groups the provider named at the last login (what the memberships were set from).
    groups = models.JSONField(default=list)
    last_login_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
