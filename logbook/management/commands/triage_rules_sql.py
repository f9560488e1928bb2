"""Print the SQL that ships a change to auto-triage's built-in rules: compares the catalogue
(logbook/triage_catalogue.py) with the built-in rows of the database this command reads (one
migrated to the latest migration) and prints, for a new migration's RULES_SQL, an UPDATE per
changed rule and an INSERT per new one (docs/triage.md, "Shipping a rule change"). Prints
nothing when they agree. Reads only; writes nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from logbook.selectors.triage import builtin_rules_stored
from logbook.services.triage_rules import builtin_rule_rows, shipping_statements


class Command(BaseCommand):
    help = "Print the SQL of a migration that ships the catalogue's changes to built-in rules."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in shipping_statements(builtin_rules_stored(), builtin_rule_rows()):
            self.stdout.write(line)
