"""The apps depend one way: ingest → telemetry, logbook; logbook → telemetry; dashboard →
telemetry, logbook. telemetry imports none of the others, and does not reach logbook's data
another way either: it names no logbook model, table or related name (no `run.interruptions`,
no `Count("checkpoints")`, no SQL on logbook_ tables). No product module imports the bench or
the chaos run, nor production code the development harness; no module runs past 600 lines
(migrations aside), and a package __init__ only re-exports, in 50 lines at most. Checked on
the source, with ast. Beside this file: one owner per table and the version bumps
(test_architecture_owners.py), migrations (test_architecture_migrations.py) and the admin
(test_architecture_admin.py)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from django.apps import apps
from django.db.models import ForeignObjectRel

from tests.architecture_source import (
    APPS,
    ROOT,
    _call_name,
    _imported,
    _imported_modules,
    _modules,
    _product_modules,
)

# What each app may not import (bench, chaos and clients are not apps: none may import them).
# diagnosis sits above logbook (it drafts logbook entries and audits through it); logbook may
# import only its pure evidence model, diagnosis.evidence (checked below), until auto-triage
# moves into diagnosis.
FORBIDDEN = {
    "telemetry": {"logbook", "ingest", "dashboard", "diagnosis", "bench", "chaos"},
    "logbook": {"ingest", "dashboard", "bench", "chaos"},
    "ingest": {"dashboard", "bench", "chaos"},
    "dashboard": {"ingest", "bench", "chaos"},
    "diagnosis": {"ingest", "dashboard", "bench", "chaos"},
}
# The modules of diagnosis logbook may import.
LOGBOOK_MAY_IMPORT_FROM_DIAGNOSIS = {"diagnosis.evidence"}


@pytest.mark.parametrize("app", APPS)
def test_apps_import_only_downwards(app):
    wrong = {
        str(path.relative_to(ROOT)): sorted(_imported(ast.parse(path.read_text())) & FORBIDDEN[app])
        for path in _modules(app)
    }
    assert {path: names for path, names in wrong.items() if names} == {}


def test_logbook_imports_only_the_evidence_model_of_diagnosis():
    wrong = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in _imported_modules(ast.parse(path.read_text()))
            if name.split(".")[0] == "diagnosis" and name not in LOGBOOK_MAY_IMPORT_FROM_DIAGNOSIS
        )
        for path in _modules("logbook")
    }
    assert {path: names for path, names in wrong.items() if names} == {}
    # And it stays pure: it imports no app, so logbook reaches nothing else through it.
    evidence = ast.parse((ROOT / "diagnosis" / "evidence.py").read_text())
    assert _imported(evidence) & set(APPS) == set()


# diagnosis's detection, rules and words are pure: no ORM, no selector or service, and of the
# other apps only telemetry's pure modules (the labelled scenarios run them in memory).
DIAGNOSIS_PURE = ("slowdown_detect", "slowdown_rules", "slowdown_facts", "slowdown_text")
PURE_TELEMETRY = {"telemetry.dcgm", "telemetry.configs", "telemetry.display"}


def test_diagnosis_rules_are_pure():
    wrong = {}
    for name in DIAGNOSIS_PURE:
        imported = _imported_modules(ast.parse((ROOT / "diagnosis" / f"{name}.py").read_text()))
        bad = sorted(
            module
            for module in imported
            if module.startswith("django")
            or (module.split(".")[0] in APPS and module.split(".")[0] != "diagnosis"
                and module not in PURE_TELEMETRY)
            or module.startswith(("diagnosis.models", "diagnosis.selectors", "diagnosis.services"))
        )  # fmt: skip
        if bad:
            wrong[name] = bad
    assert wrong == {}


def _logbook_names() -> tuple[set[str], set[str], set[str]]:
    """logbook's model class names, table names, and the names its relations give telemetry's
    models (reverse accessors and query names: Run.interruptions, Host.sdc_replays, ...)."""
    models = list(apps.get_app_config("logbook").get_models())
    telemetry = set(apps.get_app_config("telemetry").get_models())
    classes = {model.__name__ for model in models}
    tables = {model._meta.db_table for model in models}
    for model in models:
        for field in model._meta.many_to_many:
            tables.add(field.remote_field.through._meta.db_table)
    related = set()
    for model in telemetry:
        for rel in model._meta.get_fields():
            if isinstance(rel, ForeignObjectRel) and rel.related_model in models:
                related.update(
                    name for name in (rel.get_accessor_name(), rel.field.related_query_name())
                    if name and not name.endswith("+")
                )  # fmt: skip
    return classes, tables, related


# Calls whose string arguments are ORM paths (Count("interruptions"), get_field(...), ...), and
# manager methods that, called on an attribute, show it is a relation (run.interruptions.all()).
# Related names are plain words ("annotations" is also a plotly layout key): only those uses
# of them name logbook's data.
ORM_CALLS = {
    "Count", "Sum", "Max", "Min", "Avg", "F", "Prefetch", "FilteredRelation", "get_field",
    "prefetch_related", "select_related", "values", "values_list", "order_by", "only",
    "defer", "distinct",
}  # fmt: skip
# Calls whose keywords are lookups (filter(interruptions=...)); elsewhere a keyword of that
# name is only a parameter (a chart's interruptions=frame).
LOOKUP_CALLS = {"filter", "exclude", "get", "Q", "get_or_create", "update_or_create"}
MANAGER_METHODS = {
    "all", "filter", "exclude", "get", "count", "exists", "order_by", "only", "values",
    "values_list", "select_related", "prefetch_related", "annotate", "aggregate", "create",
    "add", "set", "remove", "clear", "first", "last", "update", "delete", "through",
}  # fmt: skip


def _names_of_logbook(tree: ast.AST, classes: set[str], tables: set[str], related: set[str]):
    """(line, what) for every place the module names logbook's data: a model class, a table
    in a string, a relation followed by a manager method, a related name in a lookup keyword,
    a lookup string or an ORM call's argument."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in classes:
            yield node.lineno, node.id
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.lineno, a.name) for a in node.names if a.name in classes)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in MANAGER_METHODS
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in related
        ):
            yield node.lineno, f".{node.value.attr}.{node.attr}"
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            for kw in node.keywords:
                lookup = kw.arg and ("__" in kw.arg or name in LOOKUP_CALLS)
                if lookup and kw.arg.split("__")[0] in related:
                    yield kw.value.lineno, f"{kw.arg}="
            for arg in node.args if name in ORM_CALLS else ():
                if isinstance(arg, ast.Constant) and str(arg.value).split("__")[0] in related:
                    yield arg.lineno, repr(arg.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            lookup = "__" in text and text.split("__")[0] in related
            if lookup or any(table in text for table in tables):
                yield node.lineno, repr(text[:60])


def test_telemetry_names_no_logbook_model_table_or_related_name():
    classes, tables, related = _logbook_names()
    # The rule would hold vacuously if the names were not found.
    assert {"Interruption", "Checkpoint"} <= classes and "logbook_interruption" in tables
    assert {"interruptions", "checkpoints", "logbook_entries", "sdc_replays"} <= related
    found = {
        str(path.relative_to(ROOT)): sorted(set(_names_of_logbook(ast.parse(path.read_text()),
                                                                  classes, tables, related)))
        for path in _modules("telemetry")
    }  # fmt: skip
    assert {path: names for path, names in found.items() if names} == {}


def test_the_checks_catch_what_they_forbid():
    # given code that reaches logbook's data each way the rule forbids
    source = (
        "from logbook.models import Interruption\n"
        "import dashboard.views\n"
        "def f(run):\n"
        "    from ingest import services\n"
        "    run.interruptions.all()\n"
        "    figure.layout.annotations\n"
        "    Run.objects.annotate(n=Count('checkpoints'))\n"
        "    Host.objects.filter(sdc_replays__run=run)\n"
        "    Run.objects.exclude(interruptions=None)\n"
        "    mfu_figure(frame, interruptions=marks)\n"
        "    cursor.execute('SELECT 1 FROM logbook_checkpointrestore')\n"
    )
    tree = ast.parse(source)
    classes, tables, related = _logbook_names()
    # then each is found
    assert {"logbook", "dashboard", "ingest"} <= _imported(tree)
    found = {what for _, what in _names_of_logbook(tree, classes, tables, related)}
    assert {"Interruption", ".interruptions.all", "'checkpoints'", "sdc_replays__run="} <= found
    assert "interruptions=" in found  # the exclude(), not the chart's parameter (below)
    assert "'SELECT 1 FROM logbook_checkpointrestore'" in found
    # and a plotly figure's annotations, or a chart's parameter, are not mistaken for logbook's
    assert not any("annotations" in what for what in found)
    lines = [line for line, what in _names_of_logbook(tree, classes, tables, related)]
    assert 10 not in lines  # mfu_figure(frame, interruptions=marks)


def bench_imports() -> dict[str, list[str]]:
    found = {}
    for _, path in _product_modules():
        names = sorted(_imported(ast.parse(path.read_text())) & {"bench", "chaos"})
        if names:
            found[str(path.relative_to(ROOT))] = names
    return found


def test_no_product_module_imports_the_bench_or_the_chaos_run():
    assert bench_imports() == {}


# `stack` is the development harness (the embedded servers of `make test`, `make demo`, bench
# and chaos): production loads none of it. Only the demo's launcher and the test settings
# may import it.
HARNESS_ENTRY_POINTS = {"config/demo.py", "config/settings_test.py"}


def harness_imports() -> dict[str, list[str]]:
    found = {}
    for _, path in _product_modules():
        module = str(path.relative_to(ROOT))
        if module not in HARNESS_ENTRY_POINTS and "stack" in _imported(ast.parse(path.read_text())):
            found[module] = ["stack"]
    return found


def test_production_code_imports_nothing_of_the_development_harness():
    # The rule would hold vacuously if the launcher's import were not seen.
    assert "stack" in _imported(ast.parse((ROOT / "config" / "demo.py").read_text()))
    assert harness_imports() == {}


# --- Size: short modules, and package __init__s that only re-export (issue 39) ---------------
# Every Python module of the repository, tests, clients, bench and tools too (migrations
# aside: they are written once and never read as code to change), stays under MAX_LINES; a
# package __init__ holds a docstring, imports and dunder names (__all__, __version__) only, in
# MAX_INIT_LINES at most.
MAX_LINES = 600
MAX_INIT_LINES = 50
# Over the limit for now, each with who is splitting it (none left).
LONG_PENDING: set[str] = set()


def _python_modules() -> list[Path]:
    """Every tracked (or new, not ignored) Python file outside migrations."""
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [
        ROOT / name
        for name in names
        if "migrations" not in Path(name).parts and (ROOT / name).is_file()
    ]


def _over_limit(text: str, limit: int = MAX_LINES) -> int | None:
    lines = len(text.splitlines())
    return lines if lines > limit else None


def _init_logic(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each statement of a package __init__ that is not its docstring, an
    import or a dunder assignment (`__all__ = [...]`)."""
    found = []
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        )
        dunder = isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.startswith("__") and t.id.endswith("__")
            for t in node.targets
        )
        if not (docstring or dunder or isinstance(node, ast.Import | ast.ImportFrom)):
            found.append((node.lineno, type(node).__name__))
    return found


def long_modules() -> dict[str, int]:
    """Modules over MAX_LINES lines (migrations and LONG_PENDING aside), with their length."""
    found = {}
    for path in _python_modules():
        module = str(path.relative_to(ROOT))
        if module not in LONG_PENDING and (lines := _over_limit(path.read_text())) is not None:
            found[module] = lines
    return found


def package_inits_with_more_than_reexports() -> dict[str, list]:
    """Package __init__ files over MAX_INIT_LINES lines, or holding more than re-exports."""
    found: dict[str, list] = {}
    for path in _python_modules():
        if path.name != "__init__.py":
            continue
        text = path.read_text()
        problems: list = _init_logic(ast.parse(text))
        if (lines := _over_limit(text, MAX_INIT_LINES)) is not None:
            problems.append(f"{lines} lines")
        if problems:
            found[str(path.relative_to(ROOT))] = problems
    return found


def test_no_module_is_over_600_lines():
    # The rule would hold vacuously if the tests and the client were not read.
    read = {str(path.relative_to(ROOT)) for path in _python_modules()}
    assert {"tests/conftest.py", "clients/python/chronicle_client/client.py"} <= read
    assert long_modules() == {}
    # A pending module is still long: once split, it leaves LONG_PENDING.
    assert all(_over_limit((ROOT / name).read_text()) for name in LONG_PENDING)


def test_package_inits_only_reexport_in_50_lines_at_most():
    assert (ROOT / "telemetry" / "services" / "__init__.py") in _python_modules()
    assert package_inits_with_more_than_reexports() == {}


def test_the_size_and_import_checks_catch_what_they_forbid():
    # given a module one line too long, an __init__ one line too long, one with logic, and a
    # module importing the bench
    assert _over_limit("x = 1\n" * (MAX_LINES + 1)) == MAX_LINES + 1
    assert _over_limit("x = 1\n" * MAX_LINES) is None
    assert _over_limit("from a import b\n" * (MAX_INIT_LINES + 1), MAX_INIT_LINES) == 51
    assert _over_limit("from a import b\n" * MAX_INIT_LINES, MAX_INIT_LINES) is None
    init = (
        '"""Re-exports."""\n'
        "from telemetry.services.runs import run_upsert\n"
        "__all__ = ['run_upsert']\n"
        "def run_get(pk):\n"
        "    return Run.objects.get(pk=pk)\n"
        "CACHE = {}\n"
        "if DEBUG:\n"
        "    import pdb\n"
    )
    # then the logic is found, by line, and the docstring, imports and __all__ are not
    assert _init_logic(ast.parse(init)) == [(4, "FunctionDef"), (6, "Assign"), (7, "If")]
    assert "bench" in _imported(ast.parse("from bench import llama_scale\n"))
