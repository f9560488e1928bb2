"""Writes for ingest: tokens, accepting batches (the durable step before the 202) and
processing them into points and records (the worker's step).

Processing a batch is idempotent: it runs in one transaction, every write is keyed
(points by (series, step), records by (run, source_key) or (run, step)), and the batch is
marked done in that same transaction. A worker killed half-way leaves nothing behind; a
redelivered message finds the batch done and returns.
"""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from operator import itemgetter

import psycopg
from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import F, Max
from django.utils import timezone

from ingest import batch_ids, caps, rate_limit
from ingest.metric_schema import MetricIn
from ingest.models import IngestBatch, IngestToken
from ingest.schema import BatchIn, EventIn, RateLimited, parse_json, validate_batch
from ingest.selectors import (
    TOKEN_PREFIX,
    batches_pending_before,
    token_cache_forget,
    token_hash,
)
from logbook.choices import LogbookEntryKind, TimePrecision
from logbook.services import checkpoints as checkpoint_services
from logbook.services import drafts as draft_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Project, Run
from telemetry.services import rank_timings

logger = logging.getLogger(__name__)


# --- Tokens ----------------------------------------------------------------------------------


def token_create(
    *,
    project: Project,
    name: str,
    created_by: object | None = None,
    expires_at: datetime | None = None,
) -> tuple[IngestToken, str]:
    """Create a token; returns it with its plaintext, which is not stored anywhere."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = IngestToken.objects.create(
        project=project,
        name=name,
        prefix=plaintext[: len(TOKEN_PREFIX) + 6],
        key_hash=token_hash(plaintext),
        created_by=created_by,
        expires_at=expires_at,
    )
    return token, plaintext


def token_revoke(*, token: IngestToken) -> IngestToken:
    """Revoke at once in this process; other processes read the token again within
    settings.INGEST_TOKEN_CACHE_S (ingest.selectors.token_get_by_plaintext)."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    token_cache_forget()
    return token


def token_touch(*, token: IngestToken) -> None:
    """Record use at most once a minute: a write per request would double ingest's cost."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        IngestToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now  # the instance may be the cached one


# --- Accepting a batch (request path) --------------------------------------------------------


@dataclass(frozen=True)
class Acceptance:
    batch: IngestBatch
    duplicate: bool
    # Same batch_id, different body: refused, never silently overwritten.
    conflict: bool


def batch_submit(
    *, token: IngestToken, body: bytes, write_now: bool = False, rate_limited: bool = False
) -> Acceptance:
    """Parse, validate and durably accept one request body (raises BatchError). With
    write_now, a batch that `writes_at_once` allows is written before the answer. With
    rate_limited, the batch first takes its request and points from the token's and the
    project's buckets (ingest.rate_limit), or raises RateLimited."""
    batch_in = validate_batch(
        parse_json(body),
        max_metrics=settings.INGEST_MAX_METRICS_PER_BATCH,
        max_events=settings.INGEST_MAX_EVENTS_PER_BATCH,
    )
    if rate_limited:
        refusal = rate_limit.ingest_admit(
            token_id=token.pk,
            project_id=token.project_id,
            points=len(batch_in.metrics),
            now_s=time.time(),
        )
        if refusal is not None:
            raise RateLimited(refusal.detail, refusal.retry_after_s)
    return batch_accept(token=token, batch_in=batch_in, body=body, write_now=write_now)


def writes_at_once(batch_in: BatchIn) -> bool:
    """Whether a batch may be written in the request instead of by a worker: metrics only,
    with their attempt named. Such a batch is one keyed insert, as cheap as storing its body
    and far cheaper than storing, queueing and re-parsing it. Events stay with the workers:
    their side effects (incidents, drafts, webhooks) are what the retries are for, and
    without an attempt number the attempt depends on events that may still be queued."""
    return (
        settings.INGEST_WRITE_METRICS_AT_ONCE
        and bool(batch_in.metrics)
        and not batch_in.events
        and batch_in.attempt is not None
    )


class _DuplicateBatch(Exception):
    pass


# PostgreSQL's deadlock_detected and serialization_failure: the whole transaction was rolled
# back and succeeds when run again. Two batches of one run written at once can take row
# locks in opposite orders (one updates the attempt row, then inserts metric series; the
# other inserts the same series, then ends the attempt).
RETRYABLE_SQLSTATES = {"40P01", "40001"}
# A request writing at once retries this many times before answering 5xx (the client's
# retry then takes over).
WRITE_AT_ONCE_TRIES = 3


def is_retryable(exc: BaseException) -> bool:
    return (
        isinstance(exc, OperationalError)
        and getattr(exc.__cause__, "sqlstate", None) in RETRYABLE_SQLSTATES
    )


def batch_accept(
    *,
    token: IngestToken,
    batch_in: BatchIn,
    body: bytes,
    write_now: bool = False,
    digest: str | None = None,
) -> Acceptance:
    """Store the batch in the database (the durability promise behind the 2xx). Either its
    points are written in the same transaction (write_now, when `writes_at_once`), or the
    body is kept and handed to a worker once the row is committed. `digest` (hex) tells a
    duplicate from a conflict, by default the body's SHA-256; a caller whose batch id
    already hashes the batch's content, and which sends no body because the batch is
    written at once, gives that hash."""
    digest = digest or hashlib.sha256(body).hexdigest()
    at_once = write_now and writes_at_once(batch_in)
    if not at_once:
        return _batch_accept(
            token=token, batch_in=batch_in, body=body, digest=digest, at_once=False
        )
    assert batch_in.attempt is not None  # writes_at_once
    remembered = batch_ids.batch_ids_get(
        project_id=token.project_id, run_name=batch_in.run, number=batch_in.attempt
    )
    if remembered is not None and not remembered.series.keys() >= set(
        map(itemgetter(0), batch_in.metrics)
    ):
        # A new metric: looked up (or created, past its cap check) with its run and attempt.
        remembered = None
    try:
        return _batch_accept(
            token=token,
            batch_in=batch_in,
            body=body,
            digest=digest,
            at_once=True,
            remembered=remembered,
        )
    except (IntegrityError, psycopg.IntegrityError) as exc:
        if remembered is None or not is_missing_reference(exc):
            raise
    # A run, attempt or series this process remembered was deleted meanwhile (the admin,
    # retention); nothing of the batch was stored. Once more, with everything looked up.
    batch_ids.batch_ids_forget(project_id=token.project_id)
    return _batch_accept(token=token, batch_in=batch_in, body=body, digest=digest, at_once=True)


def is_missing_reference(exc: BaseException) -> bool:
    """Whether PostgreSQL refused a row whose series, attempt or run is gone
    (foreign_key_violation, from a foreign key or the points' series check)."""
    sqlstate = getattr(exc, "sqlstate", None) or getattr(exc.__cause__, "sqlstate", None)
    return sqlstate == "23503"


def _batch_accept(
    *,
    token: IngestToken,
    batch_in: BatchIn,
    body: bytes,
    digest: str,
    at_once: bool,
    remembered: batch_ids.BatchIds | None = None,
) -> Acceptance:
    # Before anything is stored, on both paths: a worker never refuses a batch for a cap.
    # A remembered batch's names were all stored for its attempt, so none is new (one
    # deleted since fails the write, and batch_accept tries again with the check).
    if remembered is None:
        caps.batch_caps_check(project_id=token.project_id, batch_in=batch_in)
    store = partial(
        _batch_store,
        token=token,
        batch_in=batch_in,
        body=body,
        digest=digest,
        at_once=at_once,
        remembered=remembered,
    )
    for _ in range(WRITE_AT_ONCE_TRIES - 1 if at_once else 0):
        try:
            return store()
        except OperationalError as exc:
            if not is_retryable(exc):
                raise
            # Out of step with the transaction that won the lock.
            time.sleep(random.uniform(0.01, 0.1))
    return store()


def _batch_store(
    *,
    token: IngestToken,
    batch_in: BatchIn,
    body: bytes,
    digest: str,
    at_once: bool,
    remembered: batch_ids.BatchIds | None,
) -> Acceptance:
    try:
        with transaction.atomic():
            try:
                batch = IngestBatch.objects.create(
                    project_id=token.project_id,
                    token=token,
                    batch_id=batch_in.batch_id,
                    run_name=batch_in.run,
                    rank=batch_in.rank,
                    host=batch_in.host,
                    body_sha256=digest,
                    # Kept only for the worker that will process it. A batch written at
                    # once is done: nothing reads its body again (requeue skips done
                    # batches) and its digest tells duplicates from conflicts, while
                    # storing it cost ~1.7 ms of PostgreSQL's CPU per 1,000-point batch
                    # (compressing and TOASTing 80 kB) and ~0.5 ms here (rendering it).
                    body=b"" if at_once else body,
                    metric_count=len(batch_in.metrics),
                    event_count=len(batch_in.events),
                    status=IngestBatch.Status.DONE if at_once else IngestBatch.Status.PENDING,
                    attempt_number=batch_in.attempt if at_once else None,
                    processed_at=timezone.now() if at_once else None,
                )
            except IntegrityError:
                # Leave the aborted transaction before reading the batch already there.
                raise _DuplicateBatch from None
            if at_once:
                batch.project = token.project
                with telemetry_services.version_bumps_deferred():
                    _apply(batch, batch_in, remember=True, remembered=remembered)
            else:
                transaction.on_commit(lambda: batch_enqueue(batch_pk=batch.pk))
    except _DuplicateBatch:
        batch = IngestBatch.objects.get(project_id=token.project_id, batch_id=batch_in.batch_id)
        return Acceptance(batch=batch, duplicate=True, conflict=batch.body_sha256 != digest)
    return Acceptance(batch=batch, duplicate=False, conflict=False)


def batch_enqueue(*, batch_pk: int) -> None:
    """Publish the processing task. A failed publish is logged, not raised: the batch is
    already committed and the sweeper will pick it up."""
    from ingest.tasks import batch_process_task  # tasks import services; avoid the cycle

    try:
        batch_process_task.delay(batch_pk)
    except Exception:
        logger.exception("could not enqueue ingest batch %s; the sweeper will retry", batch_pk)


def batches_requeue(*, project: Project, batch_pks: Sequence[int] | None = None) -> int:
    """Set the project's dead batches (all of them, or those of `batch_pks`) back to pending
    with a fresh attempt budget, and publish them again. Done batches are never processed
    twice; batches of another project are out of reach. Returns how many were re-queued."""
    dead = IngestBatch.objects.filter(project=project, status=IngestBatch.Status.DEAD)
    if batch_pks is not None:
        dead = dead.filter(pk__in=batch_pks)
    with transaction.atomic():
        pks = list(dead.select_for_update().values_list("pk", flat=True))
        IngestBatch.objects.filter(pk__in=pks).update(
            status=IngestBatch.Status.PENDING, process_attempts=0
        )
        for pk in pks:
            transaction.on_commit(partial(batch_enqueue, batch_pk=pk))
    logger.info("re-queued %d dead ingest batch(es) of project %s", len(pks), project.slug)
    return len(pks)


def batches_process_again(*, batch_pks: Sequence[int]) -> int:
    """The staff's re-queue (the admin): the batches of `batch_pks` not done yet, of any
    project, go back to pending with a fresh attempt budget and are published at once.
    Returns how many."""
    pks = list(
        IngestBatch.objects.filter(pk__in=batch_pks)
        .exclude(status=IngestBatch.Status.DONE)
        .values_list("pk", flat=True)
    )
    IngestBatch.objects.filter(pk__in=pks).update(
        status=IngestBatch.Status.PENDING, process_attempts=0
    )
    for pk in pks:
        batch_enqueue(batch_pk=pk)
    return len(pks)


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
    if any(map(_changes_config, batch_in.events)):
        # Reported after the attempts it separates: their suspicions were never corruption.
        sdc_services.sdc_divergences_withdraw(run=run)
    # Restart drafts last: the batch's restore and interruption are recorded by now.
    draft_services.restart_drafts_refresh(events=batch_in.events, attempt_of=context.event_attempt)
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


class _BatchContext:
    def __init__(self, *, batch: IngestBatch, run: Run, default_number: int) -> None:
        self.batch = batch
        self.run = run
        self.default_number = default_number
        self._attempts: dict[int, Attempt] = {}

    def attempt(self, number: int | None = None) -> Attempt:
        number = number or self.default_number
        if number not in self._attempts:
            self._attempts[number] = telemetry_services.attempt_ensure(run=self.run, number=number)
        return self._attempts[number]

    def event_attempt(self, event: EventIn) -> Attempt:
        return self.attempt(event.fields.get("attempt"))

    def source_key(self, event: EventIn) -> str:
        # A client-chosen id makes the record idempotent across batches; otherwise the
        # position in this batch makes it idempotent across redeliveries of the batch.
        return str(event.fields.get("id") or f"batch-{self.batch.pk}:{event.index}")


def _attempt_started(context: _BatchContext, event: EventIn) -> None:
    number = event.fields.get("attempt") or context.default_number
    context._attempts[number] = telemetry_services.attempt_ensure(
        run=context.run,
        number=number,
        started_at=event.time,
        resumed_from_step=event.fields.get("resumed_from_step"),
        hosts=event.fields.get("hosts", ()),
        accelerator_count=event.fields.get("accelerator_count"),
    )


def _attempt_ended(context: _BatchContext, event: EventIn) -> None:
    telemetry_services.attempt_end(
        attempt=context.event_attempt(event),
        status=event.fields.get("status", Attempt.Status.UNKNOWN),
        ended_at=event.time,
        reason=event.fields.get("reason", ""),
    )


def _checkpoint_saved(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    checkpoint_services.checkpoint_record(
        run=context.run,
        step=fields["step"],
        attempt=context.event_attempt(event),
        saved_at=event.time,
        **{key: fields.get(key) for key in fields if key not in ("step", "attempt")},
    )


def _checkpoint_restored(context: _BatchContext, event: EventIn) -> None:
    checkpoint_services.checkpoint_restore_record(
        attempt=context.event_attempt(event),
        step=event.fields["step"],
        restored_at=event.time,
        restore_s=event.fields.get("restore_s"),
    )


def _interruption(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    interruption_services.interruption_record(
        run=context.run,
        source_key=context.source_key(event),
        occurred_at=event.time,
        attempt=context.event_attempt(event),
        category=fields.get("category", ""),
        component=fields.get("component", ""),
        planned=fields.get("planned"),
        hosts=fields.get("hosts", ()),
        devices=fields.get("devices", ()),
        message=fields.get("message", ""),
        detected_at=fields.get("detected_at"),
        recovered_at=fields.get("recovered_at"),
        manual_intervention=fields.get("manual_intervention", False),
        lost_steps=fields.get("lost_steps"),
        step=fields.get("step"),
        reported_lost_s=fields.get("lost_s"),
        time_precision=fields.get("time_precision", TimePrecision.EXACT),
        occurred_until=fields.get("time_until"),
        local_time=fields.get("local_time", ""),
    )


def _sdc_suspected(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    sdc_services.sdc_record(
        run=context.run,
        source_key=context.source_key(event),
        step=fields["step"],
        detected_at=event.time,
        attempt=context.event_attempt(event),
        device=fields.get("device", ""),
        host=fields.get("host", ""),
        detection=fields.get("detection", "other"),
        observed_value=fields.get("value"),
        message=fields.get("message", ""),
    )


def _note(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    entry_services.logbook_entry_record(
        run=context.run,
        source_key=context.source_key(event),
        title=fields["title"],
        occurred_at=event.time,
        attempt=context.event_attempt(event),
        body=fields.get("body", ""),
        kind=fields.get("kind", "note"),
        step=fields.get("step"),
        author_name=f"token {context.batch.token.name}" if context.batch.token else "ingest",
        is_automatic=True,
    )


def _step_times(context: _BatchContext, event: EventIn) -> None:
    telemetry_services.step_starts_record(
        attempt=context.event_attempt(event),
        first_step=event.fields["first_step"],
        start_times=event.fields["start_times"],
    )


def _interval(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    telemetry_services.interval_record(
        run=context.run,
        attempt=context.event_attempt(event),
        kind=fields["kind"],
        label=fields.get("label", ""),
        started_at=fields["start"],
        ended_at=fields["end"],
        step=fields.get("step"),
        source_key=context.source_key(event),
    )


def _rank_timings(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    rank_timings.rank_timings_record(
        attempt=context.event_attempt(event),
        first_step=fields["first_step"],
        last_step=fields.get("last_step", fields["first_step"]),
        ranks=fields["ranks"],
        sections=fields["sections"],
        hosts=fields.get("hosts"),
        devices=fields.get("devices"),
        recorded_at=event.time,
    )


def _heartbeat(context: _BatchContext, event: EventIn) -> None:
    # Receiving the batch already moves last_seen_at (see _apply); nothing else to do.
    return None


# One per event type of ingest.contract.EVENTS (a test holds the two to the same names).
EVENT_HANDLERS: dict[str, Callable[[_BatchContext, EventIn], None]] = {
    "attempt_started": _attempt_started,
    "heartbeat": _heartbeat,
    "step_times": _step_times,
    "interval": _interval,
    "attempt_ended": _attempt_ended,
    "checkpoint_saved": _checkpoint_saved,
    "checkpoint_restored": _checkpoint_restored,
    "interruption": _interruption,
    "sdc_suspected": _sdc_suspected,
    "note": _note,
    "rank_timings": _rank_timings,
}


# --- Sweeper ---------------------------------------------------------------------------------


def batches_sweep(*, older_than_s: int | None = None, limit: int = 1000) -> int:
    """Re-enqueue batches left pending (lost Celery message, Redis restart, crashed publish).
    Returns how many were re-enqueued."""
    age = settings.INGEST_SWEEP_AFTER_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=age)
    pks = list(batches_pending_before(cutoff=cutoff, limit=limit).values_list("pk", flat=True))
    for pk in pks:
        batch_enqueue(batch_pk=pk)
    return len(pks)
