"""Migrations say the same thing forever (issue 39): each holds its own SQL, imports no other
migration and no product module but the data the seeds load, and asserts nothing. Checked on
the source, with ast."""

from __future__ import annotations

import ast

from tests.architecture_source import APPS, ROOT, _call_name

# --- Migrations say the same thing forever (issue 39) ----------------------------------------
# A migration's SQL is its own text: no import of another migration (0021 once sliced 0005's
# and 0016's), no SQL or constants from a product module (0015 once took its summary merge
# from telemetry.device_samples), and no `assert` (python -O drops it, and any effect with it).
# What a migration may still import from the product: Django's field callables and the data
# the seed migrations load, named here.
MIGRATION_IMPORTS = {
    "telemetry.models",  # field defaults and validators, as makemigrations writes them
    "telemetry.accelerators",  # 0003 seeds the accelerator catalog
    "telemetry.rank_heat",  # 0012 fills the heat levels with the same pure maths
    "logbook.taxonomy",  # 0002 seeds Table 5's root causes
    "logbook.runbooks",  # 0013 seeds the runbooks
}


def _migration_problems(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            found.append((node.lineno, "assert"))
        elif isinstance(node, ast.Call) and _call_name(node) == "import_module":
            found.append((node.lineno, "import_module"))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" for a in node.names]
                if node.module in APPS
                else [node.module or "."]
            )
            for module in modules:
                another_migration = "migrations" in module.split(".") or module.startswith(".")
                product = module.split(".")[0] in (*APPS, "config")
                if another_migration or (product and module not in MIGRATION_IMPORTS):
                    found.append((node.lineno, f"imports {module}"))
    return sorted(found)


def migration_problems() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for path in sorted(ROOT.glob("*/migrations/[0-9]*.py")):
        hits = _migration_problems(ast.parse(path.read_text()))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def test_migrations_hold_their_own_sql_and_no_assert():
    assert len(list(ROOT.glob("telemetry/migrations/[0-9]*.py"))) >= 21
    assert migration_problems() == {}


def test_the_migration_check_catches_what_it_forbids():
    source = (
        "import importlib\n"
        "from telemetry.device_samples import SUMMARY_MERGE\n"
        "from telemetry import device_samples, rank_heat\n"
        "from telemetry.models import Run\n"
        "_old = importlib.import_module('telemetry.migrations.0005_metric_rollups')\n"
        "from telemetry.migrations import helpers\n"
        "assert (body := 'x').count('x') == 1\n"
    )
    assert _migration_problems(ast.parse(source)) == [
        (2, "imports telemetry.device_samples"),
        (3, "imports telemetry.device_samples"),
        (5, "import_module"),
        (6, "imports telemetry.migrations"),
        (7, "assert"),
    ]
