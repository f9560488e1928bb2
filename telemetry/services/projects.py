"""Writes for projects and who belongs to them (a project always keeps an admin)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from telemetry.models import Membership, Project


def project_ensure(*, slug: str, name: str) -> tuple[Project, bool]:
    """The project with this slug, created with `name` if missing; and whether it was."""
    return Project.objects.get_or_create(slug=slug, defaults={"name": name})


def membership_set(
    *, project: Project, username: str, role: str, may_add: bool = True
) -> Membership:
    """Add the user to the project with `role`, or change their role. Refuses to leave the
    project without an admin. `may_add` False: only members' roles change, and whether a
    non-member user exists is not said (PROJECT_ADMINS_ADD_EXISTING_USERS off)."""
    from django.contrib.auth import get_user_model

    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    user = get_user_model().objects.filter(username=username).first()
    member = user is not None and Membership.objects.filter(project=project, user=user).exists()
    if not may_add and not member:
        raise ValidationError(
            {
                "username": f"{username!r} is not a member of this project. On this site only "
                "a site administrator adds users to a project."
            }
        )
    if user is None:
        raise ValidationError({"username": f"No user named {username!r}."})
    with transaction.atomic():
        membership, _ = Membership.objects.select_for_update().get_or_create(
            project=project, user=user, defaults={"role": role}
        )
        if membership.role != role:
            _keep_an_admin(project=project, leaving=membership, new_role=role)
            membership.role = role
            membership.save(update_fields=["role"])
    return membership


def membership_remove(*, membership: Membership) -> None:
    with transaction.atomic():
        _keep_an_admin(project=membership.project, leaving=membership, new_role=None)
        membership.delete()


def _keep_an_admin(*, project: Project, leaving: Membership, new_role: str | None) -> None:
    if leaving.role != Membership.Role.ADMIN or new_role == Membership.Role.ADMIN:
        return
    others = (
        Membership.objects.select_for_update()
        .filter(project=project, role=Membership.Role.ADMIN)
        .exclude(pk=leaving.pk)
    )
    if not others.exists():
        raise ValidationError({"role": "A project needs at least one admin."})
