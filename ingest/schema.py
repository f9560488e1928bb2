"""The ingest contract: parse a request body and validate it into typed values.

Pure (no database). The fields, their limits and the event types are `ingest.contract`'s; this
module turns them into checks. Every rejection names where it happened (section, item index,
field) and why, so a job's author can fix the sender from the message alone. See
docs/ingest.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import orjson

from ingest.contract import (
    BATCH_FIELDS,
    BATCH_REQUIRED,
    BATCH_SECTIONS,
    EVENT_TYPES,
    EVENTS,
    MAX_OBJECT_BYTES,
    MAX_OBJECT_DEPTH,
    METRIC_FIELDS,
    RUN_INFO,
    Field,
)
from telemetry.hardware_names import hardware_name_problem

# The metric fast paths compare against the step column's range inline.
MAX_STEP = METRIC_FIELDS["step"].maximum
assert MAX_STEP is not None
MAX_ERRORS_REPORTED = 20
# Clock skew allowance: a job's clock may run a little ahead of ours, but a time days ahead is
# a bug in the sender (milliseconds sent as seconds, say) and would corrupt every time axis.
MAX_FUTURE_SKEW = timedelta(days=1)

_NON_FINITE_STRINGS = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}


class BatchError(Exception):
    """A request the client must fix. `status` is the HTTP status to answer."""

    def __init__(self, status: int, detail: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []


class RateLimited(BatchError):
    """429: the token's or project's rate is spent; retry after `retry_after_s`."""

    def __init__(self, detail: str, retry_after_s: int):
        super().__init__(429, detail)
        self.retry_after_s = retry_after_s


class _FieldError(Exception):
    pass


class MetricIn(NamedTuple):
    # A tuple, not a dataclass: built once per point, so construction cost shows.
    name: str
    step: int
    value: float
    time: datetime | None


@dataclass(frozen=True, slots=True)
class EventIn:
    index: int
    type: str
    time: datetime
    fields: dict[str, Any]


@dataclass(slots=True)
class BatchIn:
    batch_id: str
    run: str
    run_info: dict[str, Any] = field(default_factory=dict)
    attempt: int | None = None
    # Which process of a multi-process job sent the batch (recorded, not interpreted).
    rank: int | None = None
    host: str = ""
    metrics: list[MetricIn] = field(default_factory=list)
    events: list[EventIn] = field(default_factory=list)


# --- JSON --------------------------------------------------------------------------------------


def parse_json(body: bytes) -> Any:
    """orjson first (fast); Python's json as the fallback, because Python's json module and
    `requests` send NaN and Infinity as bare literals that strict parsers reject."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise BatchError(
            400, f"Malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from exc
    except UnicodeDecodeError as exc:
        raise BatchError(400, "Malformed JSON: the body is not valid UTF-8.") from exc
    except RecursionError as exc:
        raise BatchError(400, "Malformed JSON: nested too deeply.") from exc


# --- Field checkers: each returns the clean value or raises _FieldError(reason) -------------


def check_time(raw: Any) -> datetime:
    """RFC 3339 with an offset, or epoch seconds."""
    if isinstance(raw, bool):
        raise _FieldError("must be an RFC 3339 time or epoch seconds, got a boolean")
    if isinstance(raw, int | float):
        if not math.isfinite(raw):
            raise _FieldError("must be a finite number of epoch seconds")
        try:
            moment = datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise _FieldError(f"epoch seconds {raw!r} are out of range") from exc
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw)
        except ValueError as exc:
            raise _FieldError(
                f"cannot parse {raw[:40]!r} as a time; use RFC 3339 "
                "(e.g. 2026-11-21T10:00:00Z) or epoch seconds"
            ) from exc
        if moment.tzinfo is None:
            raise _FieldError(
                f"{raw[:40]!r} has no UTC offset; RFC 3339 needs one (append Z for UTC)"
            )
        try:
            # In UTC, as PostgreSQL stores it: 0001-01-01T00:00:00+14:00 is a day before year 1.
            moment = moment.astimezone(UTC)
        except OverflowError as exc:
            raise _FieldError(f"{raw[:40]!r} is before year 1 in UTC") from exc
    else:
        raise _FieldError(f"must be an RFC 3339 time or epoch seconds, got {type(raw).__name__}")
    if moment > datetime.now(UTC) + MAX_FUTURE_SKEW:
        raise _FieldError(f"{raw!r} is more than a day in the future")
    return moment


def check_time_list(limit: int) -> Callable[[Any], list[datetime]]:
    def checker(raw: Any) -> list[datetime]:
        if not isinstance(raw, list) or not raw:
            raise _FieldError(f"must be a non-empty list of times, got {_describe(raw)}")
        if len(raw) > limit:
            raise _FieldError(f"has {len(raw)} times; the limit is {limit}")
        times = []
        for position, item in enumerate(raw):
            try:
                times.append(check_time(item))
            except _FieldError as exc:
                raise _FieldError(f"item {position} {exc}") from exc
        return times

    return checker


def check_integer(minimum: int, maximum: int) -> Callable[[Any], int]:
    def checker(raw: Any) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise _FieldError(f"must be an integer, got {_describe(raw)}")
        if raw < minimum:
            raise _FieldError(f"must be >= {minimum}, got {raw}")
        if raw > maximum:
            raise _FieldError(f"must be <= {maximum}, got {raw}")
        return raw

    return checker


check_step = check_integer(0, MAX_STEP)


def check_value(raw: Any) -> float:
    """A float; NaN and ±Infinity allowed as JSON literals or as strings ("NaN", "Infinity")."""
    if isinstance(raw, bool):
        raise _FieldError("must be a number, NaN or ±Infinity, got a boolean")
    if isinstance(raw, float):
        return raw
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError as exc:
            raise _FieldError("is too large for a 64-bit float") from exc
    if isinstance(raw, str):
        special = _NON_FINITE_STRINGS.get(raw.strip().lower())
        if special is not None:
            return special
    raise _FieldError(f"must be a number, NaN or ±Infinity, got {_describe(raw)}")


def check_non_negative_float(raw: Any) -> float:
    value = check_value(raw)
    if not math.isfinite(value) or value < 0:
        raise _FieldError(f"must be a finite number >= 0, got {raw!r}")
    return value


def check_bool(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise _FieldError(f"must be true or false, got {_describe(raw)}")
    return raw


def check_storable(raw: str) -> str:
    """Text PostgreSQL can hold: no NUL character, and no lone UTF-16 surrogate (JSON's
    "\\ud800" escape parses into one, and it has no UTF-8 encoding)."""
    if raw.isascii():
        if "\x00" in raw:
            raise _FieldError("must not contain a NUL character (\\u0000)")
        return raw
    try:
        raw.encode()
    except UnicodeEncodeError as exc:
        raise _FieldError(
            f"has a lone surrogate ({raw[exc.start]!r}) at character {exc.start}; send text as "
            "valid UTF-8 (a surrogate pair's two halves together)"
        ) from None
    if "\x00" in raw:
        raise _FieldError("must not contain a NUL character (\\u0000)")
    return raw


def check_name(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str):
            raise _FieldError(f"must be a string, got {_describe(raw)}")
        if not raw or not raw.strip():
            raise _FieldError("must not be empty")
        if len(raw) > limit:
            raise _FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        if any(ord(char) < 32 for char in raw):
            raise _FieldError("must not contain control characters")
        return check_storable(raw)

    return checker


def check_url_name(limit: int) -> Callable[[Any], str]:
    """A host name or device UUID: pages link to it as one path segment."""
    check = check_name(limit)

    def checker(raw: Any) -> str:
        value = check(raw)
        problem = hardware_name_problem(value)
        if problem:
            raise _FieldError(problem)
        return value

    return checker


def check_key(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str) or not raw.strip():
            raise _FieldError(f"must be a non-empty string, got {_describe(raw)}")
        if len(raw) > limit:
            raise _FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        return check_storable(raw)

    return checker


def check_text(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str):
            raise _FieldError(f"must be a string, got {_describe(raw)}")
        if len(raw) > limit:
            raise _FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        return check_storable(raw)

    return checker


def check_name_list(
    limit: int, items: int, item_check: Callable[[int], Callable[[Any], str]]
) -> Callable[[Any], list[str]]:
    check_item = item_check(limit)

    def checker(raw: Any) -> list[str]:
        if not isinstance(raw, list):
            raise _FieldError(f"must be a list of strings, got {_describe(raw)}")
        if len(raw) > items:
            raise _FieldError(f"has {len(raw)} items; the limit is {items}")
        return [check_item(item) for item in raw]

    return checker


def check_choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str) or raw not in choices:
            raise _FieldError(f"must be one of {', '.join(choices)}; got {_describe(raw)}")
        return raw

    return checker


def check_integer_list(minimum: int, maximum: int, items: int) -> Callable[[Any], list[int]]:
    check_item = check_integer(minimum, maximum)

    def checker(raw: Any) -> list[int]:
        if not isinstance(raw, list) or not raw:
            raise _FieldError(f"must be a non-empty list of integers, got {_describe(raw)}")
        if len(raw) > items:
            raise _FieldError(f"has {len(raw)} items; the limit is {items}")
        if not all(type(item) is int and minimum <= item <= maximum for item in raw):
            for position, item in enumerate(raw):
                try:
                    check_item(item)
                except _FieldError as exc:
                    raise _FieldError(f"item {position} {exc}") from exc
        if len(set(raw)) != len(raw):
            raise _FieldError("must not repeat a rank")
        return raw

    return checker


# A section's seconds per step, stored in the rank-timing rollups as float4 (a heat map of
# 16,384 ranks): far below its overflow, and far above any real step (a week).
MAX_SECTION_S = 604_800


def check_timings(name_limit: int, sections: int) -> Callable[[Any], dict[str, list[float]]]:
    """{section: [seconds, ...]}. A list of plain non-negative finite numbers passes whole (16,384
    ranks x 4 sections is 65,536 values); anything else is checked item by item for the error."""
    check_section = check_name(name_limit)

    def checker(raw: Any) -> dict[str, list[float]]:
        if not isinstance(raw, dict) or not raw:
            raise _FieldError(
                f"must be an object of section name to a list of seconds, got {_describe(raw)}"
            )
        if len(raw) > sections:
            raise _FieldError(f"has {len(raw)} sections; the limit is {sections}")
        clean: dict[str, list[float]] = {}
        for key, values in raw.items():
            try:
                check_section(key)
            except _FieldError as exc:
                raise _FieldError(f"section name {str(key)[:40]!r} {exc}") from exc
            if not isinstance(values, list):
                raise _FieldError(f"[{key!r}] must be a list of seconds, got {_describe(values)}")
            if all(
                (type(v) is float or type(v) is int) and 0 <= v <= MAX_SECTION_S for v in values
            ):
                clean[key] = [float(v) for v in values]
                continue
            for position, value in enumerate(values):
                try:
                    check_non_negative_float(value)
                except _FieldError as exc:
                    raise _FieldError(f"[{key!r}][{position}] {exc}") from exc
                if value > MAX_SECTION_S:
                    raise _FieldError(
                        f"[{key!r}][{position}] is {value} s; a section lasts at most "
                        f"{MAX_SECTION_S:,} s (stored as single precision)"
                    )
        return clean

    return checker


def check_object(raw: Any) -> dict[str, Any]:
    """A JSON object PostgreSQL's jsonb takes and the run cache can encode: finite numbers,
    storable text, at most MAX_OBJECT_DEPTH deep and MAX_OBJECT_BYTES long as JSON."""
    if not isinstance(raw, dict):
        raise _FieldError(f"must be an object, got {_describe(raw)}")
    _object_check(raw, "", 1)
    size = len(orjson.dumps(raw))
    if size > MAX_OBJECT_BYTES:
        raise _FieldError(f"is {size} bytes as JSON; the limit is {MAX_OBJECT_BYTES}")
    return raw


def _object_check(raw: Any, where: str, depth: int) -> None:
    """`depth` counts the objects and lists around `raw`, itself included."""
    if isinstance(raw, dict | list) and depth > MAX_OBJECT_DEPTH:
        raise _FieldError(f"is nested more than {MAX_OBJECT_DEPTH} levels deep (at {where})")
    if isinstance(raw, dict):
        for key, value in raw.items():
            try:
                check_storable(key)
            except _FieldError as exc:
                raise _FieldError(f"key {key!r} {exc}") from None
            _object_check(value, f"{where}.{key}"[:200], depth + 1)
    elif isinstance(raw, list):
        for position, value in enumerate(raw):
            _object_check(value, f"{where}[{position}]"[:200], depth + 1)
    elif isinstance(raw, str):
        try:
            check_storable(raw)
        except _FieldError as exc:
            raise _FieldError(f"{where or 'a value'} {exc}") from None
    elif isinstance(raw, float) and not math.isfinite(raw):
        # jsonb has no NaN or Infinity; send them as strings if they matter.
        raise _FieldError(f"{where} is {raw!r}; JSON objects hold finite numbers only")
    elif isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= 2**63:
        raise _FieldError(f"{where} is an integer beyond 64 bits")


def _describe(raw: Any) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, str):
        return f"the string {raw[:40]!r}"
    if isinstance(raw, int | float):
        return f"{raw!r}"
    return type(raw).__name__


# --- The contract's checks ----------------------------------------------------------------------

Checker = Callable[[Any], Any]


def checker_for(spec: Field) -> Checker:
    """The check for one field of the contract: built once, at import."""
    match spec.kind:
        case "integer":
            assert spec.maximum is not None
            return check_integer(spec.minimum, spec.maximum)
        case "number":
            return check_value
        case "non_negative":
            return check_non_negative_float
        case "boolean":
            return check_bool
        case "text":
            assert spec.max_length is not None
            return check_text(spec.max_length)
        case "name":
            assert spec.max_length is not None
            return check_name(spec.max_length)
        case "key":
            assert spec.max_length is not None
            return check_key(spec.max_length)
        case "url_name":
            assert spec.max_length is not None
            return check_url_name(spec.max_length)
        case "names":
            assert spec.max_length is not None and spec.max_items is not None
            return check_name_list(spec.max_length, spec.max_items, check_name)
        case "url_names":
            assert spec.max_length is not None and spec.max_items is not None
            return check_name_list(spec.max_length, spec.max_items, check_url_name)
        case "time":
            return check_time
        case "times":
            assert spec.max_items is not None
            return check_time_list(spec.max_items)
        case "choice":
            return check_choice(spec.choices)
        case "object":
            return check_object
        case "integers":
            assert spec.maximum is not None and spec.max_items is not None
            return check_integer_list(spec.minimum, spec.maximum, spec.max_items)
        case "timings":
            assert spec.max_length is not None and spec.max_items is not None
            return check_timings(spec.max_length, spec.max_items)
    raise AssertionError(f"no check for {spec.kind}")


def _checks(fields: dict[str, Field]) -> dict[str, Checker]:
    return {key: checker_for(spec) for key, spec in fields.items()}


BATCH_CHECKS = _checks(BATCH_FIELDS)
RUN_INFO_CHECKS = _checks(RUN_INFO)
EVENT_CHECKS: dict[str, dict[str, Checker]] = {
    event_type: _checks(event.fields) for event_type, event in EVENTS.items()
}
check_metric_name = checker_for(METRIC_FIELDS["name"])


class _Errors:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, section: str, index: int | None, field_name: str | None, reason: str) -> None:
        if len(self.items) >= MAX_ERRORS_REPORTED:
            return
        where = section if index is None else f"{section}[{index}]"
        if field_name:
            # An unknown key is echoed back: escape what the answer's UTF-8 cannot carry.
            field_name = field_name.encode(errors="backslashreplace").decode()
            where = f"{where}.{field_name}" if where else field_name
        self.items.append(
            {
                "section": section,
                "index": index,
                "field": field_name,
                "message": f"{where}: {reason}",
            }
        )

    def full(self) -> bool:
        return len(self.items) >= MAX_ERRORS_REPORTED


def validate_batch(doc: Any, *, max_metrics: int, max_events: int) -> BatchIn:
    """Check a parsed body against the contract; raise BatchError naming every problem found
    (up to MAX_ERRORS_REPORTED), or return the typed batch."""
    if not isinstance(doc, dict):
        raise BatchError(400, f"The body must be a JSON object, got {_describe(doc)}.")
    errors = _Errors()
    known = {*BATCH_FIELDS, *BATCH_SECTIONS}
    for key in doc:
        if key not in known:
            errors.add(
                "", None, str(key)[:60], f"unknown field; allowed: {', '.join(sorted(known))}"
            )

    top = {key: _top(doc, key, errors, check) for key, check in BATCH_CHECKS.items()}
    batch_id, run = top["batch_id"], top["run"]
    run_info = _run_info(doc.get("run_info"), errors)

    metrics_raw = doc.get("metrics", [])
    series_raw = doc.get("series", [])
    events_raw = doc.get("events", [])
    if not isinstance(metrics_raw, list):
        errors.add("metrics", None, None, f"must be a list, got {_describe(metrics_raw)}")
        metrics_raw = []
    if not isinstance(series_raw, list):
        errors.add("series", None, None, f"must be a list, got {_describe(series_raw)}")
        series_raw = []
    if not isinstance(events_raw, list):
        errors.add("events", None, None, f"must be a list, got {_describe(events_raw)}")
        events_raw = []
    point_count = len(metrics_raw) + sum(
        len(item["steps"])
        for item in series_raw
        if isinstance(item, dict) and isinstance(item.get("steps"), list)
    )
    if point_count > max_metrics:
        raise BatchError(
            413,
            f"The batch has {point_count} metric points; the limit is {max_metrics} per "
            "batch. Split it into several batches.",
        )
    if len(events_raw) > max_events:
        raise BatchError(
            413,
            f"The batch has {len(events_raw)} events; the limit is {max_events} per batch. "
            "Split it into several batches.",
        )

    times = _Times()
    metrics = _metrics(metrics_raw, errors, times)
    if series_raw:
        metrics += _series(series_raw, errors, times)
    events = _events(events_raw, errors)
    if errors.items:
        summary = errors.items[0]["message"]
        more = len(errors.items) - 1
        if more:
            summary += f" (and {more} more{'+' if errors.full() else ''} problem(s), see errors)"
        raise BatchError(400, summary, errors.items)
    assert isinstance(batch_id, str) and isinstance(run, str)
    return BatchIn(
        batch_id=batch_id,
        run=run,
        run_info=run_info,
        attempt=top["attempt"],
        rank=top["rank"],
        host=top["host"] or "",
        metrics=metrics,
        events=events,
    )


def _top(doc: dict[str, Any], key: str, errors: _Errors, check: Checker) -> Any:
    if key not in doc or doc[key] is None:
        if key in BATCH_REQUIRED:
            errors.add("", None, key, "is required")
        return None
    try:
        return check(doc[key])
    except _FieldError as exc:
        errors.add("", None, key, str(exc))
        return None


def _run_info(raw: Any, errors: _Errors) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        errors.add("run_info", None, None, f"must be an object, got {_describe(raw)}")
        return {}
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        check = RUN_INFO_CHECKS.get(key)
        if check is None:
            errors.add(
                "run_info",
                None,
                str(key)[:60],
                f"unknown field; allowed: {', '.join(RUN_INFO)}",
            )
            continue
        if value is None:
            continue
        try:
            clean[key] = check(value)
        except _FieldError as exc:
            errors.add("run_info", None, key, str(exc))
    return clean


_METRIC_KEYS = frozenset(METRIC_FIELDS)


class _Times:
    """Epoch seconds to datetimes for one batch: the future limit is read once, and a time
    shared by the batch's metrics at one step is converted once (the common case: a job
    logs several metrics per step with one timestamp)."""

    def __init__(self) -> None:
        self.limit = (datetime.now(UTC) + MAX_FUTURE_SKEW).timestamp()
        self.seen: dict[float, datetime] = {}

    def epoch(self, raw: float) -> datetime | None:
        """The datetime, or None when `raw` needs the full check (and its error message)."""
        moment = self.seen.get(raw)
        if moment is None:
            if not (-62135596800.0 < raw <= self.limit):  # NaN fails too
                return None
            moment = self.seen[raw] = datetime.fromtimestamp(raw, tz=UTC)
        return moment


def _metrics(items: list[Any], errors: _Errors, times: _Times) -> list[MetricIn]:
    """The row form: one object per point. The loop checks the common shapes inline (exact
    types, known names, epoch times) and hands anything else to `_metric_checked`, which
    gives the precise error: at 1,000 points per batch this is most of ingest's CPU."""
    metrics: list[MetricIn] = []
    append = metrics.append
    names: set[str] = set()
    epoch = times.epoch
    for index, item in enumerate(items):
        if type(item) is dict and len(item) <= 4:
            name = item.get("name")
            step = item.get("step")
            value = item.get("value")
            raw_time = item.get("time")
            try:
                known = name in names
            except TypeError:  # unhashable (a list, an object): the full checks name it
                known = False
            if (
                known
                and type(step) is int
                and 0 <= step <= MAX_STEP
                and (type(value) is float or (type(value) is int and -(2**53) <= value <= 2**53))
                and (len(item) == 3 or "time" in item)
            ):
                if raw_time is None:
                    append(MetricIn(name, step, float(value), None))
                    continue
                if type(raw_time) is float or type(raw_time) is int:
                    moment = epoch(raw_time)
                    if moment is not None:
                        append(MetricIn(name, step, float(value), moment))
                        continue
        if errors.full():
            break
        metric = _metric_checked(item, index, errors)
        if metric is not None:
            names.add(metric.name)
            append(metric)
    return metrics


def _metric_checked(item: Any, index: int, errors: _Errors) -> MetricIn | None:
    """One point through every check; records the first problem in `errors`."""
    if not isinstance(item, dict):
        errors.add("metrics", index, None, f"must be an object, got {_describe(item)}")
        return None
    try:
        name = check_metric_name(item.get("name"))
    except _FieldError as exc:
        errors.add("metrics", index, "name", str(exc) if "name" in item else "is required")
        return None
    try:
        step = check_step(item.get("step"))
    except _FieldError as exc:
        errors.add("metrics", index, "step", str(exc) if "step" in item else "is required")
        return None
    if "value" not in item:
        errors.add("metrics", index, "value", "is required")
        return None
    try:
        value = check_value(item["value"])
    except _FieldError as exc:
        errors.add("metrics", index, "value", str(exc))
        return None
    raw_time = item.get("time")
    moment = None
    if raw_time is not None:
        try:
            moment = check_time(raw_time)
        except _FieldError as exc:
            errors.add("metrics", index, "time", str(exc))
            return None
    if len(item) > 3 and not _METRIC_KEYS.issuperset(item):
        extra = sorted(set(item) - _METRIC_KEYS)[0][:60]
        errors.add("metrics", index, extra, "unknown field; allowed: name, step, value, time")
        return None
    return MetricIn(name, step, value, moment)


_SERIES_KEYS = ("name", "steps", "values", "times")


def _series(items: list[Any], errors: _Errors, times: _Times) -> list[MetricIn]:
    """The column form: {"name", "steps": [...], "values": [...], "times": [...]} per metric.
    Parsing it is several times cheaper than one object per point, and one bad item is
    named by its series and position, e.g. series[2].values[17]."""
    metrics: list[MetricIn] = []
    for index, item in enumerate(items):
        if errors.full():
            break
        if not isinstance(item, dict):
            errors.add("series", index, None, f"must be an object, got {_describe(item)}")
            continue
        extra = [key for key in item if key not in _SERIES_KEYS]
        if extra:
            errors.add(
                "series",
                index,
                str(extra[0])[:60],
                "unknown field; allowed: name, steps, values, times",
            )
            continue
        try:
            name = check_metric_name(item.get("name"))
        except _FieldError as exc:
            errors.add("series", index, "name", str(exc) if "name" in item else "is required")
            continue
        columns = _series_columns(item, index, errors)
        if columns is None:
            continue
        steps, values, raw_times = columns
        clean_steps = _column(steps, check_step, _exact_steps, index, "steps", errors)
        clean_values = _column(values, check_value, _exact_values, index, "values", errors)
        moments: list[datetime | None] = [None] * len(steps)
        if raw_times is not None:
            epoch = times.epoch
            for position, raw in enumerate(raw_times):
                moment = epoch(raw) if type(raw) is float or type(raw) is int else None
                if moment is None:
                    try:
                        moment = check_time(raw)
                    except _FieldError as exc:
                        errors.add("series", index, f"times[{position}]", str(exc))
                        break
                moments[position] = moment
        if clean_steps is None or clean_values is None:
            continue
        metrics += map(MetricIn, [name] * len(steps), clean_steps, clean_values, moments)
    return metrics


def _series_columns(
    item: dict[str, Any], index: int, errors: _Errors
) -> tuple[list[Any], list[Any], list[Any] | None] | None:
    steps, values, raw_times = item.get("steps"), item.get("values"), item.get("times")
    for key, column in (("steps", steps), ("values", values)):
        if not isinstance(column, list):
            reason = f"must be a list, got {_describe(column)}"
            errors.add("series", index, key, reason if key in item else "is required")
            return None
    if raw_times is not None and not isinstance(raw_times, list):
        errors.add("series", index, "times", f"must be a list, got {_describe(raw_times)}")
        return None
    assert isinstance(steps, list) and isinstance(values, list)
    for key, column in (("values", values), ("times", raw_times)):
        if column is not None and len(column) != len(steps):
            errors.add(
                "series",
                index,
                key,
                f"has {len(column)} items but steps has {len(steps)}; they must match",
            )
            return None
    return steps, values, raw_times


def _exact_steps(raw: list[Any]) -> bool:
    return all(type(item) is int for item in raw) and (
        not raw or (min(raw) >= 0 and max(raw) <= MAX_STEP)
    )


def _exact_values(raw: list[Any]) -> bool:
    return all(type(item) is float for item in raw)


def _column(
    raw: list[Any],
    check: Checker,
    exact: Callable[[list[Any]], bool],
    index: int,
    key: str,
    errors: _Errors,
) -> list[Any] | None:
    """The checked column, or None after naming its first bad item. A column that `exact`
    accepts whole (plain ints for steps, floats for values) passes without a call per item."""
    if exact(raw):
        return raw
    clean = []
    for position, item in enumerate(raw):
        try:
            clean.append(check(item))
        except _FieldError as exc:
            errors.add("series", index, f"{key}[{position}]", str(exc))
            return None
    return clean


def _events(items: list[Any], errors: _Errors) -> list[EventIn]:
    events: list[EventIn] = []
    for index, item in enumerate(items):
        if errors.full():
            break
        if not isinstance(item, dict):
            errors.add("events", index, None, f"must be an object, got {_describe(item)}")
            continue
        event_type = item.get("type")
        spec = EVENT_CHECKS.get(event_type) if isinstance(event_type, str) else None
        if spec is None:
            reason = (
                "is required"
                if event_type is None
                else f"unknown event type {_describe(event_type)}; known: {', '.join(EVENT_TYPES)}"
            )
            errors.add("events", index, "type", reason)
            continue
        moment: datetime | None = None
        if "time" in item:
            try:
                moment = check_time(item["time"])
            except _FieldError as exc:
                errors.add("events", index, "time", str(exc))
                continue
        elif not EVENTS[event_type].time_from:
            errors.add("events", index, "time", "is required")
            continue
        clean: dict[str, Any] = {}
        for key, value in item.items():
            if key in ("type", "time"):
                continue
            check = spec.get(key)
            if check is None:
                errors.add(
                    "events",
                    index,
                    str(key)[:60],
                    f"unknown field for {event_type}; allowed: type, time, {', '.join(spec)}",
                )
                continue
            if value is None:
                continue
            try:
                clean[key] = check(value)
            except _FieldError as exc:
                errors.add("events", index, key, str(exc))
        required = EVENTS[event_type].required
        # Sent as null is not sent: a note whose title is null has no title.
        missing = [key for key in required if item.get(key) is None]
        for key in missing:
            errors.add("events", index, key, f"is required for {event_type}")
        if "start" in clean and "end" in clean and clean["end"] < clean["start"]:
            errors.add("events", index, "end", "must not be before start")
        if "first_step" in clean and "start_times" in clean:
            last_step = clean["first_step"] + len(clean["start_times"]) - 1
            if last_step > MAX_STEP:
                errors.add(
                    "events",
                    index,
                    "start_times",
                    f"would reach step {last_step}; steps end at {MAX_STEP}",
                )
        if (
            "last_step" in clean
            and "first_step" in clean
            and clean["last_step"] < clean["first_step"]
        ):
            errors.add("events", index, "last_step", "must not be before first_step")
        _parallel(EVENTS[event_type].parallel, clean, index, errors)
        if moment is None:
            if missing or any(key not in clean for key in required):
                continue
            moment = _time_from(clean[EVENTS[event_type].time_from])
        events.append(EventIn(index, event_type, moment, clean))
    return events


def _time_from(value: datetime | list[datetime]) -> datetime:
    """An event's default time: its own time field, or the first of its list of times."""
    return value[0] if isinstance(value, list) else value


def _parallel(keys: tuple[str, ...], clean: dict[str, Any], index: int, errors: _Errors) -> None:
    """The event's parallel lists (columns of one table) must be as long as the first."""
    if not keys or keys[0] not in clean:
        return
    expected = len(clean[keys[0]])
    for key in keys[1:]:
        value = clean.get(key)
        columns = value.items() if isinstance(value, dict) else [(None, value)]
        for section, column in columns:
            if column is not None and len(column) != expected:
                where = key if section is None else f"{key}[{section!r}]"
                errors.add(
                    "events",
                    index,
                    where,
                    f"has {len(column)} items but {keys[0]} has {expected}; they must match",
                )
