"""The admin writes through services too (issue 39): a registered ModelAdmin, or its inline,
is read-only for what it does not route through the app's services. Checked on the source,
with ast; the check is shown catching what it forbids on a synthetic admin."""

from __future__ import annotations

import ast

from tests.architecture_source import APPS, ROOT, _call_name, _modules, _root

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
