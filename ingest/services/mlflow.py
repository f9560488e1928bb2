"""Writes of the MLflow tracking API on Chronicle's model: experiments, runs, params, tags and
metrics (the checks of the inputs are in ingest.mlflow_checks, the reads in
ingest.selectors.mlflow).

Metric points and run lifecycle changes (start, end, FAILED/KILLED, resume) become ingest
batches: an IngestBatch row whose batch id is derived from what it stores, written before the
answer (the same durability promise as POST /api/v1/ingest), so a client retry stores nothing
twice. The batch is then processed within the request, because MLflow clients read their
writes back at once (get-history, runs/get) and expect synchronous semantics.

Mapping: an experiment is a named group of runs in the token's project (MlflowExperiment); an
MLflow run is one Chronicle run (MlflowRun.run), named from `run_name` / the `mlflow.runName`
tag; each time MLflow sets a terminated run back to RUNNING a new Chronicle attempt starts.
A Chronicle point is keyed by (attempt, name, step) and the first value stored wins, where
MLflow appends: a second value logged at the same step of the same attempt is not kept.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from ingest import caps
from ingest import services as ingest_services
from ingest.checks import MAX_STEP, FieldError, check_metric_name
from ingest.metric_schema import BatchTimes
from ingest.mlflow_checks import (
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    MAX_EXPERIMENT_NAME_LENGTH,
    RUN_NAME_TAG,
    TERMINAL_STATUSES,
    MetricColumns,
    Metrics,
    MlflowError,
    check_batch_limits,
    check_int,
    invalid,
    json_float,
    now_ms,
)
from ingest.mlflow_tags import run_labels_sync
from ingest.models import IngestBatch, IngestToken, MlflowExperiment, MlflowRun
from ingest.schema import BatchError, BatchIn, validate_batch
from ingest.selectors.mlflow import mlflow_run_find
from telemetry import selectors as telemetry_selectors
from telemetry import services as telemetry_services
from telemetry.models import Project, Run

logger = logging.getLogger(__name__)

# MLflow's terminal statuses as Chronicle attempt statuses.
_ATTEMPT_STATUS = {
    MlflowRun.Status.FINISHED: "completed",
    MlflowRun.Status.FAILED: "failed",
    MlflowRun.Status.KILLED: "killed",
}
# A concurrent delivery of the same batch (the Celery worker) may hold it; wait this long for
# it to finish before telling the client to retry.
PROCESS_WAIT_S = 20.0


# --- Experiments -----------------------------------------------------------------------------


def _experiment_default(project: Project) -> MlflowExperiment:
    # MLflow clients that never call set_experiment log to "0", which no one creates.
    experiment, _ = MlflowExperiment.objects.get_or_create(
        project=project, name=DEFAULT_EXPERIMENT_NAME
    )
    return experiment


def experiment_get(*, project: Project, experiment_id: str) -> MlflowExperiment:
    """The project's experiment with this MLflow id (RESOURCE_DOES_NOT_EXIST otherwise, also
    for another project's: ids are not secrets, but other projects' rows are not shown)."""
    experiment_id = str(experiment_id).strip()
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        return _experiment_default(project)
    experiment = None
    if experiment_id.isascii() and experiment_id.isdigit():
        experiment = MlflowExperiment.objects.filter(project=project, pk=int(experiment_id)).first()
    if experiment is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"No Experiment with id={experiment_id} exists"
        )
    return experiment


def experiment_get_by_name(*, project: Project, name: str) -> MlflowExperiment:
    if name == DEFAULT_EXPERIMENT_NAME:
        return _experiment_default(project)
    experiment = MlflowExperiment.objects.filter(project=project, name=name).first()
    if experiment is None:
        raise MlflowError(
            "RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name}'"
        )
    return experiment


def experiment_create(
    *,
    project: Project,
    name: Any,
    artifact_location: str = "",
    tags: Iterable[tuple[str, str]] = (),
) -> MlflowExperiment:
    if not isinstance(name, str) or not name.strip():
        raise invalid("Missing value for required parameter 'name'.")
    if len(name) > MAX_EXPERIMENT_NAME_LENGTH:
        raise invalid(
            f"The experiment name is {len(name)} characters; the limit is "
            f"{MAX_EXPERIMENT_NAME_LENGTH}."
        )
    exists = MlflowError("RESOURCE_ALREADY_EXISTS", f"Experiment(name={name}) already exists.")
    if name == DEFAULT_EXPERIMENT_NAME:
        raise exists
    try:
        with transaction.atomic():
            return MlflowExperiment.objects.create(
                project=project,
                name=name,
                artifact_location=artifact_location[:1000],
                tags=dict(tags),
            )
    except IntegrityError:
        # The fluent client answers this error by reading the experiment back by name.
        raise exists from None


# --- Runs: lifecycle -------------------------------------------------------------------------


def _mlflow_run_lock(*, project: Project, run_id: Any) -> MlflowRun:
    """The run, row-locked: params are write-once and status changes start attempts, so two
    concurrent requests for one run must not both read the old state."""
    return mlflow_run_find(MlflowRun.objects.select_for_update(of=("self",)), project, run_id)


class RunTarget(NamedTuple):
    """What a batch of an MLflow run is written with: the run's MLflow id, its Chronicle
    run's name and the attempt its points go to."""

    run_uuid: str
    run_name: str
    attempt_number: int


def _target(mlflow_run: MlflowRun) -> RunTarget:
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


def _run_known(*, project: Project, run_id: Any) -> _KnownRun:
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


def _metrics_log(*, token: IngestToken, run_id: Any, metrics: Metrics) -> IngestBatch:
    """log-batch's usual request, metrics only: the hot path. One transaction, the batch's
    own; the run's lock and attempt check are its first statement."""
    key = (token.project_id, run_id)
    for _ in range(_METRICS_LOG_TRIES):
        known = _KNOWN_RUNS.get(key) or _run_known(project=token.project, run_id=run_id)
        try:
            return _batch_accept(
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


def mlflow_run_create(
    *,
    token: IngestToken,
    experiment_id: Any,
    run_name: Any = None,
    user_id: Any = "",
    start_time_ms: Any = None,
    tags: Iterable[tuple[str, str]] = (),
) -> MlflowRun:
    """Create an MLflow run, its Chronicle run and attempt 1. Side effect: an ingest batch
    (attempt_started), processed before returning."""
    project = token.project
    experiment = experiment_get(
        project=project,
        experiment_id=DEFAULT_EXPERIMENT_ID if experiment_id in (None, "") else experiment_id,
    )
    tag_map = dict(tags)
    run_uuid = uuid.uuid4().hex
    # Lightning sends no run_name, only the tag; neither: the run id names the run.
    name = (run_name if isinstance(run_name, str) else "") or tag_map.get(RUN_NAME_TAG) or run_uuid
    name = name.strip()[:250] or run_uuid
    tag_map[RUN_NAME_TAG] = name
    started_ms = check_int(start_time_ms, what="start_time", default=now_ms())
    with transaction.atomic():
        run = _chronicle_run_create(project=project, name=name, run_uuid=run_uuid)
        mlflow_run = MlflowRun.objects.create(
            run_uuid=run_uuid,
            experiment=experiment,
            run=run,
            run_name=name,
            user_id=str(user_id or "")[:250],
            start_time_ms=started_ms,
            tags=tag_map,
        )
        run_labels_sync(mlflow_run=mlflow_run)
        batch = _batch_accept(
            token=token,
            target=_target(mlflow_run),
            run_info={
                "description": f"Logged through MLflow: run {run_uuid} of experiment "
                f"{experiment.name!r}."
            },
            events=[{"type": "attempt_started", "time": started_ms / 1000, "attempt": 1}],
        )
    _batch_process_now(batch)
    return mlflow_run


def _chronicle_run_create(*, project: Project, name: str, run_uuid: str) -> Run:
    """A Chronicle run for a new MLflow run. MLflow run names are not unique, Chronicle's
    are: a name already taken gets the run id's first 8 characters appended, so two MLflow
    runs never write into one Chronicle run."""
    try:
        caps.runs_cap_check(project_id=project.pk, run_name=name[:200], new=True)
    except BatchError as exc:
        raise invalid(exc.detail) from exc
    base = name[:200]
    for candidate in (base, f"{name[:190]}-{run_uuid[:8]}", run_uuid):
        if not Run.objects.filter(project=project, name=candidate).exists():
            return telemetry_services.run_upsert(project=project, name=candidate)
    raise MlflowError("RESOURCE_ALREADY_EXISTS", f"A run named {name!r} already exists.")


def mlflow_run_update(
    *,
    token: IngestToken,
    run_id: Any,
    status: Any = None,
    end_time_ms: Any = None,
    run_name: Any = None,
) -> MlflowRun:
    """Change a run's status, end time or name. Going FAILED or KILLED opens an interruption
    on the current attempt; FINISHED ends it as completed; RUNNING after a terminal status
    (`start_run(run_id=...)`) starts a new attempt. Side effect: an ingest batch with those
    events, processed before returning. Repeating an update changes nothing."""
    if status not in (None, "") and status not in MlflowRun.Status.values:
        raise invalid(f"Invalid run status {status!r}; one of {', '.join(MlflowRun.Status)}.")
    end_ms = None if end_time_ms in (None, "") else check_int(end_time_ms, what="end_time")
    batch = None
    with transaction.atomic():
        mlflow_run = _mlflow_run_lock(project=token.project, run_id=run_id)
        changed: list[str] = []
        if isinstance(run_name, str) and run_name.strip() and run_name != mlflow_run.run_name:
            # The Chronicle run keeps its name (it is the key other records use).
            mlflow_run.run_name = run_name.strip()[:250]
            mlflow_run.tags = {**mlflow_run.tags, RUN_NAME_TAG: mlflow_run.run_name}
            changed += ["run_name", "tags"]
        events = _status_events(mlflow_run, status or mlflow_run.status, end_ms)
        if status and status != mlflow_run.status:
            changed.append("status")
            if status == MlflowRun.Status.RUNNING and mlflow_run.status in TERMINAL_STATUSES:
                mlflow_run.attempt_number += 1
                mlflow_run.end_time_ms = None
                changed += ["attempt_number", "end_time_ms"]
                events = [
                    {
                        "type": "attempt_started",
                        "time": now_ms() / 1000,
                        "attempt": mlflow_run.attempt_number,
                    }
                ]
            mlflow_run.status = status
        if mlflow_run.status in TERMINAL_STATUSES and end_ms is not None:
            mlflow_run.end_time_ms = end_ms
            changed.append("end_time_ms")
        elif mlflow_run.status in TERMINAL_STATUSES and mlflow_run.end_time_ms is None:
            mlflow_run.end_time_ms = now_ms()
            changed.append("end_time_ms")
        if changed:
            mlflow_run.save(update_fields=sorted(set(changed)))
        if events:
            batch = _batch_accept(token=token, target=_target(mlflow_run), events=events)
    if batch is not None:
        _batch_process_now(batch)
    return mlflow_run


def _status_events(mlflow_run: MlflowRun, status: str, end_ms: int | None) -> list[dict[str, Any]]:
    """The ingest events that end the current attempt with `status`, if it is a change."""
    if status == mlflow_run.status or status not in TERMINAL_STATUSES:
        return []
    number = mlflow_run.attempt_number
    moment = (end_ms if end_ms is not None else now_ms()) / 1000
    events: list[dict[str, Any]] = []
    if status in (MlflowRun.Status.FAILED, MlflowRun.Status.KILLED):
        # MLflow sends no step: the last one the attempt logged is where it stopped.
        step = telemetry_selectors.attempt_last_step(run_id=mlflow_run.run_id, number=number)
        at_step = f" at step {step}" if step is not None else ""
        event: dict[str, Any] = {
            "type": "interruption",
            "time": moment,
            "attempt": number,
            # One interruption per attempt and status, however often the client retries.
            "id": f"mlflow-{mlflow_run.run_uuid}-{number}-{status.lower()}",
            "message": f"MLflow set run {mlflow_run.run_uuid} to {status}{at_step} (MLflow "
            "sends no reason; see the job's logs).",
        }
        if step is not None:
            event["step"] = step
        events.append(event)
    # After the interruption, so the job's own word (failed / killed) is the last one.
    events.append(
        {
            "type": "attempt_ended",
            "time": moment,
            "attempt": number,
            "status": _ATTEMPT_STATUS[status],
        }
    )
    return events


# --- Runs: logging ---------------------------------------------------------------------------


def mlflow_run_log(
    *,
    token: IngestToken,
    run_id: Any,
    metrics: Metrics = (),
    params: Sequence[tuple[str, str]] = (),
    tags: Sequence[tuple[str, str]] = (),
) -> None:
    """log-metric, log-parameter, set-tag and log-batch. Params are write-once (the same
    value again is fine, another value is INVALID_PARAMETER_VALUE and nothing of the request
    is stored); tags overwrite, the last one in the request wins; metrics go to the run's
    current attempt through a durable ingest batch, processed before returning."""
    check_batch_limits(metrics=len(metrics), params=len(params), tags=len(tags))
    batch = None
    if params or tags:
        with transaction.atomic():
            batch = _run_log_fields(
                token=token, run_id=run_id, metrics=metrics, params=params, tags=tags
            )
    elif metrics:
        batch = _metrics_log(token=token, run_id=run_id, metrics=metrics)
    else:  # nothing to log: the run must still exist
        _run_known(project=token.project, run_id=run_id)
    if batch is not None and batch.status != IngestBatch.Status.DONE:
        _batch_process_now(batch)


def _run_log_fields(
    *,
    token: IngestToken,
    run_id: Any,
    metrics: Metrics,
    params: Sequence[tuple[str, str]],
    tags: Sequence[tuple[str, str]],
) -> IngestBatch | None:
    """mlflow_run_log's params and tags (and the request's metrics), under the run's update
    lock."""
    mlflow_run = _mlflow_run_lock(project=token.project, run_id=run_id)
    new_params = _params_new(mlflow_run, params)
    changed: list[str] = []
    if new_params:
        mlflow_run.params = {**mlflow_run.params, **new_params}
        changed.append("params")
        # Shown with the run's config in Chronicle. Read the config again now that the
        # lock is held: the run row joined when the lock was requested is the version
        # from before any request that held it meanwhile (transformers logs its params
        # in concurrent log-batch calls), and merging into it would drop their params.
        config = Run.objects.values_list("config", flat=True).get(pk=mlflow_run.run_id)
        telemetry_services.run_upsert(
            project=token.project,
            name=mlflow_run.run.name,
            info={"config": {**config, **new_params}},
        )
    if tags:
        merged = {**mlflow_run.tags, **dict(tags)}
        if merged != mlflow_run.tags:
            mlflow_run.tags = merged
            changed.append("tags")
            run_labels_sync(mlflow_run=mlflow_run)
        if merged.get(RUN_NAME_TAG, mlflow_run.run_name) != mlflow_run.run_name:
            mlflow_run.run_name = merged[RUN_NAME_TAG][:250]
            changed.append("run_name")
    if changed:
        mlflow_run.save(update_fields=changed)
    if not metrics:
        return None
    return _batch_accept(token=token, target=_target(mlflow_run), metrics=metrics)


def _params_new(mlflow_run: MlflowRun, params: Sequence[tuple[str, str]]) -> dict[str, str]:
    known = dict(mlflow_run.params)
    new: dict[str, str] = {}
    for key, value in params:
        old = known.get(key)
        if old is not None and old != value:
            raise invalid(
                f"Changing param values is not allowed. Param with key='{key}' was already "
                f"logged with value='{old}' for run ID='{mlflow_run.run_uuid}'. Attempted "
                f"logging new value '{value}'."
            )
        if old is None:
            known[key] = new[key] = value
    return new


# --- The ingest path -------------------------------------------------------------------------


def _batch_accept(
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


def _batch_process_now(batch: IngestBatch) -> None:
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
