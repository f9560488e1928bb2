"""MLflow's protocol as Chronicle answers it: its error codes and statuses, its limits, the
default experiment, and the checks of a request's inputs (pure: values in, values or an
MlflowError out). ingest.services.mlflow writes what they accept; ingest.selectors.mlflow reads
it back."""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import Annotated, Any, NamedTuple

import msgspec

from config.json_input import TooDeepError, depth_check
from ingest.models import MlflowRun

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


class MlflowError(Exception):
    """A failure to answer in MLflow's shape: {"error_code", "message"} with its status."""

    def __init__(self, error_code: str, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def status(self) -> int:
        return ERROR_STATUS.get(self.error_code, 500)


def invalid(message: str) -> MlflowError:
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
        raise invalid(f"Missing value for required parameter '{what}'.")
    if len(raw) > limit:
        raise invalid(f"'{what}' {raw[:40]!r}... is {len(raw)} characters; the limit is {limit}.")
    if not _KEY_PATTERN.match(raw) or raw.startswith("/") or ".." in raw.split("/"):
        raise invalid(
            f"Invalid {what} {raw!r}: names may only contain alphanumerics, underscores (_), "
            "dashes (-), periods (.), spaces ( ), colons (:) and slashes (/), and may not "
            "start with a slash or contain '..' segments."
        )
    return raw


def check_int(raw: Any, *, what: str, default: int | None = None) -> int:
    """An int64 as MLflow sends it: a JSON number, or a string of digits (proto JSON, GET)."""
    if raw is None or raw == "":
        if default is None:
            raise invalid(f"Missing value for required parameter '{what}'.")
        return default
    if isinstance(raw, bool):
        raise invalid(f"'{what}' must be an integer, got a boolean.")
    value: int | None = None
    if isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"-?\d{1,19}", raw.strip()):
        value = int(raw)
    if value is None:
        raise invalid(f"'{what}' must be an integer, got {raw!r:.40}.")
    # Every form is range-checked: 1e20, 1e300 and 19-digit strings passed as integers and
    # overflowed PostgreSQL's bigint (a 500, issue 42 finding 8).
    if not -(2**63) <= value < 2**63:
        raise invalid(f"'{what}' must be a 64-bit integer, got {str(raw)[:20]}...")
    return value


def check_value(raw: Any, *, key: str) -> float:
    """A double: a JSON number, or a string ("NaN", "Infinity", "-Infinity", "1.5")."""
    if isinstance(raw, bool) or raw is None:
        raise invalid(f"Got invalid value {raw!r} for metric '{key}'; it must be a number.")
    if isinstance(raw, int | float):
        try:
            return float(raw)
        except OverflowError:  # a JSON integer past the largest double (1e309)
            raise invalid(f"The value of metric '{key}' is too large for a double.") from None
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise invalid(f"Got invalid value {raw!r:.40} for metric '{key}'; it must be a number.")


def check_metric(raw: Any) -> MetricValue:
    if not isinstance(raw, Mapping):
        raise invalid(f"Each metric must be an object, got {type(raw).__name__}.")
    # Chronicle's series names are at most 200 characters, below MLflow's 250.
    key = check_key(raw.get("key"), what="key", limit=200)
    value = check_value(raw.get("value"), key=key)
    timestamp_ms = check_int(raw.get("timestamp"), what="timestamp")
    step = check_int(raw.get("step"), what="step", default=0)
    if timestamp_ms < 0:
        raise invalid(f"Metric '{key}' has a negative timestamp {timestamp_ms}.")
    if step < 0:
        raise invalid(f"Metric '{key}' has a negative step {step}; Chronicle steps are >= 0.")
    return MetricValue(key, value, timestamp_ms, step)


class MetricColumns:
    """log-batch's checked metrics as four columns (what the batch is hashed and written
    from), iterable as MetricValue rows for the paths that want rows."""

    __slots__ = ("keys", "stamps", "steps", "values")

    def __init__(
        self,
        keys: Sequence[str],
        values: Sequence[float],
        stamps: Sequence[int],
        steps: Sequence[int],
    ) -> None:
        self.keys, self.values, self.stamps, self.steps = keys, values, stamps, steps

    @classmethod
    def of(cls, metrics: Sequence[MetricValue]) -> MetricColumns:
        if not metrics:
            return cls((), (), (), ())
        keys, values, stamps, steps = zip(*metrics, strict=True)
        return cls(keys, values, stamps, steps)

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[MetricValue]:
        return map(MetricValue, self.keys, self.values, self.stamps, self.steps)


# What the MLflow writes take: log-batch's columns, or a few rows (log-metric, tests).
Metrics = MetricColumns | Sequence[MetricValue]

_METRIC_FIELDS = tuple(map(itemgetter, ("key", "value", "timestamp", "step")))
_DICTS = frozenset({dict})
_STRS = frozenset({str})
_INTS = frozenset({int})
_FLOATS = frozenset({float})
_NUMBERS = frozenset({int, float})


def check_metrics(items: list[Any]) -> MetricColumns:
    """log-batch's metrics, each as `check_metric` takes it. The common shape (objects with
    all four fields, known keys, numbers, integer timestamps and steps) is checked a column
    at a time, in C but for one check per distinct key; anything else goes through
    `check_metric` one metric at a time for its exact error. At 1,000 metrics per request
    this is most of the MLflow path's own CPU: the column checks take about a third of a
    loop over the objects."""
    columns = _metric_columns(items)
    if columns is not None:
        return columns
    # The common shape holds only scalars where it is read; anything else may nest, and
    # the checks below format what they refuse (recursively, past ~1,000 levels a 500).
    try:
        depth_check(items)
    except TooDeepError as exc:
        raise invalid(f"'metrics': {exc}.") from exc
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
    return MetricColumns.of(metrics)


def _metric_columns(items: list[Any]) -> MetricColumns | None:
    """The metrics as columns when every one has the common shape (the same checks as
    `check_metric`, over whole columns), else None."""
    if not items or not _DICTS.issuperset(map(type, items)):
        return None
    try:
        # A pass per field: cheaper than a tuple per metric transposed into columns.
        keys, values, stamps, steps = (tuple(map(field, items)) for field in _METRIC_FIELDS)
    except KeyError:  # a field missing (a step defaults to 0): one at a time
        return None
    if not _STRS.issuperset(map(type, keys)):
        return None
    for column in (stamps, steps):
        if not _INTS.issuperset(map(type, column)) or min(column) < 0 or max(column) >= 2**63:
            return None
    kinds = set(map(type, values))
    if not kinds <= _FLOATS:
        if not kinds <= _NUMBERS:
            return None
        try:
            values = tuple(map(float, values))
        except OverflowError:  # past the largest double: check_value names it
            return None
    if not _keys_valid(keys):
        return None
    return MetricColumns(keys, values, stamps, steps)


def _keys_valid(keys: Sequence[str]) -> bool:
    try:
        for key in set(keys):
            check_key(key, what="key", limit=200)
    except MlflowError:
        return False
    return True


# --- log-batch's common request, decoded to its types ----------------------------------------

_NonNegativeInt64 = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class _Metric(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    key: str
    value: float
    timestamp: _NonNegativeInt64
    step: _NonNegativeInt64 = 0


class _MetricsOnly(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    run_id: str
    metrics: list[_Metric]


_METRICS_ONLY = msgspec.json.Decoder(_MetricsOnly)
_STRUCT_FIELDS = tuple(map(attrgetter, ("key", "value", "timestamp", "step")))


def metrics_only_batch(body: bytes) -> tuple[str, MetricColumns] | None:
    """log-batch's usual request (a run_id and metrics of the common shape, nothing else)
    decoded straight to its types: the run id and the metrics as columns, as `check_metrics`
    would give them. None for any other body, which goes through the general path (parse,
    then check field by field, for its exact error). Decoding to typed structs costs about
    half of parsing 1,000 dicts and checking their columns."""
    try:
        batch = _METRICS_ONLY.decode(body)
    except msgspec.MsgspecError:  # malformed, another shape, NaN, a string value...
        return None
    metrics = batch.metrics
    if not batch.run_id or not metrics or len(metrics) > MAX_METRICS_PER_BATCH:
        return None
    # msgspec refuses a number past the largest double, so every value is finite.
    keys, values, stamps, steps = (tuple(map(field, metrics)) for field in _STRUCT_FIELDS)
    if not _keys_valid(keys):
        return None
    return batch.run_id, MetricColumns(keys, values, stamps, steps)


# An int at or past this has no double (float() raises OverflowError).
_DOUBLE_MAX = int(sys.float_info.max)


def check_key_values(items: Any, *, what: str, value_limit: int) -> list[tuple[str, str]]:
    """Params or tags: a list of {key, value}; values as strings (MLflow stringifies them)."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise invalid(f"'{what}' must be a list of {{key, value}} objects.")
    pairs = []
    for item in items:
        if not isinstance(item, Mapping):
            raise invalid(f"Each entry of '{what}' must be an object.")
        key = check_key(item.get("key"), what="key")
        value = item.get("value")
        value = "" if value is None else str(value)
        if len(value) > value_limit:
            raise invalid(
                f"The value of '{key}' is {len(value)} characters; the limit is {value_limit}."
            )
        pairs.append((key, value))
    return pairs


def check_batch_limits(*, metrics: int, params: int, tags: int) -> None:
    if metrics > MAX_METRICS_PER_BATCH:
        raise invalid(
            f"A batch logging request can contain at most {MAX_METRICS_PER_BATCH} metrics. "
            f"Got {metrics} metrics. Please split up metrics across multiple requests and "
            "try again."
        )
    for count, what in ((params, "params"), (tags, "tags")):
        if count > MAX_PARAMS_TAGS_PER_BATCH:
            raise invalid(
                f"A batch logging request can contain at most {MAX_PARAMS_TAGS_PER_BATCH} "
                f"{what}. Got {count} {what}. Please split up {what} across multiple "
                "requests and try again."
            )
    total = metrics + params + tags
    if total > MAX_ENTITIES_PER_BATCH:
        raise invalid(
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
