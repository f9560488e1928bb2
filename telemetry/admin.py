from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from telemetry import services as telemetry_services
from telemetry.models import (
    Attempt,
    Cluster,
    Device,
    Host,
    Membership,
    MetricPoint,
    MetricSeries,
    Project,
    Run,
    Site,
)
from telemetry.services import QUARANTINE_FIELDS, edits


class CheckedInitialAdmin(admin.ModelAdmin):
    """The "add" page takes initial values from the query string (?host=3); for a relation an
    id that is not one (?host=abc, a NUL, 25 digits) made the autocomplete and raw-id widgets
    answer 500. Such values are dropped: the form starts empty there, as for an unknown id."""

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        for name, value in list(initial.items()):
            try:
                field = self.model._meta.get_field(name)
            except FieldDoesNotExist:  # not a field: Django ignores it
                continue
            if field.is_relation and not _ids_valid(field, value):
                del initial[name]
        return initial


def _ids_valid(field: Any, value: Any) -> bool:
    target = field.target_field
    for item in value if isinstance(value, list) else [value]:
        text = str(item)
        if "\x00" in text or len(text) > 100:
            return False
        try:
            number = target.to_python(text)
        except ValidationError:
            return False
        if isinstance(target, models.AutoField | models.IntegerField) and not (0 < number < 2**63):
            return False
    return True


class EditedThroughServicesAdmin(CheckedInitialAdmin):
    """Saves and deletes go through the app's services (`save_row`, `delete_rows`), which
    move the versions the cached pages key on in the same transaction, so an edit here shows
    on the next page. Many-to-many fields are saved by `save_row` too, not by the form."""

    def save_row(self, obj: Any, form: Any) -> None:
        raise NotImplementedError

    def delete_rows(self, rows: Sequence[Any]) -> None:
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        self.save_row(obj, form)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        for formset in formsets:  # not form.save_m2m(): save_row saved them
            self.save_formset(request, form, formset, change=change)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.delete_rows([obj])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self.delete_rows(list(queryset))


class FleetEditAdmin(EditedThroughServicesAdmin):
    """Hardware and places are shared by every project's fleet: an edit here moves every
    fleet_version. A host's or device's quarantine is shown, and changed on the fleet page
    (audited)."""

    def save_row(self, obj: Any, form: Any) -> None:
        edits.hardware_save(row=obj)

    def delete_rows(self, rows: Sequence[Any]) -> None:
        edits.hardware_delete(rows=rows)


class MembershipInline(admin.TabularInline):
    """The project's members, shown; they are changed on the project's Members page or under
    Memberships here (both through telemetry.services.membership_set, which keeps an admin)."""

    model = Membership
    extra = 0
    fields = ["user", "role", "created_at"]
    readonly_fields = ["user", "role", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(EditedThroughServicesAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["fleet_version"]
    inlines = [MembershipInline]

    def save_row(self, obj: Project, form: Any) -> None:
        edits.project_save(project=obj)

    def delete_rows(self, rows: Sequence[Project]) -> None:
        edits.projects_delete(projects=rows)


@admin.register(Membership)
class MembershipAdmin(CheckedInitialAdmin):
    """Roles through telemetry.services.membership_set and removals through membership_remove,
    as on the Members page: a project is never left without an admin. A membership's user and
    project are fixed once made (add another instead)."""

    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]
    autocomplete_fields = ["user", "project"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["user", "project"] if obj is not None and obj.pk else []

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        try:
            saved = telemetry_services.membership_set(
                project=obj.project, username=obj.user.get_username(), role=obj.role
            )
        except ValidationError as refused:  # the last admin: said, not a 500
            self.message_user(request, " ".join(refused.messages), messages.ERROR)
            return
        obj.pk = saved.pk  # the admin's messages and redirect name the saved row

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        self.delete_queryset(request, Membership.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset:
            try:
                telemetry_services.membership_remove(membership=membership)
            except ValidationError as refused:
                self.message_user(request, " ".join(refused.messages), messages.ERROR)


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    fields = ["number", "status", "started_at", "ended_at", "resumed_from_step", "end_reason"]
    show_change_link = True


@admin.register(Run)
class RunAdmin(EditedThroughServicesAdmin):
    list_display = ["name", "project", "accelerator_type", "accelerator_count", "last_step"]
    list_filter = ["project", "accelerator_type"]
    search_fields = ["name", "project__slug"]
    readonly_fields = ["created_at", "last_step", "last_seen_at", "data_version"]
    inlines = [AttemptInline]

    def save_row(self, obj: Run, form: Any) -> None:
        edits.run_save(run=obj)

    def delete_rows(self, rows: Sequence[Run]) -> None:
        edits.runs_delete(runs=rows)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # The attempts inline: commit=False hands over what to save and what to delete.
        for attempt in formset.save(commit=False):
            edits.attempt_save(attempt=attempt)
        edits.attempts_delete(attempts=formset.deleted_objects)


@admin.register(Attempt)
class AttemptAdmin(EditedThroughServicesAdmin):
    list_display = ["run", "number", "status", "started_at", "ended_at", "resumed_from_step"]
    list_filter = ["status", "run__project"]
    search_fields = ["run__name"]
    list_select_related = ["run", "run__project"]
    autocomplete_fields = ["hosts"]

    def save_row(self, obj: Attempt, form: Any) -> None:
        edits.attempt_save(attempt=obj, hosts=form.cleaned_data["hosts"])

    def delete_rows(self, rows: Sequence[Attempt]) -> None:
        edits.attempts_delete(attempts=rows)


@admin.register(MetricSeries)
class MetricSeriesAdmin(EditedThroughServicesAdmin):
    """Points themselves (composite key, hundreds of millions of rows) are not editable in
    the admin; a series shows its size and its last points instead, and may be deleted (a
    metric logged by mistake) with its points. Series are made by the batches."""

    list_display = ["name", "run", "attempt", "point_count"]
    list_filter = ["run__project", "name"]
    search_fields = ["name", "run__name"]
    list_select_related = ["run", "run__project", "attempt"]
    readonly_fields = ["run", "attempt", "name", "point_count", "last_points"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_rows(self, rows: Sequence[MetricSeries]) -> None:
        edits.series_delete(series=rows)

    @admin.display(description="points")
    def point_count(self, series: MetricSeries) -> int:
        return MetricPoint.objects.filter(series=series).count()

    @admin.display(description="last 20 points (step: value)")
    def last_points(self, series: MetricSeries) -> str:
        rows = MetricPoint.objects.filter(series=series).order_by("-step")[:20]
        return ", ".join(f"{p.step}: {p.value}" for p in rows)


@admin.register(Site)
class SiteAdmin(FleetEditAdmin):
    search_fields = ["name"]


@admin.register(Cluster)
class ClusterAdmin(FleetEditAdmin):
    list_display = ["name", "site"]
    list_filter = ["site"]
    search_fields = ["name"]


@admin.register(Host)
class HostAdmin(FleetEditAdmin):
    readonly_fields = QUARANTINE_FIELDS
    list_display = ["name", "project", "cluster"]
    list_filter = ["project", "cluster"]
    search_fields = ["name"]


@admin.register(Device)
class DeviceAdmin(FleetEditAdmin):
    readonly_fields = QUARANTINE_FIELDS
    list_display = ["uuid", "project", "serial", "host", "index_on_host", "accelerator_type"]
    list_filter = ["project", "accelerator_type"]
    search_fields = ["uuid", "serial", "host__name"]
    autocomplete_fields = ["host"]
