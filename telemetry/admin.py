from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from telemetry import services
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


class FleetEditAdmin(admin.ModelAdmin):
    """Hardware and places are shared by every project's fleet: an edit here moves every
    fleet_version, so the cached fleet pages show it on the next request."""

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        services.fleet_version_bump(project_id=None)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["fleet_version"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]
    autocomplete_fields = ["user", "project"]


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    fields = ["number", "status", "started_at", "ended_at", "resumed_from_step", "end_reason"]
    show_change_link = True


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "accelerator_type", "accelerator_count", "last_step"]
    list_filter = ["project", "accelerator_type"]
    search_fields = ["name", "project__slug"]
    readonly_fields = ["created_at", "last_step", "last_seen_at", "data_version"]
    inlines = [AttemptInline]

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # After the attempts inline: the run's cached pages show the edit on the next request.
        super().save_related(request, form, formsets, change)
        services.run_data_version_bump(run_id=form.instance.pk)
        services.fleet_version_bump(project_id=form.instance.project_id)


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["run", "number", "status", "started_at", "ended_at", "resumed_from_step"]
    list_filter = ["status", "run__project"]
    search_fields = ["run__name"]
    list_select_related = ["run", "run__project"]

    def save_model(self, request: HttpRequest, obj: Attempt, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        services.run_data_version_bump(run_id=obj.run_id)

    autocomplete_fields = ["hosts"]


@admin.register(MetricSeries)
class MetricSeriesAdmin(admin.ModelAdmin):
    """Points themselves (composite key, hundreds of millions of rows) are not editable in
    the admin; a series shows its size and its last points instead."""

    list_display = ["name", "run", "attempt", "point_count"]
    list_filter = ["run__project", "name"]
    search_fields = ["name", "run__name"]
    list_select_related = ["run", "run__project", "attempt"]
    readonly_fields = ["run", "attempt", "name", "point_count", "last_points"]

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
    list_display = ["name", "project", "cluster"]
    list_filter = ["project", "cluster"]
    search_fields = ["name"]


@admin.register(Device)
class DeviceAdmin(FleetEditAdmin):
    list_display = ["uuid", "project", "serial", "host", "index_on_host", "accelerator_type"]
    list_filter = ["project", "accelerator_type"]
    search_fields = ["uuid", "serial", "host__name"]
    autocomplete_fields = ["host"]
