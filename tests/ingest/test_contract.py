"""The ingest contract is stated once (ingest.contract) and drives validation, the OpenAPI
documentation and dispatch; its limits are its columns', so what it accepts the database
takes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.db.backends.base.operations import BaseDatabaseOperations
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from ingest import checks, contract, event_schema, metric_schema, schema, services
from ingest.contract import BATCH_FIELDS, BATCH_SECTIONS, EVENTS, METRIC_FIELDS, RUN_INFO, Field
from ingest.models import IngestBatch
from telemetry.models import Run


def _all_fields() -> list[tuple[str, Field]]:
    fields = [(f"batch.{key}", spec) for key, spec in BATCH_FIELDS.items()]
    fields += [(f"metrics.{key}", spec) for key, spec in METRIC_FIELDS.items()]
    fields += [(f"run_info.{key}", spec) for key, spec in RUN_INFO.items()]
    for event_type, event in EVENTS.items():
        fields += [(f"{event_type}.{key}", spec) for key, spec in event.fields.items()]
    return fields


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


def test_validation_documentation_and_dispatch_name_the_same_event_types(
    openapi: dict[str, Any],
) -> None:
    components = openapi["components"]["schemas"]
    documented = components["IngestEventRequest"]["discriminator"]["mapping"]
    checked = set(event_schema.EVENT_CHECKS)
    assert set(EVENTS) == checked == set(services.EVENT_HANDLERS) == set(documented)
    for event_type, event in EVENTS.items():
        name = documented[event_type].rsplit("/", 1)[1]
        properties = components[name]["properties"]
        assert set(properties) == {"type", "time", *event.fields}, event_type
        assert set(event.required) <= set(components[name]["required"]), event_type


def test_the_documented_batch_and_run_info_are_the_contracts(openapi: dict[str, Any]) -> None:
    components = openapi["components"]["schemas"]
    assert set(components["IngestBatchRequest"]["properties"]) == {*BATCH_FIELDS, *BATCH_SECTIONS}
    assert set(components["IngestRunInfoRequest"]["properties"]) == set(RUN_INFO)
    assert set(components["IngestMetricPointRequest"]["properties"]) == set(METRIC_FIELDS)
    limits = components["IngestEventNoteRequest"]["properties"]["title"]
    assert limits["maxLength"] == EVENTS["note"].fields["title"].max_length == 300


@pytest.mark.parametrize(("where", "spec"), [item for item in _all_fields() if item[1].column])
def test_each_limit_is_its_columns(where: str, spec: Field) -> None:
    app_model, column_name = spec.column.rsplit(".", 1)
    column = apps.get_model(app_model)._meta.get_field(column_name)
    if spec.kind == "integer":
        low, high = BaseDatabaseOperations.integer_field_ranges[column.get_internal_type()]
        assert low <= spec.minimum and spec.maximum == high, where
    else:
        assert spec.max_length == column.max_length, where


def test_every_bounded_field_has_a_bound() -> None:
    # A field without a column still needs its own limit: nothing unbounded gets through.
    for where, spec in _all_fields():
        if spec.kind == "integer":
            assert spec.maximum is not None, where
        if spec.kind in ("text", "name", "key", "names", "url_name", "url_names"):
            assert spec.max_length, where
        if spec.kind in ("names", "url_names", "times", "integers", "timings", "placement"):
            assert spec.max_items, where


def test_schema_imports_no_models() -> None:
    for module in (schema, checks, metric_schema, event_schema):
        source = Path(module.__file__).read_text()
        assert ".models" not in source and contract.__name__ in source, module.__name__


def _at_limit(spec: Field, *, when: datetime) -> Any:
    """The largest value the contract accepts for `spec`."""
    match spec.kind:
        case "integer":
            return spec.maximum
        case "text" | "name" | "key" | "url_name":
            return "x" * (spec.max_length or 0)
        case "names" | "url_names":
            return ["y" * (spec.max_length or 0)]
        case "time":
            return when.isoformat()
        case "times":
            return [when.isoformat()]
        case "choice":
            return spec.choices[-1]
        case "boolean":
            return True
        case "object":
            return {"k": 1}
        case "integers":
            return [spec.maximum]
        case "timings":
            return {"s" * (spec.max_length or 0): [1.5]}
        case "placement":
            level = "p" * (spec.max_length or 0)
            return {"h" * 255: {"rack": level, "pod": level, "cluster": level, "site": level}}
    return 1.5


@pytest.mark.django_db
def test_a_batch_at_every_limit_is_stored(project: Any) -> None:
    """Every field at its largest accepted value, through validation and into the tables:
    nothing the contract accepts fails in the worker."""
    token, _ = services.token_create(project=project, name="limits")
    when = datetime(2026, 11, 20, 8, tzinfo=UTC)
    events = []
    for event_type, event in EVENTS.items():
        item = {key: _at_limit(spec, when=when) for key, spec in event.fields.items()}
        events.append({"type": event_type, "time": when.isoformat(), **item})
    document = {
        **{key: _at_limit(spec, when=when) for key, spec in BATCH_FIELDS.items()},
        "run_info": {key: _at_limit(spec, when=when) for key, spec in RUN_INFO.items()},
        "metrics": [{key: _at_limit(spec, when=when) for key, spec in METRIC_FIELDS.items()}],
        "events": events,
    }
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    assert services.batch_process(batch_pk=acceptance.batch.pk) == "done"
    batch = IngestBatch.objects.get(pk=acceptance.batch.pk)
    assert batch.status == IngestBatch.Status.DONE and batch.last_error == ""
    run = Run.objects.get(project=project, name=document["run"])
    assert run.n_layers == RUN_INFO["n_layers"].maximum == 2**31 - 1
    assert run.interruptions.get().devices.get().uuid == "y" * 128


def test_one_past_a_column_limit_is_a_400_naming_the_field() -> None:
    document = {
        "batch_id": "b",
        "run": "r",
        "events": [
            {"type": "interruption", "time": 1_763_600_000, "devices": ["d" * 129]},
            {"type": "attempt_started", "time": 1_763_600_000, "attempt": 2**31},
        ],
    }
    with pytest.raises(schema.BatchError) as caught:
        schema.validate_batch(document, max_metrics=10, max_events=10)
    messages = [error["message"] for error in caught.value.errors]
    assert messages == [
        "events[0].devices: is 129 characters long; the limit is 128",
        f"events[1].attempt: must be <= {2**31 - 1}, got {2**31}",
    ]


@pytest.mark.parametrize("name", [{"a": 1}, ["loss"]])
def test_an_unhashable_metric_name_is_a_400_not_a_crash(name: Any) -> None:
    # Found by the fuzzer once the request body was documented: the fast path looked the
    # name up in a set before checking that it is a string.
    document = {
        "batch_id": "b",
        "run": "r",
        "metrics": [
            {"name": "loss", "step": 1, "value": 1.0},
            {"name": name, "step": 2, "value": 1.0},
        ],
    }
    with pytest.raises(schema.BatchError) as caught:
        schema.validate_batch(document, max_metrics=10, max_events=10)
    assert caught.value.status == 400
    assert caught.value.errors[0]["message"].startswith("metrics[1].name: must be a string")


T0 = 1_763_600_000
BAD_BATCHES = {
    # Each was a 202 whose batch died in the worker, or a 500.
    "config NaN": ({"run_info": {"config": {"lr": float("nan")}}}, "run_info.config: .lr is nan"),
    "config Infinity": ({"run_info": {"config": {"x": [float("inf")]}}}, "run_info.config"),
    "step_times past the last step": (
        {"events": [{"type": "step_times", "first_step": 2**63 - 2, "start_times": [T0] * 3}]},
        "events[0].start_times: would reach step 9223372036854775808",
    ),
    "surrogate in run": ({"run": "r\ud800"}, "run: has a lone surrogate"),
    "surrogate in batch_id": ({"batch_id": "b\ud800"}, "batch_id: has a lone surrogate"),
    "surrogate in a metric name": (
        {"metrics": [{"name": "l\ud800", "step": 1, "value": 1.0}], "attempt": 1},
        "metrics[0].name: has a lone surrogate",
    ),
    "surrogate in an unknown key": ({"x\ud800": 1}, "x\\ud800: unknown field"),
    "NUL in batch_id": ({"batch_id": "b\x00"}, "batch_id: must not contain a NUL"),
    "NUL in a note": (
        {"events": [{"type": "note", "time": T0, "title": "t", "body": "a\x00"}]},
        "events[0].body: must not contain a NUL",
    ),
    "slash in a host": ({"host": "rack/1"}, "host: 'rack/1' is not a host or device name"),
    "slash in hosts": (
        {"events": [{"type": "attempt_started", "time": T0, "hosts": ["h1", "a/b"]}]},
        "events[0].hosts: 'a/b' is not a host",
    ),
    "space in a device": (
        {"events": [{"type": "sdc_suspected", "time": T0, "step": 1, "device": "GPU 1"}]},
        "events[0].device: 'GPU 1' is not a host",
    ),
    "dot-dot host": ({"host": ".."}, "host: '..' is not a host"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_what_the_database_cannot_take_is_a_400_naming_it(case: str, post_batch: Any) -> None:
    change, message = BAD_BATCHES[case]
    response = post_batch({"batch_id": "b1", "run": "r1", **change})
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith(message)
    assert not IngestBatch.objects.exists()


def test_a_required_event_field_sent_as_null_is_missing() -> None:
    # Found by negative fuzzing: a note with "title": null was answered 202, though a note
    # without a title cannot be stored. Null is read as not sent, for required fields too.
    document = {
        "batch_id": "b",
        "run": "r",
        "events": [{"type": "note", "time": 1_763_600_000, "title": None, "body": "x"}],
    }
    with pytest.raises(schema.BatchError) as caught:
        schema.validate_batch(document, max_metrics=10, max_events=10)
    assert [error["message"] for error in caught.value.errors] == [
        "events[0].title: is required for note"
    ]
