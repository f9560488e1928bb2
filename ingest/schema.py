"""The ingest contract: parse a request body and validate it into typed values.

Pure (no database). The fields, their limits and the event types are `ingest.contract`'s;
`ingest.checks` turns them into checks, `ingest.metric_schema` and `ingest.event_schema`
validate the batch's sections, and this module the envelope around them. Every rejection
names where it happened (section, item index, field) and why, so a job's author can fix the
sender from the message alone. See docs/ingest.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from config.json_input import OversizeIntegerError, TooDeepError, json_loads
from ingest.checks import (
    Checker,
    ErrorList,
    FieldError,
    checks_for,
    describe,
)
from ingest.contract import (
    BATCH_FIELDS,
    BATCH_REQUIRED,
    BATCH_SECTIONS,
    RUN_INFO,
)
from ingest.event_schema import EventIn, events_validate
from ingest.metric_schema import BatchTimes, MetricIn, metric_rows_validate, metric_series_validate


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
        return json_loads(body)
    except OversizeIntegerError as exc:
        raise BatchError(400, str(exc)) from exc
    except TooDeepError as exc:
        raise BatchError(400, f"Malformed JSON: {exc}.") from exc
    except json.JSONDecodeError as exc:
        raise BatchError(
            400, f"Malformed JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from exc
    except UnicodeDecodeError as exc:
        raise BatchError(400, "Malformed JSON: the body is not valid UTF-8.") from exc
    except RecursionError as exc:
        raise BatchError(400, "Malformed JSON: nested too deeply.") from exc


BATCH_CHECKS = checks_for(BATCH_FIELDS)
RUN_INFO_CHECKS = checks_for(RUN_INFO)


def validate_batch(doc: Any, *, max_metrics: int, max_events: int) -> BatchIn:
    """Check a parsed body against the contract; raise BatchError naming every problem found
    (up to MAX_ERRORS_REPORTED), or return the typed batch."""
    if not isinstance(doc, dict):
        raise BatchError(400, f"The body must be a JSON object, got {describe(doc)}.")
    errors = ErrorList()
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
        errors.add("metrics", None, None, f"must be a list, got {describe(metrics_raw)}")
        metrics_raw = []
    if not isinstance(series_raw, list):
        errors.add("series", None, None, f"must be a list, got {describe(series_raw)}")
        series_raw = []
    if not isinstance(events_raw, list):
        errors.add("events", None, None, f"must be a list, got {describe(events_raw)}")
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

    times = BatchTimes()
    metrics = metric_rows_validate(metrics_raw, errors, times)
    if series_raw:
        metrics += metric_series_validate(series_raw, errors, times)
    events = events_validate(events_raw, errors)
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


def _top(doc: dict[str, Any], key: str, errors: ErrorList, check: Checker) -> Any:
    if key not in doc or doc[key] is None:
        if key in BATCH_REQUIRED:
            errors.add("", None, key, "is required")
        return None
    try:
        return check(doc[key])
    except FieldError as exc:
        errors.add("", None, key, str(exc))
        return None


def _run_info(raw: Any, errors: ErrorList) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        errors.add("run_info", None, None, f"must be an object, got {describe(raw)}")
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
        except FieldError as exc:
            errors.add("run_info", None, key, str(exc))
    return clean
