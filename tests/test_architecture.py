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


# --- The admin writes through services too (issue 39) ----------------------------------------
# Django's admin saves and deletes rows itself unless told otherwise: a ModelAdmin (or an inline)
# on a model is either read-only for what it does not route (has_add/change/delete_permission
# returning False) or routes it through the app's services: save_model for adds and changes,
# save_formset (or save_related) for its editable inlines, delete_model and delete_queryset for
# deletes, each calling a services function and never Django's own (super()).
ADMIN_BASES = {"ModelAdmin", "TabularInline", "StackedInline", "InlineModelAdmin"}
WRITES_FOR = {
    "add": ["save_model"],
    "change": ["save_model"],
    "delete": ["delete_model", "delete_queryset"],
}
Classes = dict[str, tuple[ast.ClassDef, dict[str, str]]]


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]


def _service_names(tree: ast.AST) -> dict[str, str]:
    """Names a module binds to a services module or function: `from ingest import services`,
    `from telemetry.services import edits`, `from logbook.services import sdc as sdc_services`."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                path = f"{node.module}.{alias.name}"
                if "services" in path.split("."):
                    bound[alias.asname or alias.name] = path
    return bound


def _admin_classes(sources: dict[str, str]) -> Classes:
    """Every class of the admin modules, by name, with its module's services names."""
    classes: Classes = {}
    for source in sources.values():
        tree = ast.parse(source)
        services = _service_names(tree)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (node, services)
    return classes


def _mro(name: str, classes: Classes) -> list[str]:
    if name not in classes:
        return []
    order = [name]
    for base in _base_names(classes[name][0]):
        order += [one for one in _mro(base, classes) if one not in order]
    return order


def _is_admin(name: str, classes: Classes) -> bool:
    return any(
        base in ADMIN_BASES or _is_admin(base, classes)
        for base in _base_names(classes[name][0])
        if base != name
    )


def _method(name: str, method: str, classes: Classes) -> tuple[ast.FunctionDef, str] | None:
    for one in _mro(name, classes):
        for node in classes[one][0].body:
            if isinstance(node, ast.FunctionDef) and node.name == method:
                return node, one
    return None


def _returns_false(name: str, method: str, classes: Classes) -> bool:
    found = _method(name, method, classes)
    if found is None:
        return False
    body = [n for n in found[0].body if not isinstance(n, ast.Expr)]  # a docstring aside
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, ast.Constant)
        and body[0].value.value is False
    )


def _through_services(name: str, method: str, classes: Classes, seen: frozenset = frozenset()):
    """Whether `method`, as class `name` has it, calls a services function (itself or
    through another method of the class it calls on self) and never Django's own."""
    found = _method(name, method, classes)
    if found is None or method in seen:
        return False
    node, owner = found
    services = classes[owner][1]
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    for call in calls:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and getattr(func.value.func, "id", "") == "super"
        ):
            return False  # Django's own save or delete
    for call in calls:
        root = _root(call.func)
        if isinstance(root, ast.Name) and root.id in services:
            return True
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and _through_services(name, func.attr, classes, seen | {method})
        ):
            return True
    return False


def _registered(sources: dict[str, str]) -> set[str]:
    """Classes registered on a model (@admin.register(...), admin.site.register(M, Admin))."""
    found = set()
    for source in sources.values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(d, ast.Call) and _call_name(d) == "register" for d in node.decorator_list
            ):
                found.add(node.name)
            elif isinstance(node, ast.Call) and _call_name(node) == "register":
                found.update(a.id for a in node.args[1:] if isinstance(a, ast.Name))
    return found


def _inlines(name: str, classes: Classes) -> list[str]:
    for one in _mro(name, classes):
        for node in classes[one][0].body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "inlines" for t in node.targets
            ):
                return [e.id for e in getattr(node.value, "elts", []) if isinstance(e, ast.Name)]
    return []


def admin_writes_around_services(sources: dict[str, str]) -> list[str]:
    """`Admin: what` for each write a registered admin (or its inline) leaves to Django."""
    classes = _admin_classes(sources)
    found = []
    for name in sorted(_registered(sources) & set(classes)):
        if not _is_admin(name, classes):
            continue
        allowed = {
            what
            for what in WRITES_FOR
            if not _returns_false(name, f"has_{what}_permission", classes)
        }
        for what in sorted(allowed):
            for method in WRITES_FOR[what]:
                if not _through_services(name, method, classes):
                    found.append(f"{name}: {what} ({method} is Django's)")
        editable_inlines = [
            inline
            for inline in _inlines(name, classes)
            if inline in classes
            and not all(
                _returns_false(inline, f"has_{what}_permission", classes) for what in WRITES_FOR
            )
        ]
        if editable_inlines and allowed & {"add", "change"}:
            routed = any(
                _through_services(name, method, classes)
                for method in ("save_formset", "save_related")
            )
            if not routed:
                found += [f"{name}: inline {inline} (save_formset is Django's)" for inline in
                          editable_inlines]  # fmt: skip
    return sorted(set(found))


def _admin_sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for app in APPS
        for path in _modules(app)
        if path.relative_to(ROOT / app).parts[0] in ("admin.py", "admin")
    }


def test_no_admin_writes_around_the_services():
    sources = _admin_sources()
    # The rule would hold vacuously if the admins were not found.
    assert {"RunAdmin", "SdcReplayAdmin", "IngestTokenAdmin"} <= _registered(sources)
    assert admin_writes_around_services(sources) == []


def test_the_admin_check_catches_what_it_forbids():
    # given admins that leave writes to Django each way, and two that do not
    source = (
        "from django.contrib import admin\n"
        "from ingest import services\n"
        "class ShownOnly(admin.ModelAdmin):\n"
        "    def has_add_permission(self, request): return False\n"
        "    def has_change_permission(self, request, obj=None): return False\n"
        "    def has_delete_permission(self, request, obj=None): return False\n"
        "class Inline(admin.TabularInline):\n"
        "    model = Membership\n"
        "@admin.register(Project)\n"
        "class PlainAdmin(admin.ModelAdmin):\n"
        "    inlines = [Inline]\n"
        "@admin.register(Token)\n"
        "class HalfAdmin(ShownOnly):\n"
        "    def has_change_permission(self, request, obj=None): return True\n"
        "    def save_model(self, request, obj, form, change):\n"
        "        super().save_model(request, obj, form, change)\n"
        "        services.token_revoke(token=obj)\n"
        "@admin.register(Batch)\n"
        "class RoutedAdmin(ShownOnly):\n"
        "    def has_delete_permission(self, request, obj=None): return True\n"
        "    def delete_model(self, request, obj): self.delete_rows([obj])\n"
        "    def delete_queryset(self, request, queryset): self.delete_rows(list(queryset))\n"
        "    def delete_rows(self, rows): services.batches_delete(batches=rows)\n"
        "admin.site.register(Run, ShownOnly)\n"
    )
    # then each write left to Django is named, and the read-only and routed admins pass
    assert admin_writes_around_services({"x/admin.py": source}) == [
        "HalfAdmin: change (save_model is Django's)",
        "PlainAdmin: add (save_model is Django's)",
        "PlainAdmin: change (save_model is Django's)",
        "PlainAdmin: delete (delete_model is Django's)",
        "PlainAdmin: delete (delete_queryset is Django's)",
        "PlainAdmin: inline Inline (save_formset is Django's)",
    ]


# --- SQL that writes lives in services too (issue 39) -----------------------------------------
# The write rule above sees ORM calls; SQL text that writes (DML, and the DDL of partitions)
# is held to it as well: only an app's services (and migrations) hold it.
SQL_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+\S+\s+(?:AS\s+\w+\s+)?SET|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE"
    r"|DROP\s+(?:TABLE|INDEX|FUNCTION|TRIGGER)|CREATE\s+(?:TEMPORARY\s+)?TABLE|ALTER\s+TABLE)\b"
)


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string that is not a docstring; an f-string whole, each {...}
    as "{}"."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            found.append((node.lineno, text))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings | parts
        ):
            found.append((node.lineno, node.value))
    return found


def _sql_writes(tree: ast.AST) -> list[tuple[int, str]]:
    return sorted(
        {
            (line, " ".join(m.group(1).split()))
            for line, text in _strings(tree)
            for m in SQL_WRITE.finditer(text)
        }
    )


def sql_writes_outside_services() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for app, path in _product_modules():
        if app in APPS and _is_services(path, app):
            continue
        hits = _sql_writes(ast.parse(path.read_text()))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


def test_no_sql_writes_outside_the_services():
    # The rule would hold vacuously if the services' SQL were not seen.
    services = ROOT / "telemetry" / "services" / "metrics.py"
    assert _sql_writes(ast.parse(services.read_text()))
    assert sql_writes_outside_services() == {}


def test_the_sql_write_check_catches_what_it_forbids():
    source = (
        '"""Docstring: DELETE FROM the table, told not done."""\n'
        "def f(cursor, name, table):\n"
        "    cursor.execute(f'DROP TABLE \"{name}\"')\n"
        "    cursor.execute(f'UPDATE {table} SET x = 1')\n"
        "    SQL = 'INSERT INTO telemetry_run (name) VALUES (%s)'\n"
        "    cursor.execute('SELECT 1 FROM telemetry_run FOR UPDATE')\n"
        "    cursor.execute(f'CREATE TABLE IF NOT EXISTS \"{name}\" PARTITION OF {table}')\n"
        "    cursor.execute('DELETE FROM telemetry_run WHERE id = %s')\n"
    )
    assert _sql_writes(ast.parse(source)) == [
        (3, "DROP TABLE"), (4, "UPDATE {} SET"), (5, "INSERT INTO"), (7, "CREATE TABLE"),
        (8, "DELETE FROM"),
    ]  # fmt: skip
