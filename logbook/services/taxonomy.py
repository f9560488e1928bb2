"""Writes to the root-cause taxonomy: seeding the shipped rows (and auto-triage's shipped
rules with them), resolving a job's category to a row of its project's taxonomy, adding
categories (a project's own, or site-wide by a superuser), editing one and deleting those
no incident names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from logbook.models import AuditEvent, Interruption, RootCause
from logbook.runbooks import RUNBOOKS
from logbook.services.audit import audit_record
from logbook.services.triage_rules import triage_rules_seed
from logbook.taxonomy import FAMILY_OF, ROOT_CAUSE_SEEDS, UNKNOWN_SLUG
from telemetry import services as telemetry_services
from telemetry.models import Project


def root_causes_seed() -> int:
    """Create the shipped taxonomy rows that are missing, and auto-triage's shipped rules
    (tests use it after a flush, as the data migrations did); rows admins edited are left
    alone. Returns how many categories were created."""
    existing = set(RootCause.objects.filter(project__isnull=True).values_list("slug", flat=True))
    missing = [
        RootCause(
            slug=seed.slug,
            name=seed.name,
            group=seed.group,
            family=FAMILY_OF.get(seed.slug, RootCause.Family.SOFTWARE),
            is_hardware=seed.is_hardware,
            is_planned=seed.is_planned,
            runbook=RUNBOOKS.get(seed.slug, ""),
        )
        for seed in ROOT_CAUSE_SEEDS
        if seed.slug not in existing
    ]
    RootCause.objects.bulk_create(missing, ignore_conflicts=True)
    triage_rules_seed()
    return len(missing)


def root_cause_resolve(*, category: str, project_id: int | None = None) -> RootCause:
    """The taxonomy row a job's category names (slug or name, any case), among the
    site-wide rows and its project's own (another project's categories never capture it);
    "unknown" when it names none, so an interruption is never dropped for a mismatch."""
    text = category.strip() or UNKNOWN_SLUG
    lookup = Q(slug__iexact=text) | Q(name__iexact=text)
    scope = Q(project__isnull=True)
    if project_id is not None:
        scope |= Q(project_id=project_id)
    # The project's own row first, where both match.
    found = RootCause.objects.filter(scope).filter(lookup).order_by("project_id")
    match = found.exclude(project__isnull=True).first() or found.first()
    unknown = Q(slug=UNKNOWN_SLUG, project__isnull=True)
    if match is None and not RootCause.objects.filter(unknown).exists():
        # The shipped rows are gone (a flushed database): restore them rather than file
        # every interruption under a category that does not exist.
        root_causes_seed()
        match = RootCause.objects.filter(scope).filter(lookup).first()
    return match or RootCause.objects.get(unknown)


@transaction.atomic
def root_cause_create(
    *,
    name: str,
    slug: str,
    group: str,
    project: Project | None,
    family: str = RootCause.Family.SOFTWARE,
    is_hardware: bool = False,
    is_planned: bool = False,
    description: str = "",
    runbook: str = "",
    user: Any = None,
) -> RootCause:
    """Add a category: a project's own (its forms, its jobs' reports and its suggestions
    alone see it), or site-wide with `project` None (callers let only superusers do that).
    A project's category may not reuse a site-wide slug or name. Audited under the project."""
    site = RootCause.objects.filter(project__isnull=True)
    if project is not None and site.filter(Q(slug=slug) | Q(name__iexact=name)).exists():
        raise ValidationError("A site-wide category already has that slug or name.")
    same = RootCause.objects.filter(project=project) if project else site
    if same.filter(Q(slug=slug) | Q(name__iexact=name)).exists():
        raise ValidationError("A category of that slug or name exists already.")
    cause = RootCause.objects.create(
        project=project,
        name=name,
        slug=slug,
        group=group,
        family=family,
        is_hardware=is_hardware,
        is_planned=is_planned,
        description=description,
        runbook=runbook,
    )
    audit_record(
        project=project,
        entity=AuditEvent.Entity.ROOT_CAUSE,
        object_id=cause.pk,
        user=user,
        action="create",
        changes={"slug": [None, slug], "name": [None, name], "family": [None, family]},
    )
    return cause


@transaction.atomic
def root_cause_save(*, root_cause: RootCause) -> None:
    """Save a category edited whole (the admin's form). Its name and whether it is planned
    show on the pages of every run with an interruption of it (goodput counts planned
    downtime apart) and on every project's incident and fleet pages."""
    root_cause.save()
    runs = Interruption.objects.filter(root_cause=root_cause).values_list("run_id", flat=True)
    for run_id in sorted(set(runs)):
        telemetry_services.run_data_version_bump(run_id=run_id)
    telemetry_services.fleet_version_bump(project_id=None)


@transaction.atomic
def root_causes_delete(*, root_causes: Sequence[RootCause]) -> None:
    """Delete categories (the admin's). One an interruption names cannot go (ProtectedError:
    the incidents keep their category); the pickers on every project's incident pages list
    them, so every fleet version moves."""
    for root_cause in root_causes:
        root_cause.delete()
    telemetry_services.fleet_version_bump(project_id=None)
