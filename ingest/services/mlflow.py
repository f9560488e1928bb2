"""Writes of the MLflow tracking API on Chronicle's model: experiments, runs, params, tags and
metrics (the checks of the inputs are in ingest.mlflow_checks, the reads in
ingest.selectors.mlflow).

Metric points and run lifecycle changes (start, end, FAILED/KILLED, resume) become ingest
batches: an IngestBatch row whose batch id is derived from what it stores, written before the
answer (the same durability promise as POST /api/v1/ingest), so a client retry stores nothing
twice. The batch is then processed within the request, because MLflow clients read their
writes back at once (get-history, runs/get) and expect synchronous semantics. That path, and
log-batch's metric-only hot path, are ingest.services.mlflow_batches.

Mapping: an experiment is a named group of runs in the token's project (MlflowExperiment); an
MLflow run is one Chronicle run (MlflowRun.run), named from `run_name` / the `mlflow.runName`
tag; each time MLflow sets a terminated run back to RUNNING a new Chronicle attempt starts.
A Chronicle point is keyed by (attempt, name, step) and the first value stored wins, where
MLflow appends: a second value logged at the same step of the same attempt is not kept.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import IntegrityError, transaction

from ingest import caps
from ingest.mlflow_checks import (
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    MAX_EXPERIMENT_NAME_LENGTH,
    RUN_NAME_TAG,
    TERMINAL_STATUSES,
    Metrics,
    MlflowError,
    check_batch_limits,
    check_int,
    invalid,
    now_ms,
)
from ingest.mlflow_tags import run_labels_sync
from ingest.models import IngestBatch, IngestToken, MlflowExperiment, MlflowRun
from ingest.schema import BatchError
from ingest.selectors.mlflow import mlflow_run_find
from ingest.services import mlflow_batches
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
        batch = mlflow_batches.mlflow_batch_accept(
            token=token,
            target=mlflow_batches.target_of(mlflow_run),
            run_info={
                "description": f"Logged through MLflow: run {run_uuid} of experiment "
                f"{experiment.name!r}."
            },
            events=[{"type": "attempt_started", "time": started_ms / 1000, "attempt": 1}],
        )
    mlflow_batches.batch_process_now(batch)
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
            batch = mlflow_batches.mlflow_batch_accept(
                token=token, target=mlflow_batches.target_of(mlflow_run), events=events
            )
    if batch is not None:
        mlflow_batches.batch_process_now(batch)
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
        batch = mlflow_batches.metrics_log(token=token, run_id=run_id, metrics=metrics)
    else:  # nothing to log: the run must still exist
        mlflow_batches.run_known(project=token.project, run_id=run_id)
    if batch is not None and batch.status != IngestBatch.Status.DONE:
        mlflow_batches.batch_process_now(batch)


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
    return mlflow_batches.mlflow_batch_accept(
        token=token, target=mlflow_batches.target_of(mlflow_run), metrics=metrics
    )


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
