"""`manage.py generate_llama_scale`: the bench's Llama-3-scale data set (bench/llama_scale_load.py),
loaded into this database. A dashboard command because the loader writes both telemetry and
logbook rows, which only the dashboard layer may import together."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench import llama_scale as ls
from bench.llama_scale_load import LoadError, llama_scale_load


class Command(BaseCommand):
    help = "Generate a seeded Llama-3-scale run (16,384 GPUs, 54 days, 466 interruptions)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scale", type=float, default=1.0, help="Fraction of the full size (e.g. 0.01)."
        )
        parser.add_argument("--seed", type=int, default=405)
        parser.add_argument("--project", default=ls.PROJECT_SLUG)
        parser.add_argument("--run", default=ls.RUN_NAME)
        parser.add_argument(
            "--replace", action="store_true", help="Delete a run of the same name first."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run, summary = llama_scale_load(
                scale=options["scale"],
                seed=options["seed"],
                project=options["project"],
                run=options["run"],
                replace=options["replace"],
            )
        except LoadError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(summary)
        self.stdout.write(str(run.pk))
