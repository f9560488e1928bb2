"""The MLflow API's ingest path: metric points and run lifecycle events as ingest batches
(written before the answer, with the same durability promise as POST /api/v1/ingest, and
processed within the request for MLflow's read-after-write), and log-batch's hot path, one
transaction with the run's lock as its first statement. ingest.services.mlflow holds the
experiments and runs that call it."""

from __future__ import annotations

import hashlib
import logging
import time
from array import array
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.db import connection

from ingest import services as ingest_services
from ingest.checks import MAX_STEP, FieldError, check_metric_name
from ingest.metric_schema import BatchTimes
from ingest.mlflow_checks import MetricColumns, Metrics, MlflowError, invalid, json_float
from ingest.models import IngestBatch, IngestToken, MlflowExperiment, MlflowRun
from ingest.schema import BatchError, BatchIn, validate_batch
from telemetry import selectors as telemetry_selectors
from telemetry.models import Project

logger = logging.getLogger(__name__)

# A concurrent delivery of the same batch (the Celery worker) may hold it; wait this long for
# it to finish before telling the client to retry.
PROCESS_WAIT_S = 20.0


class RunTarget(NamedTuple):
    """What a batch of an MLflow run is written with: the run's MLflow id, its Chronicle
    run's name and the attempt its points go to."""

    run_uuid: str
    run_name: str
    attempt_number: int


def target_of(mlflow_run: MlflowRun) -> RunTarget:
    return RunTarget(mlflow_run.run_uuid, mlflow_run.run.name, mlflow_run.attempt_number)


class _KnownRun(NamedTuple):
    """An MLflow run as this process last read it: its row, its Chronicle run's id and the
    target its batches are built for."""

    pk: int
    run_pk: int
    target: RunTarget


# (project id, MLflow run id) -> the run as this process last read it. log-batch's lock
# statement checks the attempt again inside the batch's own transaction, so an entry that
# went stale (a status change in another process, the run deleted) costs one re-read, never
# a point in the wrong attempt. The Chronicle run's name never changes.
_KNOWN_RUNS: dict[tuple[int, str], _KnownRun] = {}
_KNOWN_RUNS_MAX = 4096


class _AttemptMoved(Exception):
    """The run's attempt changed, or the run went, since this process read it."""


def run_known(*, project: Project, run_id: Any) -> _KnownRun:
    """The run and its current attempt, read without a lock (log-batch's lock is taken in the
    batch's transaction: `_attempt_hold`). Found in one statement without the ORM's model
    instances; the Chronicle run's name is a second, small read through telemetry's selector
    (that table is telemetry's: ingest's SQL names only its own)."""
    if not isinstance(run_id, str) or not run_id:
        raise invalid("Missing value for required parameter 'run_id'.")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, m.run_id, m.attempt_number FROM {MlflowRun._meta.db_table} m "
            f"JOIN {MlflowExperiment._meta.db_table} e ON e.id = m.experiment_id "
            "WHERE m.run_uuid = %s AND e.project_id = %s",
            [run_id, project.pk],
        )
        row = cursor.fetchone()
    if row is None:
        # Another project's run does not exist for this token (never a 403).
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run with id={run_id} not found")
    pk, run_pk, number = row
    known = _KnownRun(
        pk, run_pk, RunTarget(run_id, telemetry_selectors.run_name(run_id=run_pk), number)
    )
    if len(_KNOWN_RUNS) >= _KNOWN_RUNS_MAX:
        _KNOWN_RUNS.clear()
    _KNOWN_RUNS[(project.pk, run_id)] = known
    return known


def _attempt_hold(known: _KnownRun) -> None:
    """Share-lock the run in the batch's transaction and check its attempt: concurrent
    metric-only requests for one run go in together (training loops log from several
    threads), while a status change, which holds the row's update lock, waits for them and
    they for it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT attempt_number FROM {MlflowRun._meta.db_table} "
            "WHERE id = %s AND run_uuid = %s AND run_id = %s FOR SHARE",
            [known.pk, known.target.run_uuid, known.run_pk],
        )
        row = cursor.fetchone()
    if row is None or row[0] != known.target.attempt_number:
        raise _AttemptMoved


# A status change between the read and the lock moves the attempt; more than this in a row
# is a client restarting its run in a loop.
_METRICS_LOG_TRIES = 3


def metrics_log(*, token: IngestToken, run_id: Any, metrics: Metrics) -> IngestBatch:
    """log-batch's usual request, metrics only: the hot path. One transaction, the batch's
    own; the run's lock and attempt check are its first statement."""
    key = (token.project_id, run_id)
    for _ in range(_METRICS_LOG_TRIES):
        known = _KNOWN_RUNS.get(key) or run_known(project=token.project, run_id=run_id)
        try:
            return mlflow_batch_accept(
                token=token,
                target=known.target,
                metrics=metrics,
                hold=partial(_attempt_hold, known),
            )
        except _AttemptMoved:
            _KNOWN_RUNS.pop(key, None)
    raise MlflowError(
        "TEMPORARILY_UNAVAILABLE", "The run's attempt kept changing; retry the request."
    )


# --- The ingest path -------------------------------------------------------------------------


def mlflow_batch_accept(
    *,
    token: IngestToken,
    target: RunTarget,
    metrics: Metrics = (),
    events: list[dict[str, Any]] | None = None,
    run_info: dict[str, Any] | None = None,
    hold: Callable[[], None] | None = None,
) -> IngestBatch:
    """Store an ingest batch for the run's current attempt (call inside the transaction that
    changes the MLflow rows, so both or neither are stored, or give the run's lock as
    `hold`, which batch_accept runs in the batch's own transaction). The batch id hashes what the
    batch stores: a retried request maps to the stored batch and stores nothing twice."""
    batch_in = None
    if metrics and not events and not run_info:
        batch_in = _metrics_batch_in(target, metrics)
    if batch_in is not None and ingest_services.writes_at_once(batch_in):
        # Metrics of the run's current attempt are written in this transaction, as the
        # native API's metric-only batches are: no queue, no re-parse, and no document to
        # encode (its body would not be kept). The batch id's hash stands for the body's.
        body, digest = b"", batch_in.batch_id.rpartition(":")[2]
    else:
        doc = _document(target, metrics, events or [], run_info)
        if batch_in is not None:
            doc["batch_id"] = batch_in.batch_id
        else:
            canonical = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
            doc["batch_id"] = f"mlflow:{target.run_uuid}:{hashlib.sha256(canonical).hexdigest()}"
        body, digest = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS), None
        if batch_in is None:
            try:
                batch_in = _batch_in_checked(doc)
            except BatchError as exc:
                raise invalid(exc.detail) from exc
    try:
        acceptance = ingest_services.batch_accept(
            token=token, batch_in=batch_in, body=body, write_now=True, digest=digest, hold=hold
        )
    except BatchError as exc:  # a cap (ingest.caps): MLflow's clients do not retry a 400
        raise invalid(exc.detail) from exc
    if acceptance.conflict:  # cannot happen while the id hashes the body; never overwrite
        raise MlflowError(
            "RESOURCE_CONFLICT", f"Batch {batch_in.batch_id} exists with another body."
        )
    return acceptance.batch


def _document(
    target: RunTarget,
    metrics: Metrics,
    events: list[dict[str, Any]],
    run_info: dict[str, Any] | None,
) -> dict[str, Any]:
    """The batch as the native API's JSON document: the body a worker parses."""
    doc: dict[str, Any] = {
        "run": target.run_name,
        "attempt": target.attempt_number,
        "metrics": [
            {"name": key, "step": step, "value": json_float(value), "time": stamp_ms / 1000}
            for key, value, stamp_ms, step in metrics
        ],
        "events": events,
    }
    if run_info:
        doc["run_info"] = run_info
    return doc


def _metrics_batch_in(target: RunTarget, metrics: Metrics) -> BatchIn | None:
    """A metric-only batch as `validate_batch` would read its document, built from the
    checked values without that document: each name checked once (MLflow's key check let
    it through; the contract's may be stricter), each step against the contract's limit,
    each distinct time converted once. None when a point needs the document's validation
    (for its exact error) or the batch is over the contract's size.

    Its id hashes the run, the attempt and the points (names, then values, times and steps
    as packed 8-byte numbers): the same request maps to the same batch, at a fraction of
    the cost of encoding and hashing the JSON document (~1.5 ms of 1,000 points)."""
    if len(metrics) > settings.INGEST_MAX_METRICS_PER_BATCH:
        return None
    columns = metrics if isinstance(metrics, MetricColumns) else MetricColumns.of(metrics)
    keys, values, stamps, steps = columns.keys, columns.values, columns.stamps, columns.steps
    try:
        for name in set(keys):
            check_metric_name(name)
    except FieldError:
        return None
    if max(steps) > MAX_STEP:
        return None
    # Each distinct time converted once (a step's metrics share one), then looked up.
    distinct = list(set(stamps))
    converted = BatchTimes().column([stamp / 1000 for stamp in distinct])
    if converted is None:
        return None
    moments = list(map(dict(zip(distinct, converted, strict=True)).__getitem__, stamps))
    content = hashlib.sha256(orjson.dumps([target.run_name, target.attempt_number, keys]))
    content.update(array("d", values).tobytes())
    content.update(array("q", stamps).tobytes())
    content.update(array("q", steps).tobytes())
    try:
        batch_in = validate_batch(
            {
                "batch_id": f"mlflow:{target.run_uuid}:{content.hexdigest()}",
                "run": target.run_name,
                "attempt": target.attempt_number,
            },
            max_metrics=settings.INGEST_MAX_METRICS_PER_BATCH,
            max_events=settings.INGEST_MAX_EVENTS_PER_BATCH,
        )
    except BatchError:
        return None
    batch_in.metrics = list(zip(keys, steps, values, moments, strict=True))
    return batch_in


def _batch_in_checked(doc: dict[str, Any]) -> BatchIn:
    return validate_batch(
        doc,
        max_metrics=settings.INGEST_MAX_METRICS_PER_BATCH,
        max_events=settings.INGEST_MAX_EVENTS_PER_BATCH,
    )


def batch_process_now(batch: IngestBatch) -> None:
    """Process a committed batch in this request, so MLflow's read-after-write holds. The
    Celery task published at commit may race for it: batch_process then waits for the
    worker's lock and finds the batch done; the loop re-checks until then. A failure leaves
    the batch stored and pending and tells the client to retry, which finds the batch by its
    id and tries again."""
    deadline = time.monotonic() + PROCESS_WAIT_S
    while True:
        try:
            ingest_services.batch_process(batch_pk=batch.pk)
        except Exception as exc:
            logger.exception("MLflow request: ingest batch %s failed to process", batch.pk)
            raise MlflowError(
                "TEMPORARILY_UNAVAILABLE",
                "The data is stored but could not be processed yet; retry the request "
                "(nothing is stored twice).",
            ) from exc
        status, last_error = IngestBatch.objects.values_list("status", "last_error").get(
            pk=batch.pk
        )
        if status == IngestBatch.Status.DONE:
            return
        if status == IngestBatch.Status.DEAD:
            raise MlflowError(
                "INTERNAL_ERROR", f"Batch {batch.batch_id} could not be processed: {last_error}"
            )
        if time.monotonic() > deadline:
            raise MlflowError(
                "TEMPORARILY_UNAVAILABLE",
                "The data is stored but still being processed; retry the request.",
            )
        time.sleep(0.05)
