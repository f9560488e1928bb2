"""Remake every pending suggestion of an open incident (newest first) with the rules,
categories and prior as they are now.
An upgrade that ships a rule change (a logbook migration's RULES_SQL) or a new prior changes
what auto-triage would say; without this the queue keeps what the old release said until
evidence arrives. `make migrate` runs it after the migrations; remaking with unchanged rules
stores the same suggestions, so running it twice is harmless."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from logbook.selectors.triage_learning import projects_with_pending_suggestions
from logbook.services.triage_learning import suggestions_remake


class Command(BaseCommand):
    help = "Remake the pending auto-triage suggestions of open incidents with today's rules."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="only this project (its slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        projects = projects_with_pending_suggestions()
        wanted = options.get("project")
        if wanted:
            projects = [(pk, slug) for pk, slug in projects if slug == wanted]
            if not projects:
                raise CommandError(
                    f"project {wanted!r}: no such project, or no pending suggestion of an "
                    "open incident to remake"
                )
        total = 0
        for index, (pk, slug) in enumerate(projects, start=1):
            # A line per project: the embedding model loads on the first (a second or so),
            # then each suggestion takes tens of milliseconds.
            remade = suggestions_remake(project_id=pk, limit=None)
            total += remade
            self.stdout.write(f"[{index}/{len(projects)}] {slug}: {remade} pending remade")
        where = "project" if len(projects) == 1 else "projects"
        self.stdout.write(f"auto-triage: {total} pending remade in {len(projects)} {where}")
