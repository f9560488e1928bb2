"""Writes for runs and their attempts: created on first sight, described, ended, and moved
forward as data arrives. Idempotent on their natural keys (an ingest batch may be processed
more than once)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from telemetry.models import Attempt, Project, Run
from telemetry.services.hardware import hosts_ensure

# run_progress_record's own UPDATE moves the run's version; a deferred bump of it is dropped.
from telemetry.services.versions import _deferred, fleet_version_bump, run_data_version_bump


def run_upsert(*, project: Project, name: str, info: dict[str, Any] | None = None) -> Run:
    """The run named `name` in `project`, created on first sight; `info` fields that are
    present overwrite the stored ones (a job may correct its own description). `info` holds
    Run columns a job describes, already checked (the ingest contract's run_info)."""
    info = dict(info or {})
    if "tags" in info:
        info["tags"] = list(dict.fromkeys(info["tags"]))  # a tag once, in the order sent
    run, created = Run.objects.get_or_create(project=project, name=name, defaults=info)
    if not created and info:
        changed = [key for key, value in info.items() if getattr(run, key) != value]
        for key in changed:
            setattr(run, key, info[key])
        if changed:
            run.save(update_fields=changed)
            run_data_version_bump(run_id=run.pk)
    return run


def attempt_ensure(
    *,
    run: Run,
    number: int,
    started_at: datetime | None = None,
    resumed_from_step: int | None = None,
    hosts: Sequence[str] = (),
    accelerator_count: int | None = None,
) -> Attempt:
    """Attempt `number` of `run`, created if needed. Start details fill in blanks only, so a
    late or repeated attempt_started event never moves a known start."""
    attempt, created = Attempt.objects.get_or_create(run=run, number=number)
    changed: list[str] = []
    if started_at is not None and (attempt.started_at is None or started_at < attempt.started_at):
        attempt.started_at = started_at
        changed.append("started_at")
    if resumed_from_step is not None and attempt.resumed_from_step != resumed_from_step:
        attempt.resumed_from_step = resumed_from_step
        changed.append("resumed_from_step")
    if accelerator_count and attempt.accelerator_count != accelerator_count:
        # A resized cluster (spares out, fewer nodes): this attempt's own count.
        attempt.accelerator_count = accelerator_count
        changed.append("accelerator_count")
    if changed:
        attempt.save(update_fields=changed)
    if hosts:
        attempt.hosts.add(*hosts_ensure(project=run.project_id, names=hosts))
        # A quarantined host is listed in the fleet of the runs that ran on it.
        fleet_version_bump(project_id=run.project_id)
    if created or changed or hosts:
        run_data_version_bump(run_id=run.pk)
    return attempt


def attempt_config_set(*, attempt: Attempt, config: dict[str, Any]) -> bool:
    """Keep `config` (a batch's run_info.config) as the attempt's own; True if it changed."""
    if attempt.config == config:
        return False
    attempt.config = config
    attempt.save(update_fields=["config"])
    run_data_version_bump(run_id=attempt.run_id)
    return True


def attempt_end(*, attempt: Attempt, status: str, ended_at: datetime, reason: str = "") -> Attempt:
    attempt.status = status
    attempt.ended_at = ended_at
    attempt.end_reason = reason
    attempt.save(update_fields=["status", "ended_at", "end_reason"])
    run_data_version_bump(run_id=attempt.run_id)
    return attempt


def attempt_end_if_running(
    *, attempt: Attempt, status: str, ended_at: datetime, reason: str = ""
) -> bool:
    """End `attempt` only if it is still running, in one conditional UPDATE. An end the job
    sent itself (attempt_ended) wins even when its batch commits while ours is in flight:
    PostgreSQL re-checks the WHERE clause on the row it waited for, so there is no lost
    update between reading "running" and writing "failed"."""
    updated = Attempt.objects.filter(pk=attempt.pk, status=Attempt.Status.RUNNING).update(
        status=status, ended_at=ended_at, end_reason=reason
    )
    attempt.refresh_from_db(fields=["status", "ended_at", "end_reason"])
    if updated:
        run_data_version_bump(run_id=attempt.run_id)
    return bool(updated)


def attempt_resumed_from(*, attempt: Attempt, step: int) -> None:
    """The step the attempt resumed from, if no event said so before (the first word
    stands: attempt_started's resume step, or the first restore reported)."""
    if attempt.resumed_from_step is None:
        attempt.resumed_from_step = step
        attempt.save(update_fields=["resumed_from_step"])
        run_data_version_bump(run_id=attempt.run_id)


def run_progress_record(
    *, run: Run, last_step: int, seen_at: datetime | None, data_at: datetime | None = None
) -> None:
    """Move the run's latest step and times forward only (monotonic, so order-independent),
    and its data_version: new points change its pages (the same UPDATE, so an ingest batch
    writes the run's row once). seen_at is when the data arrived, data_at the latest time
    the data itself carries (Run.data_until)."""
    # Written out: every ingest batch runs this UPDATE, and building it from Django
    # expressions (Greatest, Coalesce, Case) cost ~1 ms of the web process's CPU each time,
    # ten times what PostgreSQL spends running it.
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_step = GREATEST(COALESCE(last_step, -1), %(step)s), "
            "data_version = data_version + 1, "
            # Hang detection's clock: moves only with the step (the old row's last_step).
            "last_step_at = CASE WHEN last_step IS NULL OR last_step < %(step)s "
            "THEN %(step_at)s ELSE last_step_at END, "
            "last_seen_at = CASE WHEN %(seen)s::timestamptz IS NULL THEN last_seen_at "
            "ELSE GREATEST(last_seen_at, %(seen)s::timestamptz) END, "
            "data_until = CASE WHEN %(data_at)s::timestamptz IS NULL THEN data_until "
            "ELSE GREATEST(data_until, %(data_at)s::timestamptz) END "
            "WHERE id = %(id)s",
            {
                "step": last_step,
                "step_at": seen_at or timezone.now(),
                "seen": seen_at,
                "data_at": data_at,
                "id": run.pk,
            },
        )
    pending = _deferred.get()
    if pending is not None:
        pending.runs.discard(run.pk)


def run_backfilled(*, run: Run, data_end: datetime) -> None:
    """Mark a run loaded after the fact (the demo, an imported history) as last seen, and last
    advanced, when its data ends, not when the server received it: "last seen" is otherwise
    the receive time, which for a backfill is the load time and would stretch the run's
    elapsed time and observed hours to now."""
    Run.objects.filter(pk=run.pk).update(
        last_seen_at=data_end, last_step_at=data_end, data_until=data_end
    )
    run_data_version_bump(run_id=run.pk)
