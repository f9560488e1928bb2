"""The apps depend one way: ingest → telemetry, logbook; logbook → telemetry; dashboard →
telemetry, logbook. telemetry imports none of the others, and does not reach logbook's data
another way either: it names no logbook model, table or related name (no `run.interruptions`,
no `Count("checkpoints")`, no SQL on logbook_ tables). And every table has one owner: its app's
services write it, and no other app names it in SQL (issue 28); no product module imports the
bench or the chaos run, or runs past 800 lines. Checked on the source, with ast."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.db.models import ForeignObjectRel

ROOT = Path(__file__).resolve().parent.parent
APPS = ("telemetry", "logbook", "ingest", "dashboard", "diagnosis")
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


def _imported_modules(tree: ast.AST) -> set[str]:
    """Every module a module imports, by its full dotted name."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


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


# --- One owner per table (issue 28) ----------------------------------------------------------
# Each app's tables are written only by its own `services` (and migrations), and named in SQL
# only by its own code (its `selectors` read them; its services upsert into them). The other
# apps call those functions. Checked on the source with ast, like the import rule above.

PRODUCT = (*APPS, "config", "demo")
# Methods that write rows, called on a model, its manager, a queryset or an instance.
WRITE_METHODS = {
    "create", "bulk_create", "update", "bulk_update", "get_or_create", "update_or_create",
    "delete", "save", "add", "remove", "set", "clear",
}  # fmt: skip
MAX_LINES = 800


def _owners() -> tuple[dict[str, str], dict[str, str]]:
    """Each model class name and each table (many-to-many ones too) with the app that owns it."""
    classes, tables = {}, {}
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            classes[model.__name__] = app
            tables[model._meta.db_table] = app
            for field in model._meta.many_to_many:
                tables[field.remote_field.through._meta.db_table] = app
    return classes, tables


def _root(node: ast.AST) -> ast.AST:
    """The name a chain of attributes, calls and subscripts starts from:
    Device.objects.filter(...).update -> Device."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _annotation_names(annotation: ast.AST | None) -> set[str]:
    """The model a name is annotated with: `Device` or `Device | None`, not a container of
    them (`dict[str, Device]` holds rows, it is not one)."""
    if isinstance(annotation, ast.Name):
        return {annotation.id}
    if isinstance(annotation, ast.BinOp):
        return _annotation_names(annotation.left) | _annotation_names(annotation.right)
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _annotation_names(ast.parse(annotation.value, mode="eval").body)
    return set()


def _write_calls(tree: ast.AST, foreign: set[str]):
    """(line, what) for each write call on a model in `foreign`: on the class, its manager or
    a queryset (Device.objects.filter(...).update(...)), or on a name bound to one of its rows
    in the same function (a parameter annotated `device: Device`, `device =
    Device.objects.get(...)`, `for device in Device.objects.filter(...)`)."""
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found: set[tuple[int, str]] = set()
    for scope in [tree, *scopes]:
        bound: dict[str, str] = {}
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*scope.args.args, *scope.args.kwonlyargs, *scope.args.posonlyargs]:
                named = _annotation_names(arg.annotation) & foreign
                if named:
                    bound[arg.arg] = min(named)
        body = scope.body if isinstance(scope, ast.Module) else [scope]
        for node in (n for part in body for n in ast.walk(part)):
            targets: list[ast.AST] = []
            value = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
                named = _annotation_names(node.annotation) & foreign
                if named and isinstance(node.target, ast.Name):
                    bound[node.target.id] = min(named)
            elif isinstance(node, ast.For | ast.comprehension):
                targets, value = [node.target], node.iter
            root = _root(value) if value is not None else None
            if isinstance(root, ast.Name) and root.id in foreign:
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            bound[name.id] = root.id
        for node in (n for part in body for n in ast.walk(part)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in WRITE_METHODS:
                continue
            root = _root(node.func.value)
            if isinstance(root, ast.Name) and (root.id in foreign or root.id in bound):
                found.add((node.lineno, f"{bound.get(root.id, root.id)}.{node.func.attr}"))
    # The module's scope walks its functions too: a call is found once.
    yield from sorted(found)


def _tables_in_sql(tree: ast.AST, foreign_tables: set[str], foreign_classes: set[str]):
    """(line, what) for each string naming a table in `foreign_tables`, and each
    `Model._meta.db_table` of a model in `foreign_classes`."""
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, foreign_tables))) + r")\b")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found = pattern.search(node.value) if foreign_tables else None
            if found:
                yield node.lineno, found.group(1)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "db_table"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "_meta"
            and isinstance(_root(node.value), ast.Name)
            and _root(node.value).id in foreign_classes
        ):
            yield node.lineno, f"{_root(node.value).id}._meta.db_table"


def _is_services(path: Path, app: str) -> bool:
    parts = path.relative_to(ROOT / app).parts
    return parts[0] in ("services.py", "services")


def _product_modules() -> list[tuple[str, Path]]:
    return [(app, path) for app in PRODUCT for path in _modules(app)]


def foreign_writes() -> dict[str, list[tuple[int, str]]]:
    """Write calls on another app's models, by module; an app's own models may be written
    only in its services (its admin, views and commands call them)."""
    classes, _ = _owners()
    found = {}
    for app, path in _product_modules():
        tree = ast.parse(path.read_text())
        foreign = {name for name, owner in classes.items() if owner != app}
        if app in APPS and not _is_services(path, app):
            foreign |= {name for name, owner in classes.items() if owner == app}
        hits = sorted(set(_write_calls(tree, foreign)))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def foreign_sql() -> dict[str, list[tuple[int, str]]]:
    """Another app's table named in a module's strings (its SQL), by module."""
    classes, tables = _owners()
    found = {}
    for app, path in _product_modules():
        tree = ast.parse(path.read_text())
        theirs = {table for table, owner in tables.items() if owner != app}
        their_classes = {name for name, owner in classes.items() if owner != app}
        hits = sorted(set(_tables_in_sql(tree, theirs, their_classes)))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def _over_limit(text: str) -> int | None:
    lines = len(text.splitlines())
    return lines if lines > MAX_LINES else None


def long_modules() -> dict[str, int]:
    """Product modules over MAX_LINES lines (migrations aside), with their length."""
    return {
        str(path.relative_to(ROOT)): lines
        for _, path in _product_modules()
        if (lines := _over_limit(path.read_text())) is not None
    }


def bench_imports() -> dict[str, list[str]]:
    found = {}
    for _, path in _product_modules():
        names = sorted(_imported(ast.parse(path.read_text())) & {"bench", "chaos"})
        if names:
            found[str(path.relative_to(ROOT))] = names
    return found


def test_each_apps_tables_are_written_only_by_its_services():
    classes, _ = _owners()
    # The rule would hold vacuously if the models were not found.
    assert {classes["Device"], classes["Interruption"], classes["IngestBatch"]} == {
        "telemetry", "logbook", "ingest"
    }  # fmt: skip
    assert foreign_writes() == {}


def test_no_app_names_another_apps_tables_in_sql():
    assert foreign_sql() == {}


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


def test_no_product_module_is_over_800_lines():
    assert long_modules() == {}


# The versions the cached pages key on (telemetry.run_cache) are moved by the write functions
# that change what the pages show, in their transaction: an app's services. Their callers
# (admin, views, tasks, commands) never bump, so none can forget to.
BUMPS = {"run_data_version_bump", "fleet_version_bump", "version_bumps_deferred"}


def _bump_calls(tree: ast.AST):
    """(line, name) for each call of a version bump, and each import of one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in BUMPS:
            yield node.lineno, _call_name(node)
        elif isinstance(node, ast.ImportFrom):
            yield from ((node.lineno, a.name) for a in node.names if a.name in BUMPS)


def bumps_outside_services() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for app, path in _product_modules():
        if app in APPS and _is_services(path, app):
            continue
        hits = sorted(set(_bump_calls(ast.parse(path.read_text()))))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


# And every write function of the services that changes a row the cached pages show moves a
# version, itself or through a function it calls (in its module, or a public service of
# another): so a new write cannot forget either. The models those pages show:
PAGE_MODELS = {
    "Run", "Attempt", "MetricSeries", "MetricPoint", "StepStart", "JobInterval", "Site",
    "Cluster", "Host", "Device", "Interruption", "Checkpoint", "CheckpointRestore", "SdcReplay",
    "LogbookEntry", "Annotation", "StragglerRecord", "TriageSuggestion", "RootCause",
}  # fmt: skip
# Writes of them that no cached page shows, by function, and why.
UNBUMPED = {
    "rolled_up_mark": "the rank rollup's own bookkeeping column",
    "root_causes_seed": "the shipped categories, before an incident names one",
    "root_cause_resolve": "seeds the shipped categories when they are gone",
    "root_cause_create": "a new category, which no incident names yet",
}
Functions = dict[tuple[str, str], ast.FunctionDef]


def _service_functions() -> Functions:
    """Every top-level function of every app's services, by (module, name)."""
    return {
        (str(path.relative_to(ROOT)), node.name): node
        for app in APPS
        for path in _modules(app)
        if _is_services(path, app)
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef)
    }


def _reaching(functions: Functions, direct: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The functions in `direct`, and those calling one of them, however indirectly. A call
    by name is to the module's own function of that name, else to the one public service
    function of that name (one in two modules is ambiguous: not followed)."""
    public: dict[str, list[tuple[str, str]]] = {}
    for module, name in functions:
        public.setdefault(name, []).append((module, name))
    calls: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for (module, name), node in functions.items():
        called = {_call_name(n) for n in ast.walk(node) if isinstance(n, ast.Call)}
        calls[(module, name)] = {
            (module, one) if (module, one) in functions else public[one][0]
            for one in called
            if (module, one) in functions or len(public.get(one, [])) == 1
        }
    found = set(direct)
    while grown := {key for key, callees in calls.items() if key not in found and callees & found}:
        found |= grown
    return found


def writes_without_bump(functions: Functions) -> list[str]:
    """Public service functions that write a row of PAGE_MODELS and move no version."""
    writes = {key for key, node in functions.items() if any(_write_calls(node, PAGE_MODELS))}
    bumps = {key for key, node in functions.items() if any(_bump_calls(node))}
    return sorted(
        f"{module}:{name}"
        for module, name in _reaching(functions, writes) - _reaching(functions, bumps)
        if not name.startswith("_") and name not in BUMPS and name not in UNBUMPED
    )


def test_every_service_write_of_what_pages_show_bumps_a_version():
    functions = _service_functions()
    # The rule would hold vacuously if the writes were not found.
    assert {("logbook/services/interruptions.py", "interruption_record"),
            ("telemetry/services/edits.py", "hardware_save")} <= set(functions)  # fmt: skip
    assert writes_without_bump(functions) == []


def test_versions_are_bumped_only_by_services():
    # The rule would hold vacuously if the services did not bump.
    services = ROOT / "logbook" / "services" / "interruptions.py"
    assert {name for _, name in _bump_calls(ast.parse(services.read_text()))} == BUMPS - {
        "version_bumps_deferred"
    }
    assert bumps_outside_services() == {}


def test_the_owner_checks_catch_what_they_forbid():
    # given a logbook module writing telemetry's rows each way, and naming its tables in SQL
    source = (
        "from telemetry.models import Device\n"
        "from bench import llama_scale\n"
        "def f(device: Device, placed: Device | None, host, cursor):\n"
        "    Device.objects.filter(host=None).update(host=host)\n"
        "    device.save(update_fields=['host'])\n"
        "    placed.delete()\n"
        "    found = Device.objects.select_for_update().get(pk=1)\n"
        "    found.save()\n"
        "    for each in Device.objects.filter(host=host):\n"
        "        each.save()\n"
        "    cursor.execute(f'SELECT 1 FROM {MetricPoint._meta.db_table}')\n"
        "    cursor.execute('UPDATE telemetry_device SET host_id = NULL')\n"
        "    by_uuid: dict[str, Device] = {}\n"
        "    by_uuid.clear()\n"
        "    Interruption.objects.create(run=host)\n"
    )
    tree = ast.parse(source)
    classes, tables = _owners()
    telemetry = {name for name, owner in classes.items() if owner == "telemetry"}
    telemetry_tables = {table for table, owner in tables.items() if owner == "telemetry"}
    # then every write on telemetry's models is found, by line
    writes = sorted(_write_calls(tree, telemetry))
    assert writes == [
        (4, "Device.update"), (5, "Device.save"), (6, "Device.delete"), (8, "Device.save"),
        (10, "Device.save"),
    ]  # fmt: skip
    # and not a dict of rows being cleared, nor a write on the module's own app's model
    assert not any(line in (14, 15) for line, _ in writes)
    # and both ways of naming telemetry's tables in SQL
    sql = set(_tables_in_sql(tree, telemetry_tables, telemetry))
    assert sql == {(11, "MetricPoint._meta.db_table"), (12, "telemetry_device")}
    # and the bench import, and a module one line too long
    assert "bench" in _imported(tree)
    assert _over_limit("x = 1\n" * (MAX_LINES + 1)) == MAX_LINES + 1
    assert _over_limit("x = 1\n" * MAX_LINES) is None


def test_the_bump_check_catches_what_it_forbids():
    # given an admin that bumps the versions itself, each way, and reads one
    source = (
        "from telemetry.services import fleet_version_bump\n"
        "def save_model(self, request, obj, form, change):\n"
        "    super().save_model(request, obj, form, change)\n"
        "    telemetry_services.run_data_version_bump(run_id=obj.run_id)\n"
        "    fleet_version_bump(project_id=None)\n"
        "    with services.version_bumps_deferred():\n"
        "        key = f'{obj.run.data_version}'\n"
    )
    # then each bump (and the import of one) is found, not the version read
    assert sorted(_bump_calls(ast.parse(source))) == [
        (1, "fleet_version_bump"), (4, "run_data_version_bump"), (5, "fleet_version_bump"),
        (6, "version_bumps_deferred"),
    ]  # fmt: skip


def test_the_forgotten_bump_check_catches_what_it_forbids():
    # given services writing an interruption: without a bump, through a helper that bumps,
    # through another module's service that bumps, and through one that does not
    sources = {
        "logbook/services/a.py": (
            "def forgets(*, run):\n"
            "    Interruption.objects.create(run=run)\n"
            "def helped(*, run):\n"
            "    Interruption.objects.filter(run=run).update(planned=True)\n"
            "    _pages(run)\n"
            "def _pages(run):\n"
            "    telemetry_services.run_data_version_bump(run_id=run.pk)\n"
            "def calls_forgetful(*, run):\n"
            "    b.also_forgets(run=run)\n"
        ),
        "logbook/services/b.py": (
            "def elsewhere(*, run):\n"
            "    interruption: Interruption = run.interruptions.get()\n"
            "    interruption.save()\n"
            "    a.helped(run=run)\n"
            "def also_forgets(*, run):\n"
            "    Checkpoint.objects.filter(run=run).delete()\n"
        ),
    }
    functions = {
        (module, node.name): node
        for module, source in sources.items()
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    # then the three that move no version are found, and only they
    assert writes_without_bump(functions) == [
        "logbook/services/a.py:calls_forgetful", "logbook/services/a.py:forgets",
        "logbook/services/b.py:also_forgets",
    ]  # fmt: skip
