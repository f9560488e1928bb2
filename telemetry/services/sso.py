"""Single sign-on's writes: the user an identity logs in as, and their memberships of the
projects the group mapping manages (telemetry.sso), set at every login."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from telemetry import sso
from telemetry.models import Membership, Project, SsoIdentity

USERNAME_MAX = 150


def sso_user_create(*, issuer: str, subject: str, username: str, email: str) -> Any:
    """A new user for the identity: the provider's preferred name where no account has it
    (else the name with -2, -3...: a local account of the same name is never reused), no
    usable password (they log in through the provider only)."""
    users = get_user_model().objects
    base = (username or subject)[: USERNAME_MAX - 4]
    name, n = base, 1
    with transaction.atomic():
        while users.filter(username=name).exists():
            n += 1
            name = f"{base}-{n}"
        user = users.create(username=name, email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    return user


def sso_login_sync(
    *,
    user: Any,
    groups: Iterable[str],
    mapping: Iterable[sso.GroupRole],
    email: str | None = None,
) -> dict[str, str]:
    """Set the user's memberships of every managed project from their groups: added with
    the role the groups give, the role changed, or removed when no group gives one. Projects
    the mapping names that do not exist yet are skipped (an admin creates them). Returns
    {project slug: role} as now stored for the managed projects. The provider is the
    authority here, so the last admin of a managed project can be removed by it (a superuser
    can still add one)."""
    mapping = tuple(mapping)
    groups = sorted(set(groups))
    wanted = sso.roles_for(groups, mapping)
    managed = sso.managed_projects(mapping)
    with transaction.atomic():
        projects = {p.slug: p for p in Project.objects.filter(slug__in=managed)}
        current = {
            m.project.slug: m
            for m in Membership.objects.select_for_update()
            .select_related("project")
            .filter(user=user, project__slug__in=managed)
        }
        for slug, project in projects.items():
            role = wanted.get(slug)
            membership = current.get(slug)
            if role is None and membership is not None:
                membership.delete()
            elif role is not None and membership is None:
                Membership.objects.create(project=project, user=user, role=role)
            elif role is not None and membership is not None and membership.role != role:
                membership.role = role
                membership.save(update_fields=["role"])
        SsoIdentity.objects.filter(user=user).update(groups=groups)
        if email is not None and user.email != email:
            user.email = email
            user.save(update_fields=["email"])
    return {slug: wanted[slug] for slug in projects if slug in wanted}
