"""The apps depend one way: ingest → telemetry, logbook; logbook → telemetry; dashboard →
telemetry, logbook. telemetry imports none of the others, and does not reach logbook's data
another way either: it names no logbook model, table or related name (no `run.interruptions`,
no `Count("checkpoints")`, no SQL on logbook_ tables). Checked on the source, with ast."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.apps import apps
from django.db.models import ForeignObjectRel

ROOT = Path(__file__).resolve().parent.parent
APPS = ("telemetry", "logbook", "ingest", "dashboard")
# What each app may not import (bench, chaos and clients are not apps: none may import them).
FORBIDDEN = {
    "telemetry": {"logbook", "ingest", "dashboard", "bench", "chaos"},
    "logbook": {"ingest", "dashboard", "bench", "chaos"},
    "ingest": {"dashboard", "bench", "chaos"},
    "dashboard": {"ingest", "chaos"},
}


def _modules(app: str) -> list[Path]:
    return sorted(
        path
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.relative_to(ROOT).parts
    )


def _imported(tree: ast.AST) -> set[str]:
    """Top-level packages of every import in the module, lazy ones inside functions too."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("app", APPS)
def test_apps_import_only_downwards(app):
    wrong = {
        str(path.relative_to(ROOT)): sorted(_imported(ast.parse(path.read_text())) & FORBIDDEN[app])
        for path in _modules(app)
    }
    assert {path: names for path, names in wrong.items() if names} == {}


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


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


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
