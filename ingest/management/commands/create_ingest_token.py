"""python manage.py create_ingest_token <project> [--name NAME] [--expires-days N]

Prints the token on the last line; it is stored only as a hash and cannot be shown again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ingest import services
from telemetry import services as telemetry_services
from telemetry.models import Project


class Command(BaseCommand):
    help = "Create an ingest token for a project and print it (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="Project slug.")
        parser.add_argument("--name", default="cli", help="A label for the token.")
        parser.add_argument("--expires-days", type=int, default=None, help="Expire after N days.")
        parser.add_argument(
            "--create-project",
            action="store_true",
            help="Create the project if it does not exist.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["project"]
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            if not options["create_project"]:
                known = ", ".join(Project.objects.values_list("slug", flat=True)[:20]) or "none"
                raise CommandError(
                    f"No project {slug!r} (known: {known}). Pass --create-project to create it."
                )
            project, _ = telemetry_services.project_ensure(slug=slug, name=slug)
        expires_at = None
        if options["expires_days"] is not None:
            expires_at = timezone.now() + timedelta(days=options["expires_days"])
        token, plaintext = services.token_create(
            project=project, name=options["name"], expires_at=expires_at
        )
        self.stderr.write(
            f"Created ingest token {token.prefix}… for project {project.slug!r}"
            + (f", expires {expires_at:%Y-%m-%d}" if expires_at else "")
            + ". It is shown once, below:"
        )
        self.stdout.write(plaintext)
