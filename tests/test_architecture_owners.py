"""One owner per table (issue 28): each app's tables are written only by its own services
(ORM calls and SQL text alike) and named in SQL only by its own code; and the versions the
cached pages key on are moved by those services, every write that changes what a page shows
moving one. Checked on the source, with ast; each check is shown catching what it forbids on
a synthetic module."""

from __future__ import annotations

import ast
import re

from tests.architecture_source import (
    APPS,
    ROOT,
    _call_name,
    _is_services,
    _modules,
    _owners,
    _product_modules,
    _root,
)

# --- One owner per table (issue 28) ----------------------------------------------------------
# Each app's tables are written only by its own `services` (and migrations), and named in SQL
# only by its own code (its `selectors` read them; its services upsert into them). The other
# apps call those functions. Checked on the source with ast, like the import rules of
# test_architecture.py.

# Methods that write rows, called on a model, its manager, a queryset or an instance.
WRITE_METHODS = {
    "create", "bulk_create", "update", "bulk_update", "get_or_create", "update_or_create",
    "delete", "save", "add", "remove", "set", "clear",
}  # fmt: skip


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


def test_each_apps_tables_are_written_only_by_its_services():
    classes, _ = _owners()
    # The rule would hold vacuously if the models were not found.
    assert {classes["Device"], classes["Interruption"], classes["IngestBatch"]} == {
        "telemetry", "logbook", "ingest"
    }  # fmt: skip
    assert foreign_writes() == {}


def test_no_app_names_another_apps_tables_in_sql():
    assert foreign_sql() == {}


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
