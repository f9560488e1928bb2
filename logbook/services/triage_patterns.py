"""Writes of the admins' auto-triage message patterns (TriagePattern): the next suggestion reads
them beside the built-in rules (logbook.selectors.triage), so a save or delete here is all a
pattern needs. No suggestion already made is remade."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from logbook.models import TriagePattern


def triage_pattern_save(*, pattern: TriagePattern) -> None:
    """Save a pattern edited whole (the admin's form has checked that it compiles)."""
    pattern.save()


@transaction.atomic
def triage_patterns_delete(*, patterns: Sequence[TriagePattern]) -> None:
    for pattern in patterns:
        pattern.delete()
