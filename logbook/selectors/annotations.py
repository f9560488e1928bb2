"""Reads of annotations, scoped to the runs the user may see, and who may write them."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from logbook.models import Annotation
from telemetry.models import Membership, Project
from telemetry.selectors import User, projects_for_user, user_has_role

# PostgreSQL bigint: larger ids and steps cannot exist, so they are refused before a query.
MAX_BIGINT = 2**63 - 1


def annotations_for_user(*, user: User) -> QuerySet[Annotation]:
    return Annotation.objects.filter(run__project__in=projects_for_user(user=user)).select_related(
        "run__project", "created_by"
    )


def annotation_get_for_user(*, user: User, annotation_id: int) -> Annotation:
    """The annotation, if the user may see its run; 404 otherwise (never 403)."""
    if not 0 < annotation_id <= MAX_BIGINT:
        raise Http404("No such annotation.")
    annotation = annotations_for_user(user=user).filter(pk=annotation_id).first()
    if annotation is None:
        raise Http404("No such annotation.")
    return annotation


def user_may_annotate(*, user: User, project: Project) -> bool:
    """On-call engineers and admins of the project (and superusers) mark its charts."""
    return user_has_role(user=user, at_least=Membership.Role.ONCALL, project_id=project.pk)
