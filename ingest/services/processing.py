"""Processing a batch (the worker path). Idempotent: one transaction, every write keyed
(points by (series, step), records by (run, source_key) or (run, step)), the batch marked
done in that same transaction. A worker killed half-way leaves nothing behind; a redelivered
message finds the batch done and returns."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from operator import itemgetter

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from ingest import batch_ids
from ingest.metric_schema import MetricIn
from ingest.models import IngestBatch
from ingest.schema import BatchIn, EventIn, parse_json, validate_batch
from ingest.services.events import EVENT_HANDLERS, _attempt_started, _BatchContext
from logbook.choices import LogbookEntryKind
from logbook.services import autotriage as autotriage_services
from logbook.services import drafts as draft_services
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

logger = logging.getLogger(__name__)


# --- Processing a batch (worker path) -----------------------------------------------------------


def batch_process(*, batch_pk: int) -> str:
    """Expand a pending batch into points and records. Returns what happened, for logs."""
    pending = IngestBatch.objects.filter(pk=batch_pk, status=IngestBatch.Status.PENDING)
    # Count the attempt in its own committed transaction, so a worker killed mid-batch still
    # leaves a trace: after INGEST_MAX_PROCESS_ATTEMPTS the batch is parked as dead.
    if not pending.update(process_attempts=F("process_attempts") + 1):
        return "not pending"
    attempts, previous_error = IngestBatch.objects.values_list(
        "process_attempts", "last_error"
    ).get(pk=batch_pk)
    if attempts > settings.INGEST_MAX_PROCESS_ATTEMPTS:
        pending.update(
            status=IngestBatch.Status.DEAD,
            last_error=f"gave up after {attempts - 1} processing attempts; last: {previous_error}",
        )
        logger.error("ingest batch %s parked as dead after %s attempts", batch_pk, attempts - 1)
        return "dead"
    # Stays only if this attempt never finishes (success and exceptions overwrite it): that
    # is how a dead batch tells that its worker died.
    pending.update(
        last_error=f"processing started at {timezone.now():%Y-%m-%d %H:%M:%S} UTC; the worker "
        "died before finishing (killed, out of memory, or past the time limit)"
    )
    try:
        return _batch_process_locked(batch_pk)
    except Exception as exc:
        IngestBatch.objects.filter(pk=batch_pk).update(last_error=repr(exc)[:2000])
        raise


@transaction.atomic
def _batch_process_locked(batch_pk: int) -> str:
    # A duplicate delivery running at the same time waits for the lock, then finds the batch
    # done. (SKIP LOCKED would be faster, but two deliveries can each skip the other's brief
    # counter update and leave the batch pending until the sweeper comes by.)
    # of=("self",): lock the batch row only, not the joined project row every batch shares.
    batch = (
        IngestBatch.objects.select_for_update(of=("self",))
        .select_related("project")
        .filter(pk=batch_pk, status=IngestBatch.Status.PENDING)
        .first()
    )
    if batch is None:
        return "not pending"
    if not batch.body:
        # Written in its request (_batch_store), body not kept: its points were stored then,
        # so a batch forced back to pending has nothing left to do.
        batch.status = IngestBatch.Status.DONE
        batch.save(update_fields=["status"])
        return "done"
    batch_in = validate_batch(
        parse_json(bytes(batch.body)),
        max_metrics=settings.INGEST_MAX_METRICS_PER_BATCH,
        max_events=settings.INGEST_MAX_EVENTS_PER_BATCH,
    )
    with telemetry_services.version_bumps_deferred():
        batch.attempt_number = _apply(batch, batch_in)
    batch.status = IngestBatch.Status.DONE
    batch.processed_at = timezone.now()
    batch.last_error = ""
    batch.save(update_fields=["status", "processed_at", "last_error", "attempt_number"])
    return "done"


def _apply(
    batch: IngestBatch,
    batch_in: BatchIn,
    *,
    remember: bool = False,
    remembered: batch_ids.BatchIds | None = None,
) -> int:
    """Write the batch's points and records; returns the attempt number its points went to.
    With `remember` (a batch written at once: metrics of a named attempt, no events), the
    run, attempt and series it resolves are remembered for the process's next batches, and
    `remembered` is what it may use instead of reading them (ingest.batch_ids)."""
    if remembered is not None and not batch_in.run_info:
        run = remembered.run
    else:
        # run_info is applied whenever a batch brings it.
        run = telemetry_services.run_upsert(
            project=batch.project, name=batch_in.run, info=batch_in.run_info
        )
        if remembered is not None and remembered.run.pk != run.pk:
            remembered = None
    default_number = batch.attempt_number or _default_attempt_number(run, batch_in)
    context = _BatchContext(batch=batch, run=run, default_number=default_number)
    if remembered is not None:
        context._attempts[default_number] = remembered.attempt
    # Attempt starts first: the batch's points may belong to the attempt they start.
    for event in batch_in.events:
        if event.type == "attempt_started":
            _attempt_started(context, event)
    attempt = context.attempt(default_number)
    # run_info.config is the config of the attempt the batch belongs to (the run keeps the
    # latest as well): a later attempt's no longer hides what an earlier one ran.
    config_changed = False
    if batch_in.run_info and isinstance(batch_in.run_info.get("config"), dict):
        config_changed = telemetry_services.attempt_config_set(
            attempt=attempt, config=batch_in.run_info["config"]
        )
    # MetricIn is the (name, step, value, time) tuple the insert takes: no copy per point.
    points = batch_in.metrics
    series_ids = None
    if remember and points:
        series_ids = _series_resolve(batch, run, attempt, points, remembered)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=points, record_progress=False, series_ids=series_ids
    )
    for event in batch_in.events:
        if event.type != "attempt_started":  # applied first, above
            EVENT_HANDLERS[event.type](context, event)
    deterministic = {name for name in run.deterministic_metrics or () if isinstance(name, str)}
    if points and deterministic:
        # A step this attempt replays must match what an earlier attempt reported there.
        # Only the deterministic metrics are compared, so only their steps are gathered.
        # After the events: a config change the batch reports exempts the attempt pair.
        steps_by_metric: dict[str, list[int]] = {}
        for name, step, _, _ in points:
            if name in deterministic:
                steps_by_metric.setdefault(name, []).append(step)
        sdc_services.sdc_divergence_check(run=run, attempt=attempt, steps_by_metric=steps_by_metric)
    if config_changed or any(map(_changes_config, batch_in.events)):
        # Reported after the attempts it separates: their suspicions were never corruption.
        sdc_services.sdc_divergences_withdraw(run=run)
    # Restart drafts last: the batch's restore and interruption are recorded by now.
    draft_services.restart_drafts_refresh(events=batch_in.events, attempt_of=context.event_attempt)
    if config_changed:
        # Its before → after table reads the attempt's config, which may come after its start.
        draft_services.restart_entry_draft(attempt=attempt)
        if attempt.started_at is not None:
            # A config change is triage evidence of the attempt's interruptions (and of the
            # next attempt's, compared against it): remake what was suggested without it.
            autotriage_services.run_evidence_arrived(run_id=run.pk, since=attempt.started_at)
    # Last, and once: this UPDATE locks the run's row until commit, and every batch of the
    # run needs it, so holding it briefly is what lets workers share a run.
    # "Last seen" (and the stalled-run alert) is when the server received the batch: a
    # client's clock may be wrong or absent (metrics need no `time`), and a time sent a day
    # ahead would keep the run "seen" and silence the alert.
    # Rank timings advance the step too: a job may send only those (and heartbeats).
    steps = [
        event.fields.get("last_step", event.fields["first_step"])
        for event in batch_in.events
        if event.type == "rank_timings"
    ]
    if points:
        steps.append(max(map(itemgetter(1), points)))
    if points or batch_in.events:
        telemetry_services.run_progress_record(
            run=run,
            last_step=max(steps, default=run.last_step or 0),
            seen_at=batch.received_at,
            data_at=_data_time(batch_in, received_at=batch.received_at),
        )
    return default_number


def _changes_config(event: EventIn) -> bool:
    if event.type == "note":
        return event.fields.get("kind") == LogbookEntryKind.CONFIG_CHANGE
    if event.type == "interruption":
        return event.fields.get("category") == "config-change"  # the taxonomy's slug
    return False


def _data_time(batch_in: BatchIn, *, received_at: datetime) -> datetime | None:
    """The latest time the batch's data carries (its events' and points' times), capped at
    when it was received: a backfill's data ends when it happened, and a clock running ahead
    must not stretch a run's observed time past what has arrived."""
    times = [event.time for event in batch_in.events]
    times.extend(point[3] for point in batch_in.metrics if point[3] is not None)
    return min(max(times), received_at) if times else None


def _series_resolve(
    batch: IngestBatch,
    run: Run,
    attempt: Attempt,
    points: Sequence[MetricIn],
    remembered: batch_ids.BatchIds | None,
) -> dict[str, int]:
    """The attempt's series ids for the points' names: remembered (batch_accept made sure
    they cover every name), or from series_ensure (created where missing, as always). What
    was read (the series, a run read again for its run_info) is remembered once the batch
    commits."""
    if remembered is not None and run is remembered.run:
        return remembered.series  # a live run's every batch after its first
    if remembered is not None:
        series_ids = remembered.series
    else:
        names = set(map(itemgetter(0), points))
        series_ids = telemetry_services.series_ensure(run=run, attempt=attempt, names=names)
    transaction.on_commit(
        partial(
            batch_ids.batch_ids_remember,
            project_id=batch.project_id,
            run=run,
            attempt=attempt,
            series=series_ids,
            renewed=remembered,
        )
    )
    return series_ids


def _default_attempt_number(run: Run, batch_in: BatchIn) -> int:
    """The batch's attempt: as sent; else the one an attempt_started event in it names;
    else the run's current (highest) attempt; else a new one after it; else 1."""
    if batch_in.attempt is not None:
        return batch_in.attempt
    current = run.attempts.aggregate(top=Max("number"))["top"]
    for event in batch_in.events:
        if event.type == "attempt_started":
            return int(event.fields.get("attempt") or (current or 0) + 1)
    return current or 1
