"""Writes to auto-triage's rules (logbook.models.TriageRule, TriageRuleSetting): the shipped
rules put back after a flush, a project's change to a site-wide rule (disable, re-weight), a
project's own rules (add, change, remove). Every change by a person is audited under the
project. Suggestions read the rules afresh each time (logbook.selectors.triage.rule_book), so
nothing here is cached: the next suggestion reflects the change, and the project's pending
ones are remade by the worker after it commits (autotriage.rules_changed)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from logbook import triage_catalogue
from logbook.models import AuditEvent, RootCause, TriageRule, TriageRuleSetting
from logbook.safe_patterns import pattern_problem
from logbook.services import autotriage
from logbook.services.audit import audit_record
from telemetry.models import Project

ENTITY = AuditEvent.Entity.TRIAGE_RULE
# A project's own rules, at most: each is read on every suggestion of the project.
PROJECT_RULES_MAX = 200


def builtin_rule_rows() -> list[dict[str, Any]]:
    """The shipped catalogue as TriageRule field values (category by slug), in reading
    order: what the migrations seeded, and what tests/logbook/test_triage_rules.py compares
    them with."""
    rows: list[dict[str, Any]] = []
    position = 0
    for rule in triage_catalogue.BUILTIN_RULES:
        position += 10
        rows.append(
            {"kind": "message", "name": rule.name, "pattern": rule.pattern, "xid": None,
             "dcgm_kind": "", "category": rule.category, "component": rule.component,
             "weight": rule.weight, "source": rule.source, "position": position}
        )  # fmt: skip
    for code, xid_rule in sorted(triage_catalogue.XID_RULES.items()):
        position += 10
        rows.append(
            {"kind": "xid", "name": f"xid-{code}", "pattern": "", "xid": code, "dcgm_kind": "",
             "category": xid_rule.category, "component": xid_rule.component,
             "weight": xid_rule.weight, "source": triage_catalogue.XID_CATALOG,
             "position": position}
        )  # fmt: skip
    for kind, kind_rule in triage_catalogue.DCGM_KIND_RULES.items():
        position += 10
        rows.append(
            {"kind": "dcgm", "name": f"dcgm-{kind.replace('_', '-')}", "pattern": "",
             "xid": None, "dcgm_kind": kind, "category": kind_rule.category,
             "component": kind_rule.component, "weight": kind_rule.weight,
             "source": triage_catalogue.DCGM, "position": position}
        )  # fmt: skip
    return rows


def triage_rules_seed() -> int:
    """Create the shipped rules that are missing (after a test's flush, as the migrations
    did); existing rows are left alone. Returns how many were created."""
    causes = dict(RootCause.objects.filter(project__isnull=True).values_list("slug", "pk"))
    existing = set(TriageRule.objects.filter(project__isnull=True).values_list("name", flat=True))
    missing = [
        TriageRule(
            project=None,
            builtin=True,
            root_cause_id=causes[row.pop("category")],
            **row,
        )
        for row in builtin_rule_rows()
        if row["name"] not in existing and row["category"] in causes
    ]
    TriageRule.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def _rule_of_project(*, project: Project, rule_id: int) -> TriageRule:
    rule = (
        TriageRule.objects.filter(Q(project__isnull=True) | Q(project=project))
        .filter(pk=rule_id)
        .first()
    )
    if rule is None:
        raise ValidationError("No such rule in this project.")
    return rule


def _checked_weight(weight: Any) -> float | None:
    if weight is None or weight == "":
        return None
    try:
        value = float(weight)
    except (TypeError, ValueError):
        raise ValidationError({"weight": "A weight is a number."}) from None
    if not 0.0 < value <= 1.0:
        raise ValidationError({"weight": "A weight is above 0 and at most 1."})
    return value


@transaction.atomic
def triage_rule_configure(
    *, project: Project, rule_id: int, enabled: bool, weight: Any, user: Any
) -> TriageRule:
    """Set how one project reads a rule: a site-wide rule gets (or loses) the project's
    setting (other projects read it unchanged); a project's own rule is changed itself.
    `weight` None or "" keeps the rule's own. Audited; a change that changes nothing records
    nothing."""
    rule = _rule_of_project(project=project, rule_id=rule_id)
    new_weight = _checked_weight(weight)
    if rule.project_id == project.pk:
        before = {"enabled": rule.enabled, "weight": rule.weight}
        rule.enabled = enabled
        rule.weight = new_weight if new_weight is not None else rule.weight
        rule.save(update_fields=["enabled", "weight", "updated_at"])
        after = {"enabled": rule.enabled, "weight": rule.weight}
    else:
        setting = TriageRuleSetting.objects.filter(project=project, rule=rule).first()
        before = {
            "enabled": rule.enabled and (setting is None or setting.enabled),
            "weight": setting.weight if setting and setting.weight is not None else rule.weight,
        }
        if enabled and new_weight in (None, rule.weight):
            TriageRuleSetting.objects.filter(project=project, rule=rule).delete()
        else:
            TriageRuleSetting.objects.update_or_create(
                project=project,
                rule=rule,
                defaults={"enabled": enabled, "weight": new_weight},
            )
        after = {
            "enabled": rule.enabled and enabled,
            "weight": new_weight if new_weight is not None else rule.weight,
        }
    changes = {name: [before[name], after[name]] for name in before if before[name] != after[name]}
    if changes:
        changes["rule"] = [rule.name, rule.name]
        autotriage.rules_changed(project_id=project.pk)
    audit_record(project=project, entity=ENTITY, object_id=rule.pk, user=user, changes=changes)
    return rule


@transaction.atomic
def triage_rule_create(
    *,
    project: Project,
    user: Any,
    kind: str,
    name: str,
    root_cause: RootCause,
    weight: Any,
    pattern: str = "",
    xid: int | None = None,
    dcgm_kind: str = "",
    component: str = "",
    source: str = "",
) -> TriageRule:
    """Add a rule of the project's own (read by its suggestions only), audited. A message
    pattern RE2 cannot compile is refused; so is a category of another project."""
    if root_cause.project_id not in (None, project.pk):
        raise ValidationError({"root_cause": "That category belongs to another project."})
    if TriageRule.objects.filter(project=project).count() >= PROJECT_RULES_MAX:
        raise ValidationError(f"A project holds at most {PROJECT_RULES_MAX} rules of its own.")
    if TriageRule.objects.filter(project=project, name=name).exists():
        raise ValidationError({"name": "This project already has a rule of that name."})
    checked = _checked_weight(weight)
    rule = TriageRule(
        project=project,
        kind=kind,
        name=name,
        pattern=pattern if kind == TriageRule.Kind.MESSAGE else "",
        xid=xid if kind == TriageRule.Kind.XID else None,
        dcgm_kind=dcgm_kind if kind == TriageRule.Kind.DCGM else "",
        root_cause=root_cause,
        component=component,
        weight=checked if checked is not None else 0.7,
        source=source,
        builtin=False,
        position=100_000,
    )
    if kind == TriageRule.Kind.MESSAGE and (problem := pattern_problem(pattern)):
        raise ValidationError({"pattern": problem})
    if kind == TriageRule.Kind.XID and xid is None:
        raise ValidationError({"xid": "An XID rule names its code."})
    if kind == TriageRule.Kind.DCGM and not dcgm_kind:
        raise ValidationError({"dcgm_kind": "A DCGM rule names the event kind."})
    rule.full_clean(exclude=["project", "root_cause"])
    rule.save()
    audit_record(
        project=project,
        entity=ENTITY,
        object_id=rule.pk,
        user=user,
        action="create",
        changes={
            "rule": [None, name],
            "kind": [None, kind],
            "category": [None, root_cause.slug],
            "weight": [None, rule.weight],
            "pattern": [None, rule.pattern or rule.xid or rule.dcgm_kind],
        },
    )
    autotriage.rules_changed(project_id=project.pk)
    return rule


@transaction.atomic
def triage_rule_delete(*, project: Project, rule_id: int, user: Any) -> None:
    """Remove one of the project's own rules (a site-wide rule is disabled instead)."""
    rule = TriageRule.objects.filter(project=project, pk=rule_id).first()
    if rule is None:
        raise ValidationError("Only a rule of the project's own can be removed.")
    audit_record(
        project=project,
        entity=ENTITY,
        object_id=rule.pk,
        user=user,
        action="delete",
        changes={"rule": [rule.name, None]},
    )
    rule.delete()
    autotriage.rules_changed(project_id=project.pk)


def triage_rule_save(*, rule: TriageRule) -> None:
    """Save a rule edited whole in the admin (superusers; its form has checked the pattern).
    The next suggestion reads it; no suggestion already made is remade."""
    rule.save()


@transaction.atomic
def triage_rules_delete(*, rules: list[TriageRule]) -> None:
    for rule in rules:
        rule.delete()


SHIPPED_FIELDS = (
    "kind",
    "pattern",
    "xid",
    "dcgm_kind",
    "component",
    "weight",
    "source",
    "position",
)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def shipping_statements(
    stored: dict[str, dict[str, Any]], wanted: list[dict[str, Any]]
) -> list[str]:
    """The SQL of a migration that ships the catalogue's changes (manage.py triage_rules_sql):
    an UPDATE per changed built-in rule, an INSERT per new one. Returns text; runs nothing."""
    out = []
    for row in wanted:
        have = stored.get(row["name"])
        category = _literal(row["category"])
        cause = f"(SELECT id FROM logbook_rootcause WHERE slug = {category} AND project_id IS NULL)"
        if have is None:
            columns = ", ".join(SHIPPED_FIELDS)
            values = ", ".join(_literal(row[name]) for name in SHIPPED_FIELDS)
            out.append(
                "INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, "
                f"builtin, created_at, updated_at, {columns}) VALUES (NULL, "
                f"{_literal(row['name'])}, {cause}, TRUE, TRUE, now(), now(), {values});"
            )
            continue
        changed = [name for name in SHIPPED_FIELDS if have[name] != row[name]]
        sets = [f"{name} = {_literal(row[name])}" for name in changed]
        if have["category"] != row["category"]:
            sets.append(f"root_cause_id = {cause}")
        if sets:
            out.append(
                f"UPDATE logbook_triagerule SET {', '.join(sets)}, updated_at = now() "
                f"WHERE builtin AND project_id IS NULL AND name = {_literal(row['name'])};"
            )
    return out
