"""The permission-checked getters every app reads through: the projects a user is a member
of, and the project or run a user may see. Reads by topic live beside this module: `series`
(metric series, downsampled) and `dcgm` (GPU health from dcgm-exporter)."""

from __future__ import annotations

import math

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.http import Http404
from django.utils import timezone

from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Membership, MetricPoint, MetricSeries, Project, Run

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


def run_name(*, run_id: int) -> str:
    """A run's name by its id: one small statement without a model instance, for ingest's
    per-request paths (the MLflow path reads it once a log-batch, ~0.1 ms where the ORM's
    `.get()` took ~0.35 ms of web CPU)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT name FROM {Run._meta.db_table} WHERE id = %s", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    return str(row[0])


def attempt_last_step(*, run_id: int, number: int) -> int | None:
    """The highest step attempt `number` of the run logged a metric for (None: none yet):
    each of its series' last step through the points' primary key (a backward scan each),
    never a scan of the points."""
    last = MetricPoint.objects.filter(series=OuterRef("pk")).order_by("-step").values("step")[:1]
    steps = (
        MetricSeries.objects.filter(run_id=run_id, attempt__number=number)
        .annotate(last=Subquery(last))
        .values_list("last", flat=True)
    )
    found = [step for step in steps if step is not None]
    return max(found) if found else None


def projects_live_version(*, user: User) -> str:
    """What the run list, triage queue and fleet health poll: one figure that changes when any
    run or the fleet of the user's projects changes (a new run adds to the count). Pages put
    it in their HTML, read before their data: a change committed between the page's drawing
    and its first poll then still moves it (the first poll used to take its figure as the
    starting point, and such a change was never shown)."""
    projects = projects_for_user(user=user).values("pk")
    fleet = Project.objects.filter(pk__in=projects).aggregate(v=Sum("fleet_version"))["v"]
    # Runs that went silent change what the lists show without any write: counted, so an
    # open list redraws when one crosses the stall threshold.
    quiet_before = timezone.now() - RUN_STALL_AFTER
    runs = Run.objects.filter(project__in=projects).aggregate(
        n=Count("pk"),
        v=Sum("data_version"),
        silent=Count("pk", filter=Q(last_seen_at__lt=quiet_before)),
    )
    return f"{fleet or 0}.{runs['n']}.{runs['v'] or 0}.{runs['silent']}"


def json_number(value: float) -> float | str:
    """A measured value in JSON, which has no NaN or Infinity: those as the strings ingest
    accepts (and MLflow writes). Derived figures without a value are null instead (the
    policy: docs/ingest.md, "NaN and infinities in what Chronicle answers")."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
