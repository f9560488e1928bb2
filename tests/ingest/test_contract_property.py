"""A 202 is a promise, as a property: batches built from ingest.contract at the edges of every
limit (largest and smallest integers, longest texts in any Unicode, deepest config, last
steps, earliest times), now and then with a value just past one (a NUL, a lone surrogate, a
NaN in the config, a step past the last), are either refused by the validator or stored by
the worker's processing: nothing accepted dies later."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import checks, schema, services
from ingest.contract import (
    BATCH_FIELDS,
    BATCH_REQUIRED,
    EVENTS,
    MAX_OBJECT_DEPTH,
    METRIC_FIELDS,
    METRIC_REQUIRED,
    PLACEMENT_LEVELS,
    RUN_INFO,
    Field,
)
from ingest.models import IngestBatch
from telemetry.models import MetricPoint

EXAMPLES = int(os.environ.get("CONTRACT_EXAMPLES", "25"))
NOW = datetime.now(UTC)
MAX_STEP = METRIC_FIELDS["step"].maximum
assert MAX_STEP is not None

# Any character, non-BMP ones included; now and then NUL or a lone surrogate, which
# PostgreSQL text cannot hold and the validator must refuse.
ANY_CHAR = st.characters(exclude_categories=()) | st.sampled_from(["\x00", "\ud800"])
NAME_CHAR = st.characters(min_codepoint=32, exclude_categories=())
URL_NAME_CHAR = NAME_CHAR | st.sampled_from(list("/ \t."))


def _texts(alphabet: st.SearchStrategy[str], limit: int, *, min_size: int) -> Any:
    """Short texts, and texts of exactly `limit` characters (one character repeated, so the
    longest are cheap to generate)."""
    longest = st.builds(lambda char: char * limit, alphabet)
    return st.one_of(st.text(alphabet, min_size=min_size, max_size=8), longest)


def _name(alphabet: st.SearchStrategy[str], limit: int) -> Any:
    return _texts(alphabet, limit, min_size=1).filter(
        lambda text: text.strip() and text not in (".", "..")
    )


def _nested(depth: int) -> dict[str, Any]:
    """An object `depth` containers deep with a leaf at the bottom."""
    value: Any = ["leaf", 1.5, None]
    for level in range(depth - 1):
        value = {f"k{level}": value}
    return value if isinstance(value, dict) else {"k": value}


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.floats(),
    st.text(ANY_CHAR, max_size=8),
)
JSON_OBJECT = st.dictionaries(
    st.text(ANY_CHAR, max_size=8),
    st.recursive(
        JSON_LEAF,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(ANY_CHAR), inner),
        max_leaves=8,
    ),
    max_size=4,
)
TIMES = st.one_of(
    st.sampled_from(
        [
            "0001-01-01T00:00:00Z",
            "0001-01-01T00:00:00+14:00",
            "1970-01-01T00:00:00Z",
            (NOW + timedelta(hours=23)).isoformat(),
            0,
            -62135596799.5,
        ]
    ),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=NOW.replace(tzinfo=None),
        timezones=st.just(UTC),
    ).map(lambda moment: moment.isoformat()),
    st.floats(min_value=0, max_value=NOW.timestamp()),
)


def value_for(spec: Field) -> st.SearchStrategy[Any]:
    """Values the contract accepts for `spec`, weighted towards its limits."""
    match spec.kind:
        case "integer":
            assert spec.maximum is not None
            bounds = st.sampled_from([spec.minimum, spec.maximum])
            return bounds | st.integers(min_value=spec.minimum, max_value=spec.maximum)
        case "number":
            return (
                st.floats()
                | st.sampled_from(["NaN", "Infinity", "-inf"])
                | st.integers(min_value=-(2**63), max_value=2**63)
            )
        case "non_negative":
            return st.floats(min_value=0, allow_infinity=False) | st.just(1.7976931348623157e308)
        case "boolean":
            return st.booleans()
        case "text":
            assert spec.max_length is not None
            return _texts(ANY_CHAR, spec.max_length, min_size=0)
        case "name" | "key":
            assert spec.max_length is not None
            return _name(NAME_CHAR, spec.max_length)
        case "url_name":
            assert spec.max_length is not None
            return _name(URL_NAME_CHAR, spec.max_length)
        case "names" | "url_names":
            assert spec.max_length is not None
            alphabet = URL_NAME_CHAR if spec.kind == "url_names" else NAME_CHAR
            return st.lists(_name(alphabet, spec.max_length), max_size=3)
        case "time":
            return TIMES
        case "times":
            return st.lists(TIMES, min_size=1, max_size=3)
        case "choice":
            return st.sampled_from(spec.choices)
        case "object":
            return JSON_OBJECT | st.just(_nested(MAX_OBJECT_DEPTH))
        case "integers":
            assert spec.maximum is not None
            edges = st.sampled_from([spec.minimum, spec.maximum])
            item = edges | st.integers(min_value=spec.minimum, max_value=spec.maximum)
            return st.lists(item, min_size=1, max_size=3, unique=True)
        case "timings":
            assert spec.max_length is not None
            # Up to the contract's limit, and now and then past it (the validator refuses).
            seconds = st.floats(min_value=0, max_value=checks.MAX_SECTION_S) | st.just(
                1.7976931348623157e308
            )
            return st.dictionaries(
                _name(NAME_CHAR, spec.max_length), st.lists(seconds, min_size=1, max_size=3),
                min_size=1, max_size=2,
            )  # fmt: skip
        case "placement":
            assert spec.max_length is not None
            # A few hosts, each with some of the levels (a null level: not said).
            levels = st.dictionaries(
                st.sampled_from(PLACEMENT_LEVELS),
                st.none() | _name(NAME_CHAR, spec.max_length),
                max_size=len(PLACEMENT_LEVELS),
            )
            return st.dictionaries(_name(URL_NAME_CHAR, 255), levels, max_size=3)
    raise AssertionError(f"no strategy for {spec.kind}")


def _fields(fields: dict[str, Field], required: tuple[str, ...]) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {key: value_for(fields[key]) for key in required},
        optional={key: value_for(spec) for key, spec in fields.items() if key not in required},
    )


def _event(event_type: str) -> st.SearchStrategy[dict[str, Any]]:
    event = EVENTS[event_type]
    head: dict[str, Any] = {"type": st.just(event_type)}
    if not event.time_from:
        head["time"] = TIMES
    body = _fields(event.fields, event.required)
    return st.builds(_consistent, st.fixed_dictionaries(head), body, st.booleans())


def _consistent(head: dict[str, Any], body: dict[str, Any], fit: bool) -> dict[str, Any]:
    """Mostly what the contract checks across fields: an interval ends after it starts; a
    step_times list ends at the last step (unless `fit` is false)."""
    event = {**head, **body}
    if event["type"] == "interval":
        start, end = sorted([event["start"], event["end"]], key=_moment)
        event.update(start=start, end=end)
    if event["type"] == "step_times" and fit:
        event["first_step"] = min(event["first_step"], MAX_STEP - len(event["start_times"]) + 1)
    if event["type"] == "rank_timings" and fit:
        # Every per-rank list as long as `ranks` (its last item repeated), the range ordered.
        size = len(event["ranks"])
        for key in ("hosts", "devices"):
            if event.get(key):
                event[key] = (event[key] + event[key][-1:] * size)[:size]
        event["sections"] = {
            name: (values + values[-1:] * size)[:size] for name, values in event["sections"].items()
        }
        if "last_step" in event and event["last_step"] < event["first_step"]:
            event["first_step"], event["last_step"] = event["last_step"], event["first_step"]
    return event


def _moment(raw: Any) -> datetime:
    if isinstance(raw, str):
        return datetime.fromisoformat(raw)
    return datetime.fromtimestamp(raw, tz=UTC)


BATCHES = st.fixed_dictionaries(
    {key: value_for(BATCH_FIELDS[key]) for key in BATCH_REQUIRED},
    optional={
        **{key: value_for(spec) for key, spec in BATCH_FIELDS.items() if key not in BATCH_REQUIRED},
        "run_info": _fields(RUN_INFO, ()),
        "metrics": st.lists(_fields(METRIC_FIELDS, METRIC_REQUIRED), max_size=4),
        "events": st.lists(st.one_of([_event(name) for name in EVENTS]), max_size=6),
    },
)


class _RolledBack(Exception):
    pass


@pytest.mark.django_db
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=BATCHES)
def test_what_the_contract_accepts_the_worker_stores(project: Any, document: dict) -> None:
    # given a batch the validator accepts
    body = json.dumps(document).encode()
    try:
        schema.validate_batch(schema.parse_json(body), max_metrics=100, max_events=100)
    except schema.BatchError:
        return  # a 400 promises nothing
    token, _ = services.token_create(project=project, name="edges")
    try:
        with transaction.atomic():  # each example on its own, rolled back at the end
            # when it is accepted, then processed by the worker's service
            acceptance = services.batch_submit(token=token, body=body)
            outcome = services.batch_process(batch_pk=acceptance.batch.pk)

            # then it is stored, every distinct point with it
            batch = IngestBatch.objects.get(pk=acceptance.batch.pk)
            assert (outcome, batch.status, batch.last_error) == ("done", "done", "")
            sent = {(m["name"], m["step"]) for m in document.get("metrics", [])}
            stored = set(
                MetricPoint.objects.filter(series__run__name=document["run"]).values_list(
                    "series__name", "step"
                )
            )
            assert stored == sent
            raise _RolledBack
    except _RolledBack:
        pass


def test_the_deepest_config_is_accepted_and_one_more_level_refused() -> None:
    document = {"batch_id": "b", "run": "r", "run_info": {"config": _nested(MAX_OBJECT_DEPTH)}}
    schema.validate_batch(document, max_metrics=1, max_events=1)
    document["run_info"]["config"] = {"k": _nested(MAX_OBJECT_DEPTH)}
    with pytest.raises(schema.BatchError) as caught:
        schema.validate_batch(document, max_metrics=1, max_events=1)
    assert re.match(r"run_info\.config: is nested more than 32 levels", caught.value.detail)
