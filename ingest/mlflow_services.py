"""The MLflow tracking API on Chronicle's model: experiments, runs, params, tags and metrics.

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
import math
import re
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery

from ingest import caps
from ingest import services as ingest_services
from ingest.checks import MAX_STEP, FieldError, check_metric_name
from ingest.metric_schema import BatchTimes
from ingest.mlflow_tags import run_labels_sync
from ingest.models import IngestBatch, IngestToken, MlflowExperiment, MlflowRun
from ingest.schema import BatchError, BatchIn, validate_batch
from telemetry import services as telemetry_services
from telemetry.models import MetricPoint, MetricSeries, Project, Run

logger = logging.getLogger(__name__)

# MLflow's error codes and the HTTP status its server answers with each
# (mlflow/exceptions.py ERROR_CODE_TO_HTTP_STATUS).
ERROR_STATUS = {
    "INVALID_PARAMETER_VALUE": 400,
    "BAD_REQUEST": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "RESOURCE_CONFLICT": 409,
    "REQUEST_LIMIT_EXCEEDED": 429,
    "INTERNAL_ERROR": 500,
    "TEMPORARILY_UNAVAILABLE": 503,
}

# MLflow's own limits (mlflow/utils/validation.py), enforced so data stays portable both ways.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
MAX_BATCH_REQUEST_BYTES = 1_000_000
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_EXPERIMENT_NAME_LENGTH = 500
MAX_HISTORY_PAGE = 25_000
_KEY_PATTERN = re.compile(r"^[/\w.\- :]*$")

DEFAULT_EXPERIMENT_ID = "0"
DEFAULT_EXPERIMENT_NAME = "Default"
RUN_NAME_TAG = "mlflow.runName"
TERMINAL_STATUSES = {
    MlflowRun.Status.FINISHED,
    MlflowRun.Status.FAILED,
    MlflowRun.Status.KILLED,
}
# MLflow's terminal statuses as Chronicle attempt statuses.
_ATTEMPT_STATUS = {
    MlflowRun.Status.FINISHED: "completed",
    MlflowRun.Status.FAILED: "failed",
    MlflowRun.Status.KILLED: "killed",
}
# A concurrent delivery of the same batch (the Celery worker) may hold it; wait this long for
# it to finish before telling the client to retry.
PROCESS_WAIT_S = 20.0


class MlflowError(Exception):
    """A failure to answer in MLflow's shape: {"error_code", "message"} with its status."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def status(self) -> int:
        return ERROR_STATUS.get(self.error_code, 500)


def _invalid(message: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def now_ms() -> int:
    return int(time.time() * 1000)


# --- Input checks (pure) ---------------------------------------------------------------------


class MetricValue(NamedTuple):
    # A tuple, not a frozen dataclass: log-batch makes 1,000 of them per request, and a
    # frozen dataclass's __init__ sets each field through object.__setattr__.
    key: str
    value: float
    timestamp_ms: int
    step: int


def check_key(raw: Any, *, what: str, limit: int = MAX_KEY_LENGTH) -> str:
    if not isinstance(raw, str) or not raw:
        raise _invalid(f"Missing value for required parameter '{what}'.")
    if len(raw) > limit:
        raise _invalid(f"'{what}' {raw[:40]!r}... is {len(raw)} characters; the limit is {limit}.")
    if not _KEY_PATTERN.match(raw) or raw.startswith("/") or ".." in raw.split("/"):
        raise _invalid(
            f"Invalid {what} {raw!r}: names may only contain alphanumerics, underscores (_), "
            "dashes (-), periods (.), spaces ( ), colons (:) and slashes (/), and may not "
            "start with a slash or contain '..' segments."
        )
    return raw


def check_int(raw: Any, *, what: str, default: int | None = None) -> int:
    """An int64 as MLflow sends it: a JSON number, or a string of digits (proto JSON, GET)."""
    if raw is None or raw == "":
        if default is None:
            raise _invalid(f"Missing value for required parameter '{what}'.")
        return default
    if isinstance(raw, bool):
        raise _invalid(f"'{what}' must be an integer, got a boolean.")
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, int):
        if not -(2**63) <= raw < 2**63:
            raise _invalid(f"'{what}' must be a 64-bit integer, got {str(raw)[:20]}...")
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?\d{1,19}", raw.strip()):
        return int(raw)
    raise _invalid(f"'{what}' must be an integer, got {raw!r:.40}.")


def check_value(raw: Any, *, key: str) -> float:
    """A double: a JSON number, or a string ("NaN", "Infinity", "-Infinity", "1.5")."""
    if isinstance(raw, bool) or raw is None:
        raise _invalid(f"Got invalid value {raw!r} for metric '{key}'; it must be a number.")
    if isinstance(raw, int | float):
        try:
            return float(raw)
        except OverflowError:  # a JSON integer past the largest double (1e309)
            raise _invalid(f"The value of metric '{key}' is too large for a double.") from None
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise _invalid(f"Got invalid value {raw!r:.40} for metric '{key}'; it must be a number.")


def check_metric(raw: Any) -> MetricValue:
    if not isinstance(raw, Mapping):
        raise _invalid(f"Each metric must be an object, got {type(raw).__name__}.")
    # Chronicle's series names are at most 200 characters, below MLflow's 250.
    key = check_key(raw.get("key"), what="key", limit=200)
    value = check_value(raw.get("value"), key=key)
    timestamp_ms = check_int(raw.get("timestamp"), what="timestamp")
    step = check_int(raw.get("step"), what="step", default=0)
    if timestamp_ms < 0:
        raise _invalid(f"Metric '{key}' has a negative timestamp {timestamp_ms}.")
    if step < 0:
        raise _invalid(f"Metric '{key}' has a negative step {step}; Chronicle steps are >= 0.")
    return MetricValue(key, value, timestamp_ms, step)


def check_metrics(items: list[Any]) -> list[MetricValue]:
    """log-batch's metrics, each as `check_metric` takes it. The common shape (an object of
    a known key, a number, an integer timestamp and step) passes with type checks inline; a
    key is checked once per request; anything else goes through `check_metric` for its
    exact error. At 1,000 metrics per request this loop is most of the MLflow path's own
    CPU."""
    checked: set[str] = set()
    metrics: list[MetricValue] = []
    append = metrics.append
    for item in items:
        if type(item) is dict:
            key = item.get("key")
            value = item.get("value")
            stamp = item.get("timestamp")
            step = item.get("step", 0)
            if (
                type(key) is str
                and (key in checked or check_key(key, what="key", limit=200))
                and (type(value) is float or (type(value) is int and abs(value) < _DOUBLE_MAX))
                and type(stamp) is int
                and 0 <= stamp < 2**63
                and type(step) is int
                and 0 <= step < 2**63
            ):
                checked.add(key)
                append(MetricValue(key, float(value), stamp, step))
                continue
        append(check_metric(item))
    return metrics


# An int at or past this has no double (float() raises OverflowError).
_DOUBLE_MAX = int(sys.float_info.max)


def check_key_values(items: Any, *, what: str, value_limit: int) -> list[tuple[str, str]]:
    """Params or tags: a list of {key, value}; values as strings (MLflow stringifies them)."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise _invalid(f"'{what}' must be a list of {{key, value}} objects.")
    pairs = []
    for item in items:
        if not isinstance(item, Mapping):
            raise _invalid(f"Each entry of '{what}' must be an object.")
        key = check_key(item.get("key"), what="key")
        value = item.get("value")
        value = "" if value is None else str(value)
        if len(value) > value_limit:
            raise _invalid(
                f"The value of '{key}' is {len(value)} characters; the limit is {value_limit}."
            )
        pairs.append((key, value))
    return pairs


def check_batch_limits(*, metrics: int, params: int, tags: int) -> None:
    if metrics > MAX_METRICS_PER_BATCH:
        raise _invalid(
            f"A batch logging request can contain at most {MAX_METRICS_PER_BATCH} metrics. "
            f"Got {metrics} metrics. Please split up metrics across multiple requests and "
            "try again."
        )
    for count, what in ((params, "params"), (tags, "tags")):
        if count > MAX_PARAMS_TAGS_PER_BATCH:
            raise _invalid(
                f"A batch logging request can contain at most {MAX_PARAMS_TAGS_PER_BATCH} "
                f"{what}. Got {count} {what}. Please split up {what} across multiple "
                "requests and try again."
            )
    total = metrics + params + tags
    if total > MAX_ENTITIES_PER_BATCH:
        raise _invalid(
            f"A batch logging request can contain at most {MAX_ENTITIES_PER_BATCH} metrics, "
            f"params and tags in total. Got {total}."
        )


def json_float(value: float | None) -> float | str:
    """MLflow's JSON for a double: non-finite values as strings (strict JSON has no NaN).
    NULL reads as NaN."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def datetime_ms(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


# --- Experiments -----------------------------------------------------------------------------


def experiment_public_id(experiment: MlflowExperiment) -> str:
    if experiment.name == DEFAULT_EXPERIMENT_NAME:
        return DEFAULT_EXPERIMENT_ID
    return str(experiment.pk)


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
        raise _invalid("Missing value for required parameter 'name'.")
    if len(name) > MAX_EXPERIMENT_NAME_LENGTH:
        raise _invalid(
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


def _mlflow_run_find(queryset: QuerySet[MlflowRun], project: Project, run_id: Any) -> MlflowRun:
    if not isinstance(run_id, str) or not run_id:
        raise _invalid("Missing value for required parameter 'run_id'.")
    # Another project's run does not exist for this token (never a 403).
    mlflow_run = (
        queryset.select_related("experiment", "run")
        .filter(run_uuid=run_id, experiment__project=project)
        .first()
    )
    if mlflow_run is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run with id={run_id} not found")
    return mlflow_run


def mlflow_run_get(*, project: Project, run_id: Any) -> MlflowRun:
    return _mlflow_run_find(MlflowRun.objects.all(), project, run_id)


def _mlflow_run_lock(*, project: Project, run_id: Any) -> MlflowRun:
    """The run, row-locked: params are write-once and status changes start attempts, so two
    concurrent requests for one run must not both read the old state."""
    return _mlflow_run_find(MlflowRun.objects.select_for_update(of=("self",)), project, run_id)


def _mlflow_run_share(*, project: Project, run_id: Any) -> MlflowRun:
    """The run, share-locked: concurrent metric-only requests for one run go in together
    (training loops log from several threads), while a status change, which holds the row's
    update lock, waits for them and they for it; the attempt number is read under the lock."""
    mlflow_run = mlflow_run_get(project=project, run_id=run_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT attempt_number FROM {MlflowRun._meta.db_table} WHERE id = %s FOR SHARE",
            [mlflow_run.pk],
        )
        (mlflow_run.attempt_number,) = cursor.fetchone()
    return mlflow_run


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
            mlflow_run=mlflow_run,
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
        raise _invalid(exc.detail) from exc
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
        raise _invalid(f"Invalid run status {status!r}; one of {', '.join(MlflowRun.Status)}.")
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
            batch = _batch_accept(token=token, mlflow_run=mlflow_run, events=events)
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
        events.append(
            {
                "type": "interruption",
                "time": moment,
                "attempt": number,
                # One interruption per attempt and status, however often the client retries.
                "id": f"mlflow-{mlflow_run.run_uuid}-{number}-{status.lower()}",
                "message": f"MLflow set run {mlflow_run.run_uuid} to {status} (MLflow sends "
                "no reason; see the job's logs).",
            }
        )
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
    metrics: Sequence[MetricValue] = (),
    params: Sequence[tuple[str, str]] = (),
    tags: Sequence[tuple[str, str]] = (),
) -> None:
    """log-metric, log-parameter, set-tag and log-batch. Params are write-once (the same
    value again is fine, another value is INVALID_PARAMETER_VALUE and nothing of the request
    is stored); tags overwrite, the last one in the request wins; metrics go to the run's
    current attempt through a durable ingest batch, processed before returning."""
    check_batch_limits(metrics=len(metrics), params=len(params), tags=len(tags))
    batch = None
    with transaction.atomic():
        if params or tags:
            mlflow_run = _mlflow_run_lock(project=token.project, run_id=run_id)
        else:
            mlflow_run = _mlflow_run_share(project=token.project, run_id=run_id)
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
        if metrics:
            batch = _batch_accept(token=token, mlflow_run=mlflow_run, metrics=metrics)
    if batch is not None and batch.status != IngestBatch.Status.DONE:
        _batch_process_now(batch)


def _params_new(mlflow_run: MlflowRun, params: Sequence[tuple[str, str]]) -> dict[str, str]:
    known = dict(mlflow_run.params)
    new: dict[str, str] = {}
    for key, value in params:
        old = known.get(key)
        if old is not None and old != value:
            raise _invalid(
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
    mlflow_run: MlflowRun,
    metrics: Sequence[MetricValue] = (),
    events: list[dict[str, Any]] | None = None,
    run_info: dict[str, Any] | None = None,
) -> IngestBatch:
    """Store an ingest batch for the run's current attempt (call inside the transaction that
    changes the MLflow rows, so both or neither are stored). The batch id hashes the
    document: a retried request maps to the stored batch and stores nothing twice."""
    doc: dict[str, Any] = {
        "run": mlflow_run.run.name,
        "attempt": mlflow_run.attempt_number,
        "metrics": [
            {"name": key, "step": step, "value": json_float(value), "time": stamp_ms / 1000}
            for key, value, stamp_ms, step in metrics
        ],
        "events": events or [],
    }
    # The points as the contract's validator makes them from those metric objects.
    points = [(key, step, value, stamp_ms / 1000) for key, value, stamp_ms, step in metrics]
    if run_info:
        doc["run_info"] = run_info
    # orjson: the document holds only str, int, float (finite: json_float spells the others)
    # and nested dicts and lists, all of which it encodes, several times faster than json.
    canonical = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    doc["batch_id"] = f"mlflow:{mlflow_run.run_uuid}:{hashlib.sha256(canonical).hexdigest()}"
    body = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    try:
        batch_in = _batch_in(doc, points)
    except BatchError as exc:
        raise _invalid(exc.detail) from exc
    # Metrics of the run's current attempt are written in this transaction, as the native
    # API's metric-only batches are (ingest.services.writes_at_once): no queue, no re-parse.
    try:
        acceptance = ingest_services.batch_accept(
            token=token, batch_in=batch_in, body=body, write_now=True
        )
    except BatchError as exc:  # a cap (ingest.caps): MLflow's clients do not retry a 400
        raise _invalid(exc.detail) from exc
    if acceptance.conflict:  # cannot happen while the id hashes the body; never overwrite
        raise MlflowError(
            "RESOURCE_CONFLICT", f"Batch {batch_in.batch_id} exists with another body."
        )
    return acceptance.batch


def _batch_in(doc: dict[str, Any], points: list[tuple[str, int, float, float]]) -> BatchIn:
    """The document as `validate_batch` reads it (raises BatchError), with its metrics
    checked here rather than by validating the objects `_batch_accept` just built from
    checked values: each name once (MLflow's key check let it through; the contract's may
    be stricter), each step against the contract's limit, each time converted once. Any
    point that fails falls back to the whole document's validation for the exact error."""
    top = validate_batch(
        {**doc, "metrics": []},
        max_metrics=settings.INGEST_MAX_METRICS_PER_BATCH,
        max_events=settings.INGEST_MAX_EVENTS_PER_BATCH,
    )
    if len(points) > settings.INGEST_MAX_METRICS_PER_BATCH:
        return _batch_in_checked(doc)
    names: set[str] = set()
    for name in {point[0] for point in points}:
        try:
            names.add(check_metric_name(name))
        except FieldError:
            return _batch_in_checked(doc)
    times = BatchTimes()
    epoch = times.epoch
    metrics = []
    for name, step, value, seconds in points:
        moment = epoch(seconds)
        if moment is None or step > MAX_STEP:
            return _batch_in_checked(doc)
        metrics.append((name, step, value, moment))
    top.metrics = metrics
    return top


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


# --- Reads -----------------------------------------------------------------------------------


def run_latest_metrics(*, mlflow_run: MlflowRun) -> list[dict[str, Any]]:
    """MLflow's run.data.metrics: per name, the point at the highest step (the later attempt
    on a tie). One query: three index lookups per series, none over all points."""
    latest = MetricPoint.objects.filter(series=OuterRef("pk")).order_by("-step")
    rows = (
        MetricSeries.objects.filter(run_id=mlflow_run.run_id)
        .annotate(
            last_step=Subquery(latest.values("step")[:1]),
            last_value=Subquery(latest.values("value")[:1]),
            last_time=Subquery(latest.values("wall_time")[:1]),
        )
        .filter(last_step__isnull=False)
        .values_list("name", "attempt__number", "last_step", "last_value", "last_time")
    )
    best: dict[str, tuple[int, int, float | None, datetime | None]] = {}
    for name, number, step, value, moment in rows:
        if name not in best or (step, number) > best[name][:2]:
            best[name] = (step, number, value, moment)
    return [
        {
            "key": name,
            "value": json_float(value),
            "timestamp": datetime_ms(moment) or 0,
            "step": step,
        }
        for name, (step, _, value, moment) in sorted(best.items())
    ]


def metric_history(
    *, mlflow_run: MlflowRun, key: str, max_results: int | None, page_token: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """All points of one metric across the run's attempts, in (attempt, step) order, a page
    at a time. The page token is the last (attempt, step) returned (a keyset, so a page costs
    the same however deep it is)."""
    limit = MAX_HISTORY_PAGE if not max_results else min(max_results, MAX_HISTORY_PAGE)
    points = MetricPoint.objects.filter(
        series__run_id=mlflow_run.run_id, series__name=key
    ).order_by("series__attempt__number", "step")
    if page_token:
        match = re.fullmatch(r"(\d+):(\d+)", page_token)
        if match is None:
            raise _invalid(f"Invalid page token {page_token!r:.60}.")
        number, step = int(match[1]), int(match[2])
        points = points.filter(
            Q(series__attempt__number__gt=number) | Q(series__attempt__number=number, step__gt=step)
        )
    rows = list(
        points.values_list("series__attempt__number", "step", "value", "wall_time")[: limit + 1]
    )
    next_token = f"{rows[limit - 1][0]}:{rows[limit - 1][1]}" if len(rows) > limit else None
    metrics = [
        {
            "key": key,
            "value": json_float(value),
            "timestamp": datetime_ms(moment) or 0,
            "step": step,
            "run_id": mlflow_run.run_uuid,
        }
        for _, step, value, moment in rows[:limit]
    ]
    return metrics, next_token
