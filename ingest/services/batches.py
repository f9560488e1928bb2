"""Accepting a batch (the request path): validated, stored durably, then enqueued, or
written at once when that is safe. Requeueing and processing again are here too."""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import TypeVar

import psycopg
from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from config.queues import QUEUE_INGEST, QUEUE_INGEST_OVERFLOW
from ingest import batch_ids, caps, rate_limit
from ingest.models import IngestBatch, IngestToken
from ingest.schema import BatchIn, RateLimited, parse_json, validate_batch
from ingest.selectors import batch_accepted_get, batch_project_pending_over
from ingest.services.processing import _apply
from telemetry import services as telemetry_services
from telemetry.models import Project

logger = logging.getLogger(__name__)


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
    project's buckets (ingest.rate_limit), or raises RateLimited; a resend of a batch already
    accepted gets its original answer (duplicate, or conflict) instead of RateLimited."""
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
            # A resend stores nothing and is cheap to answer, and a job's retry loop (its
            # answer lost on the way back, a timeout) must not be held on a batch the server
            # already has. Looked up only once refused: an admitted batch pays nothing more.
            accepted = batch_accepted_get(project_id=token.project_id, batch_id=batch_in.batch_id)
            if accepted is None:
                raise RateLimited(refusal.detail, refusal.retry_after_s)
            digest = hashlib.sha256(body).hexdigest()
            return Acceptance(
                batch=accepted, duplicate=True, conflict=accepted.body_sha256 != digest
            )
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
T = TypeVar("T")
# A request writing at once retries this many times before answering 5xx (the client's
# retry then takes over).
WRITE_AT_ONCE_TRIES = 3


def is_retryable(exc: BaseException) -> bool:
    return (
        isinstance(exc, OperationalError)
        and getattr(exc.__cause__, "sqlstate", None) in RETRYABLE_SQLSTATES
    )


def retried(call: Callable[[], T], *, tries: int) -> T:
    """call(), run again after a deadlock or serialization failure (its whole transaction
    was rolled back, so another run is safe), `tries` runs at most; any other error at once."""
    for _ in range(tries - 1):
        try:
            return call()
        except OperationalError as exc:
            if not is_retryable(exc):
                raise
            # Out of step with the transaction that won the lock.
            time.sleep(random.uniform(0.01, 0.1))
    return call()


def batch_accept(
    *,
    token: IngestToken,
    batch_in: BatchIn,
    body: bytes,
    write_now: bool = False,
    digest: str | None = None,
    hold: Callable[[], None] | None = None,
) -> Acceptance:
    """Store the batch in the database (the durability promise behind the 2xx). Either its
    points are written in the same transaction (write_now, when `writes_at_once`), or the
    body is kept and handed to a worker once the row is committed. `digest` (hex) tells a
    duplicate from a conflict, by default the body's SHA-256; a caller whose batch id
    already hashes the batch's content, and which sends no body because the batch is
    written at once, gives that hash. `hold` runs first in the transaction that stores the
    batch: the caller's row locks, which may raise to store nothing (the MLflow path's
    check that the run's attempt is still the one the batch was built for)."""
    digest = digest or hashlib.sha256(body).hexdigest()
    at_once = write_now and writes_at_once(batch_in)
    if not at_once:
        return _batch_accept(
            token=token, batch_in=batch_in, body=body, digest=digest, at_once=False, hold=hold
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
            hold=hold,
        )
    except (IntegrityError, psycopg.IntegrityError) as exc:
        if remembered is None or not is_missing_reference(exc):
            raise
    # A run, attempt or series this process remembered was deleted meanwhile (the admin,
    # retention); nothing of the batch was stored. Once more, with everything looked up.
    batch_ids.batch_ids_forget(project_id=token.project_id)
    return _batch_accept(
        token=token, batch_in=batch_in, body=body, digest=digest, at_once=True, hold=hold
    )


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
    hold: Callable[[], None] | None = None,
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
        hold=hold,
    )
    return retried(store, tries=WRITE_AT_ONCE_TRIES if at_once else 1)


def _batch_store(
    *,
    token: IngestToken,
    batch_in: BatchIn,
    body: bytes,
    digest: str,
    at_once: bool,
    remembered: batch_ids.BatchIds | None,
    hold: Callable[[], None] | None = None,
) -> Acceptance:
    try:
        with transaction.atomic():
            if hold is not None:
                hold()
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
        batch_process_task.apply_async((batch_pk,), queue=batch_queue(batch_pk=batch_pk))
    except Exception:
        logger.exception("could not enqueue ingest batch %s; the sweeper will retry", batch_pk)


def batch_queue(*, batch_pk: int) -> str:
    """The queue a batch's processing goes on: past its project's share of the ingest queue
    (INGEST_PROJECT_QUEUE_SHARE pending), the overflow queue, so that a flood from one project
    queues behind its own share, not ahead of everyone's (config.queues)."""
    share = settings.INGEST_PROJECT_QUEUE_SHARE
    if share > 0 and batch_project_pending_over(batch_pk=batch_pk, share=share):
        return QUEUE_INGEST_OVERFLOW
    return QUEUE_INGEST


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
