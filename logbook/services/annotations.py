"""Annotations on a run's charts: a point or a range, in steps and/or wall time, with text and
tags (Grafana's annotation shape plus run and step). Input validation and the audited
writes. Reads: logbook.selectors.annotations."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from logbook.audit import diff_fields
from logbook.models import Annotation, AuditEvent
from logbook.selectors.annotations import MAX_BIGINT, user_may_annotate
from logbook.services.audit import audit_record
from telemetry import services as telemetry_services
from telemetry.models import Project, Run
from telemetry.query_time import BadTime
from telemetry.query_time import parse_time as parse_iso_time
from telemetry.selectors import User

MAX_TEXT_CHARS = 10_000
MAX_TAGS = 20
MAX_TAG_CHARS = 100
# Plotly draws dates up to year 9999; Python's datetime has the same bound.
MAX_EPOCH_MS = 253_402_300_799_999
MIN_EPOCH_MS = -62_135_596_800_000

FIELDS = ("time", "time_end", "step", "step_end", "text", "tags")
# Grafana's camelCase names on the API, the model's names in services.
API_NAMES = {"time": "time", "timeEnd": "time_end", "step": "step", "stepEnd": "step_end",
             "text": "text", "tags": "tags"}  # fmt: skip
LABEL_CHARS = 120

Axis = Literal["step", "time"]


# --- Input ----------------------------------------------------------------------------------


# Digits of the longest number a time or step field could hold (past it: out of range, and
# int() of over 4,300 digits raises).
_MAX_DIGITS = 20


def epoch_ms_to_datetime(value: int) -> datetime:
    """Epoch milliseconds (Grafana's unit) as an aware UTC datetime."""
    if not MIN_EPOCH_MS <= value <= MAX_EPOCH_MS:
        raise ValueError("out of range")
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)


def datetime_to_epoch_ms(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_time(value: Any, *, field: str) -> datetime | None:
    """A time given as epoch milliseconds (number or digits) or an ISO 8601 string (UTC if
    it names no zone). None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError({field: "Give epoch milliseconds or an ISO 8601 time."})
    if (
        isinstance(value, str)
        and value.strip().lstrip("-").isascii()
        and value.strip().lstrip("-").isdigit()
    ):
        if len(value.strip()) > _MAX_DIGITS:  # int() refuses more than 4,300 digits
            raise ValidationError({field: "The time is out of range (years 1-9999)."})
        value = int(value.strip())
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValidationError({field: "The time must be a finite number of milliseconds."})
        try:
            return epoch_ms_to_datetime(int(value))
        except (ValueError, OverflowError) as exc:
            raise ValidationError({field: "The time is out of range (years 1-9999)."}) from exc
    if isinstance(value, str):
        try:
            return parse_iso_time(value)
        except BadTime as exc:
            raise ValidationError(
                {field: f"Give epoch milliseconds or an ISO 8601 time: {exc}"}
            ) from exc
    raise ValidationError({field: "Give epoch milliseconds or an ISO 8601 time."})


def parse_step(value: Any, *, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        if len(value.strip()) > _MAX_DIGITS:
            raise ValidationError({field: f"A step is between 0 and {MAX_BIGINT}."})
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError({field: "A step is a whole number."})
    if not 0 <= value <= MAX_BIGINT:
        raise ValidationError({field: f"A step is between 0 and {MAX_BIGINT}."})
    return value


def _no_nul(text: str) -> bool:
    # PostgreSQL text and jsonb cannot hold NUL; refuse it rather than fail on save.
    return "\x00" not in text


def parse_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError({"text": "The text is a string."})
    if len(value) > MAX_TEXT_CHARS:
        raise ValidationError({"text": f"At most {MAX_TEXT_CHARS} characters."})
    if not _no_nul(value):
        raise ValidationError({"text": "The text contains a NUL character."})
    return value


def parse_tags(value: Any) -> list[str]:
    """A list of short strings, trimmed, without duplicates, in the order given."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise ValidationError({"tags": "Tags are a list of strings."})
    tags: list[str] = []
    for tag in (raw.strip() for raw in value):
        if not tag or len(tag) > MAX_TAG_CHARS or not _no_nul(tag):
            raise ValidationError(
                {"tags": f"Each tag has 1 to {MAX_TAG_CHARS} characters (no NUL)."}
            )
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise ValidationError({"tags": f"At most {MAX_TAGS} tags."})
    return tags


def annotation_input_parse(data: Any, *, partial: bool) -> dict[str, Any]:
    """The model fields named in an API body (Grafana's names: time, timeEnd, step, stepEnd,
    text, tags). Unknown keys (dashboardUID, panelId...) are ignored, as Grafana ignores
    what it does not know. Raises ValidationError naming each bad field."""
    if not isinstance(data, Mapping):
        raise ValidationError({"non_field_errors": "The body is a JSON object."})
    values: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    parsers = {
        "time": lambda v: parse_time(v, field="time"),
        "timeEnd": lambda v: parse_time(v, field="timeEnd"),
        "step": lambda v: parse_step(v, field="step"),
        "stepEnd": lambda v: parse_step(v, field="stepEnd"),
        "text": parse_text,
        "tags": parse_tags,
    }
    for api_name, parser in parsers.items():
        if api_name not in data:
            continue
        try:
            values[API_NAMES[api_name]] = parser(data[api_name])
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors.setdefault(field, []).extend(messages)
    if not partial and not (isinstance(data.get("text"), str) and data["text"].strip()):
        errors.setdefault("text", []).append("Say what the mark is: text is required.")
    if errors:
        raise ValidationError(errors)
    return values


def _position_check(values: Mapping[str, Any]) -> dict[str, Any]:
    """The combined position must be a point or an ordered range in steps and/or time. A
    range whose end equals its start is stored as a point."""
    checked = dict(values)
    errors: dict[str, str] = {}
    if checked.get("time") is None and checked.get("step") is None:
        errors["time"] = "Mark a step or a time (or both)."
    for start, end, api_end in (("time", "time_end", "timeEnd"), ("step", "step_end", "stepEnd")):
        if checked.get(end) is None:
            continue
        if checked.get(start) is None:
            errors[api_end] = f"A range needs its start ({start}) too."
        elif checked[end] < checked[start]:
            errors[api_end] = f"The end of the range is before its start ({start})."
        elif checked[end] == checked[start]:
            checked[end] = None
    if errors:
        raise ValidationError(errors)
    return checked


def _require_annotator(*, user: User, project: Project) -> None:
    if not user_may_annotate(user=user, project=project):
        raise PermissionDenied("Only on-call engineers and admins may annotate this run.")


def _snapshot(annotation: Annotation) -> dict[str, Any]:
    return {name: getattr(annotation, name) for name in FIELDS}


# --- Writes ---------------------------------------------------------------------------------


@transaction.atomic
def annotation_create(
    *,
    run: Run,
    user: User,
    text: str,
    time: datetime | None = None,
    time_end: datetime | None = None,
    step: int | None = None,
    step_end: int | None = None,
    tags: Sequence[str] = (),
) -> Annotation:
    """Mark a point or a range on the run's charts and audit it. Raises PermissionDenied for
    users who are not on-call or admin in the run's project, ValidationError for bad input."""
    _require_annotator(user=user, project=run.project)
    values = _position_check(
        {
            "time": time,
            "time_end": time_end,
            "step": parse_step(step, field="step"),
            "step_end": parse_step(step_end, field="stepEnd"),
            "text": parse_text(text),
            "tags": parse_tags(list(tags)),
        }
    )
    annotation = Annotation.objects.create(
        run=run, created_by=user if user.is_authenticated else None, **values
    )
    audit_record(
        project=run.project,
        entity=AuditEvent.Entity.ANNOTATION,
        object_id=annotation.pk,
        user=user,
        action="create",
        changes=diff_fields({}, _snapshot(annotation), FIELDS),
    )
    telemetry_services.run_data_version_bump(run_id=annotation.run_id)
    return annotation


@transaction.atomic
def annotation_update(*, annotation: Annotation, user: User, **changes: Any) -> Annotation:
    """Change some of time, time_end, step, step_end, text, tags (None clears a time or a
    step); audits the fields that changed."""
    unknown = set(changes) - set(FIELDS)
    if unknown:
        raise TypeError(f"annotation_update got unknown fields: {sorted(unknown)}")
    project = annotation.run.project
    _require_annotator(user=user, project=project)
    # Lock the row: two edits at once must each see the other's result in the audit trail.
    locked = Annotation.objects.select_for_update().get(pk=annotation.pk)
    before = _snapshot(locked)
    if "text" in changes:
        changes["text"] = parse_text(changes["text"])
    if "tags" in changes:
        changes["tags"] = parse_tags(changes["tags"])
    for name, api_name in (("step", "step"), ("step_end", "stepEnd")):
        if name in changes:
            changes[name] = parse_step(changes[name], field=api_name)
    after = _position_check({**before, **changes})
    for name in FIELDS:
        setattr(locked, name, after[name])
    locked.save()
    telemetry_services.run_data_version_bump(run_id=locked.run_id)
    audit_record(
        project=project,
        entity=AuditEvent.Entity.ANNOTATION,
        object_id=locked.pk,
        user=user,
        action="update",
        changes=diff_fields(before, _snapshot(locked), FIELDS),
    )
    return locked


@transaction.atomic
def annotation_delete(*, annotation: Annotation, user: User) -> None:
    """Remove the mark; the audit trail keeps what it said."""
    project = annotation.run.project
    _require_annotator(user=user, project=project)
    object_id = annotation.pk
    before = _snapshot(annotation)
    annotation.delete()
    telemetry_services.run_data_version_bump(run_id=annotation.run_id)
    audit_record(
        project=project,
        entity=AuditEvent.Entity.ANNOTATION,
        object_id=object_id,
        user=user,
        action="delete",
        changes=diff_fields(before, {}, FIELDS),
    )


# --- Chart overlay (pure: no queries) ---------------------------------------------------------
