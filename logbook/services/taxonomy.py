"""Writes to the root-cause taxonomy: seeding the shipped rows, resolving a job's category
to a row, adding categories, editing one and deleting those no incident names."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import Q

from logbook.models import Interruption, RootCause
from logbook.runbooks import RUNBOOKS
from logbook.taxonomy import ROOT_CAUSE_SEEDS, UNKNOWN_SLUG
from telemetry import services as telemetry_services


def root_causes_seed() -> int:
    """Create the shipped taxonomy rows that are missing (the data migration and tests use
    it); rows admins edited are left alone. Returns how many were created."""
    existing = set(RootCause.objects.values_list("slug", flat=True))
    missing = [
        RootCause(
            slug=seed.slug,
            name=seed.name,
            group=seed.group,
            is_hardware=seed.is_hardware,
            is_planned=seed.is_planned,
            runbook=RUNBOOKS.get(seed.slug, ""),
        )
        for seed in ROOT_CAUSE_SEEDS
        if seed.slug not in existing
    ]
    RootCause.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def root_cause_resolve(*, category: str) -> RootCause:
    """The taxonomy row a job's category names (slug or name, any case); "unknown" when it
    names none, so an interruption is never dropped for a taxonomy mismatch."""
    text = category.strip() or UNKNOWN_SLUG
    lookup = Q(slug__iexact=text) | Q(name__iexact=text)
    match = RootCause.objects.filter(lookup).first()
    if match is None and not RootCause.objects.filter(slug=UNKNOWN_SLUG).exists():
        # The shipped rows are gone (a flushed database): restore them rather than file
        # every interruption under a category that does not exist.
        root_causes_seed()
        match = RootCause.objects.filter(lookup).first()
    return match or RootCause.objects.get(slug=UNKNOWN_SLUG)


def root_cause_create(
    *,
    name: str,
    slug: str,
    group: str,
    is_hardware: bool = False,
    is_planned: bool = False,
    description: str = "",
) -> RootCause:
    """Add a category to the taxonomy (admins extend it beyond the shipped rows)."""
    return RootCause.objects.create(
        name=name,
        slug=slug,
        group=group,
        is_hardware=is_hardware,
        is_planned=is_planned,
        description=description,
    )


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
