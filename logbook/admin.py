from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from logbook.models import (
    Checkpoint,
    CheckpointRestore,
    Interruption,
    LogbookEntry,
    RootCause,
    SdcReplay,
    TriageRule,
    TriageRuleSetting,
    TriageSuggestion,
)
from logbook.services import sdc as sdc_services
from logbook.services import taxonomy, triage_rules
from telemetry.admin import CheckedInitialAdmin


class ChangedOnThePagesAdmin(CheckedInitialAdmin):
    """Rows written only through the services (audited, the run's and fleet's cached pages
    invalidated): interruptions and checkpoints come from the job's batches (and GPU health
    and hang detection), incidents are triaged on their pages, logbook entries are written on
    the run's logbook page. Here they are shown, read-only."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SuperusersChangeAdmin(CheckedInitialAdmin):
    """Site-wide rows every project reads (the taxonomy, the triage rules): changed here by
    superusers only (issue 42 finding 3: a staff member's pattern and runbook reached every
    project). Project admins change their project's own on its settings pages."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


@admin.register(RootCause)
class RootCauseAdmin(SuperusersChangeAdmin):
    # The runbook (Markdown) is edited here and shown beside auto-triage suggestions.
    list_display = ["name", "group", "family", "slug", "project", "is_hardware", "is_planned"]
    list_filter = ["family", "group", "is_hardware", "is_planned"]
    search_fields = ["name", "slug", "group"]

    def save_model(self, request: HttpRequest, obj: RootCause, form: Any, change: bool) -> None:
        # Its name and whether it is planned show on the incident, failure and goodput pages.
        taxonomy.root_cause_save(root_cause=obj)

    def delete_model(self, request: HttpRequest, obj: RootCause) -> None:
        taxonomy.root_causes_delete(root_causes=[obj])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RootCause]) -> None:
        taxonomy.root_causes_delete(root_causes=list(queryset))


@admin.register(Interruption)
class InterruptionAdmin(ChangedOnThePagesAdmin):
    list_display = [
        "occurred_at",
        "run",
        "attempt",
        "root_cause",
        "planned",
        "manual_intervention",
        "lost_steps",
    ]
    list_filter = ["planned", "manual_intervention", "root_cause__group", "root_cause", "run"]
    search_fields = ["run__name", "message", "component", "reported_category"]
    list_select_related = ["run", "attempt", "root_cause"]
    autocomplete_fields = ["hosts", "devices"]
    raw_id_fields = ["attempt"]
    date_hierarchy = "occurred_at"


class CheckpointRestoreInline(admin.TabularInline):
    model = CheckpointRestore
    extra = 0
    raw_id_fields = ["attempt"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a restore is recorded by checkpoint_restore_record, which recounts

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Checkpoint)
class CheckpointAdmin(ChangedOnThePagesAdmin):
    list_display = [
        "run",
        "step",
        "saved_at",
        "blocking_save_s",
        "tier",
        "status",
        "restored_count",
    ]
    list_filter = ["tier", "status", "run"]
    search_fields = ["run__name", "uri", "checksum"]
    list_select_related = ["run"]
    raw_id_fields = ["attempt"]
    inlines = [CheckpointRestoreInline]


@admin.register(SdcReplay)
class SdcReplayAdmin(CheckedInitialAdmin):
    """The verdict and what was done about it are decided here, through sdc_verdict_set
    (audited, the run's and fleet's versions moved; a confirmed verdict pages the project's
    webhooks once). The rest is what the job or the divergence check reported: read-only,
    and records are not added or deleted here."""

    list_display = ["detected_at", "run", "step", "device", "detection", "verdict", "action"]
    list_filter = ["verdict", "action", "detection"]
    search_fields = ["run__name", "device__uuid", "host__name", "message"]
    list_select_related = ["run", "device"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # In the model's order: the decision after what was reported, not above it.
        fields = SdcReplay._meta.get_fields()
        return [field.name for field in fields if field.concrete and not field.primary_key]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = self.get_fields(request, obj)
        return [name for name in fields if name not in sdc_services.VERDICT_FIELDS]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: SdcReplay, form: Any, change: bool) -> None:
        decided = {name: getattr(obj, name) for name in sdc_services.VERDICT_FIELDS}
        sdc_services.sdc_verdict_set(replay=obj, user=request.user, **decided)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        pass  # nothing else is editable: the hosts are what the record names


@admin.register(LogbookEntry)
class LogbookEntryAdmin(ChangedOnThePagesAdmin):
    list_display = ["occurred_at", "run", "kind", "title", "author_name", "role", "is_automatic"]
    list_filter = ["kind", "role", "is_automatic", "run"]
    search_fields = ["title", "body", "run__name"]
    list_select_related = ["run"]
    raw_id_fields = ["attempt", "interruption", "author"]
    date_hierarchy = "occurred_at"


@admin.register(TriageRule)
class TriageRuleAdmin(SuperusersChangeAdmin):
    """Auto-triage's rules: the built-ins seeded by migrations and those added since, read on
    the next suggestion (logbook.selectors.triage.rule_book). A change to a built-in here is a
    site-wide change: docs/triage.md says how a shipped change is made instead."""

    list_display = ["name", "kind", "root_cause", "weight", "enabled", "builtin", "project"]
    list_filter = ["kind", "enabled", "builtin", "root_cause"]
    search_fields = ["name", "pattern", "component", "source"]
    list_select_related = ["root_cause", "project"]

    def save_model(self, request: HttpRequest, obj: TriageRule, form: Any, change: bool) -> None:
        triage_rules.triage_rule_save(rule=obj)

    def delete_model(self, request: HttpRequest, obj: TriageRule) -> None:
        triage_rules.triage_rules_delete(rules=[obj])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[TriageRule]) -> None:
        triage_rules.triage_rules_delete(rules=list(queryset))


@admin.register(TriageRuleSetting)
class TriageRuleSettingAdmin(ChangedOnThePagesAdmin):
    list_display = ["project", "rule", "enabled", "weight", "updated_at"]
    list_select_related = ["project", "rule"]


@admin.register(TriageSuggestion)
class TriageSuggestionAdmin(CheckedInitialAdmin):
    list_display = ["interruption", "root_cause", "confidence", "outcome", "made_at"]
    list_filter = ["outcome", "root_cause"]
    list_select_related = ["interruption__run", "root_cause"]
    raw_id_fields = ["interruption"]
    readonly_fields = [
        "interruption", "root_cause", "component", "hosts", "devices", "confidence", "evidence",
        "note", "first_made_at", "made_at", "outcome", "decided_root_cause", "decided_by",
        "decided_at",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made and remade by the worker only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # decided on the incident's page; shown in the cached triage queue

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
