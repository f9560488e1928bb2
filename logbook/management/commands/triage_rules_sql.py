"""Print the SQL that ships a change to auto-triage's built-in rules: compares the catalogue
(logbook/triage_catalogue.py) with the built-in rows of the database this command reads (one
migrated to the latest migration) and prints, for a new migration's RULES_SQL, an UPDATE per
changed rule and an INSERT per new one (docs/triage.md, "Shipping a rule change"). Prints
nothing when they agree. Reads only; writes nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from logbook.selectors.triage import builtin_rules_stored
from logbook.services.triage_rules import builtin_rule_rows

FIELDS = ("kind", "pattern", "xid", "dcgm_kind", "component", "weight", "source", "position")


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def statements(stored: dict[str, dict[str, Any]], wanted: list[dict[str, Any]]) -> list[str]:
    out = []
    for row in wanted:
        have = stored.get(row["name"])
        category = literal(row["category"])
        cause = f"(SELECT id FROM logbook_rootcause WHERE slug = {category} AND project_id IS NULL)"
        if have is None:
            columns = ", ".join(FIELDS)
            values = ", ".join(literal(row[name]) for name in FIELDS)
            out.append(
                "INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, "
                f"builtin, created_at, updated_at, {columns}) VALUES (NULL, "
                f"{literal(row['name'])}, {cause}, TRUE, TRUE, now(), now(), {values});"
            )
            continue
        changed = [name for name in FIELDS if have[name] != row[name]]
        sets = [f"{name} = {literal(row[name])}" for name in changed]
        if have["category"] != row["category"]:
            sets.append(f"root_cause_id = {cause}")
        if sets:
            out.append(
                f"UPDATE logbook_triagerule SET {', '.join(sets)}, updated_at = now() "
                f"WHERE builtin AND project_id IS NULL AND name = {literal(row['name'])};"
            )
    return out


class Command(BaseCommand):
    help = "Print the SQL of a migration that ships the catalogue's changes to built-in rules."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in statements(builtin_rules_stored(), builtin_rule_rows()):
            self.stdout.write(line)
