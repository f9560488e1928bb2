from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from ingest import services
from ingest.models import IngestBatch, IngestToken


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    """Tokens are created with `manage.py create_ingest_token` (the plaintext is shown once);
    here they are listed and revoked, through token_revoke (which drops the token from every
    process's cache): nothing else is edited or deleted here."""

    list_display = ["name", "project", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project"]
    search_fields = ["name", "prefix", "project__slug"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at", "created_by"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke selected tokens (immediately)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[IngestToken]) -> None:
        for token in queryset:
            services.token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    """Batches are shown, and processed again through batches_process_again (the action):
    their status is the pipeline's, never edited by hand."""

    list_display = [
        "batch_id",
        "project",
        "run_name",
        "rank",
        "host",
        "status",
        "metric_count",
        "event_count",
        "received_at",
        "process_attempts",
    ]
    list_filter = ["status", "project"]
    search_fields = ["batch_id", "run_name", "host"]
    exclude = ["body"]
    readonly_fields = [
        "project",
        "token",
        "batch_id",
        "run_name",
        "rank",
        "host",
        "body_sha256",
        "metric_count",
        "event_count",
        "received_at",
        "processed_at",
        "process_attempts",
        "last_error",
    ]
    actions = ["requeue"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Process again (dead batches are set back to pending)")
    def requeue(self, request: HttpRequest, queryset: QuerySet[IngestBatch]) -> None:
        count = services.batches_process_again(
            batch_pks=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(request, f"Re-enqueued {count} batch(es).", messages.SUCCESS)
