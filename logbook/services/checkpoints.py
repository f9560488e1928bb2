"""Writes for checkpoints: a save (upserted by run and step) and an attempt's restore from
one (recounted, so a reprocessed event cannot count twice)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from logbook.models import Checkpoint, CheckpointRestore
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run


def checkpoint_record(
    *, run: Run, step: int, attempt: Attempt | None = None, **fields: Any
) -> Checkpoint:
    """Upsert the checkpoint of `run` at `step` with the fields given."""
    allowed = {
        "saved_at",
        "blocking_save_s",
        "async_save_s",
        "size_bytes",
        "tier",
        "uri",
        "checksum",
        "status",
    }
    values = {key: value for key, value in fields.items() if key in allowed and value is not None}
    if attempt is not None:
        values["attempt"] = attempt
    checkpoint, _ = Checkpoint.objects.update_or_create(run=run, step=step, defaults=values)
    telemetry_services.run_data_version_bump(run_id=run.pk)
    return checkpoint


@transaction.atomic
def checkpoint_restore_record(
    *,
    attempt: Attempt,
    step: int,
    restored_at: datetime | None = None,
    restore_s: float | None = None,
) -> CheckpointRestore:
    """Record that `attempt` resumed from the checkpoint at `step` (created as a placeholder
    if its save was never reported), and recount that checkpoint's restores."""
    checkpoint, _ = Checkpoint.objects.get_or_create(run=attempt.run, step=step)
    # The attempt's earlier restore may have named another checkpoint: recount both.
    previous = CheckpointRestore.objects.filter(attempt=attempt).values_list(
        "checkpoint_id", flat=True
    )
    touched = {checkpoint.pk, *previous}
    restore, _ = CheckpointRestore.objects.update_or_create(
        attempt=attempt,
        defaults={"checkpoint": checkpoint, "restored_at": restored_at, "restore_s": restore_s},
    )
    telemetry_services.attempt_resumed_from(attempt=attempt, step=step)
    # Recounted, not incremented, so a reprocessed event cannot count twice.
    restores = (
        CheckpointRestore.objects.filter(checkpoint=OuterRef("pk"))
        .values("checkpoint")
        .annotate(n=Count("pk"))
        .values("n")[:1]
    )
    Checkpoint.objects.filter(pk__in=touched).update(restored_count=Coalesce(Subquery(restores), 0))
    telemetry_services.run_data_version_bump(run_id=attempt.run_id)
    return restore
