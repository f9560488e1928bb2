"""What the architecture tests (tests/test_architecture*.py) read the source with: the apps,
their modules and the product's, the imports of a parsed module, the name a call or a chain
of attributes starts from, and which app owns each model and table."""

from __future__ import annotations

import ast
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
APPS = ("telemetry", "logbook", "ingest", "dashboard", "diagnosis")

PRODUCT = (*APPS, "config", "demo")


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


def _imported_modules(tree: ast.AST) -> set[str]:
    """Every module a module imports, by its full dotted name."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _root(node: ast.AST) -> ast.AST:
    """The name a chain of attributes, calls and subscripts starts from:
    Device.objects.filter(...).update -> Device."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


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


def _is_services(path: Path, app: str) -> bool:
    parts = path.relative_to(ROOT / app).parts
    return parts[0] in ("services.py", "services")


def _product_modules() -> list[tuple[str, Path]]:
    return [(app, path) for app in PRODUCT for path in _modules(app)]
