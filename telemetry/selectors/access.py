"""The permission-checked getters every app reads through: the projects a user is a member
of, the role they hold there, and the project or run a user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from telemetry.models import Membership, Project, Run

User = AbstractBaseUser | AnonymousUser


def projects_for_user(*, user: User) -> QuerySet[Project]:
    """Projects the user is a member of, in any role; all for superusers."""
    return projects_with_role(user=user, at_least=Membership.Role.VIEWER)


# Each role may do what the ones before it may: a permission is "at least role R".
ROLE_ORDER = (Membership.Role.VIEWER, Membership.Role.ONCALL, Membership.Role.ADMIN)


def projects_with_role(*, user: User, at_least: str) -> QuerySet[Project]:
    """Projects where the user holds at least the role `at_least`; all for superusers."""
    if not user.is_authenticated:
        return Project.objects.none()
    if getattr(user, "is_superuser", False):
        return Project.objects.all()
    roles = ROLE_ORDER[ROLE_ORDER.index(at_least) :]
    memberships = Membership.objects.filter(user=user, role__in=roles)
    return Project.objects.filter(pk__in=memberships.values("project_id"))


def user_has_role(*, user: User, at_least: str, project_id: int | None = None) -> bool:
    """Whether the user holds at least the role `at_least` in the project (in any project,
    when project_id is None): the one permission check of the HTML pages and the APIs."""
    projects = projects_with_role(user=user, at_least=at_least)
    if project_id is not None:
        projects = projects.filter(pk=project_id)
    return projects.exists()


def project_get_for_admin(*, user: User, slug: str) -> Project:
    """The project, if the user administers it: 404 when not a member, 403 when a member
    without the admin role."""
    project = projects_for_user(user=user).filter(slug=slug).first()
    if project is None:
        raise Http404("No such project.")
    if not user_has_role(user=user, at_least=Membership.Role.ADMIN, project_id=project.pk):
        raise PermissionDenied("Only the project's admins can do this.")
    return project


def project_members(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user").order_by("user__username")


def run_get_for_user(*, user: User, run_id: int) -> Run:
    """The run, if the user may see it; 404 otherwise (never 403: do not confirm it exists)."""
    run = (
        Run.objects.filter(pk=run_id, project__in=projects_for_user(user=user))
        .select_related("project")
        .first()
    )
    if run is None:
        raise Http404("No such run.")
    return run
