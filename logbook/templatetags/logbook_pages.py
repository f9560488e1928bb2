"""Template filters for the logbook's pages (numbers and times: the site-wide builtins of
telemetry/templatetags/display.py):

{{ c.tier|choice:"checkpoint_tier" }}: a choice field's label for a raw value, on tables
built from `.values()` rows (no get_FOO_display there), so "object_store" reads "Object
store" as on the run page."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django import template
from django.db import models
from django.urls import reverse
from django.utils import timezone

from logbook.choices import CheckpointStatus, CheckpointTier, LogbookEntryKind, SdcDetection
from logbook.models import SdcReplay
from telemetry import display

register = template.Library()

CHOICES: dict[str, type[models.TextChoices]] = {
    "checkpoint_tier": CheckpointTier,
    "checkpoint_status": CheckpointStatus,
    "sdc_detection": SdcDetection,
    "entry_kind": LogbookEntryKind,
    "sdc_verdict": SdcReplay.Verdict,
}


@register.filter
def choice(value: str | None, kind: str) -> str:
    """The label of `value` among the choices named `kind`; the value itself if unknown."""
    if value is None:
        return "\u2013"
    labels = dict(CHOICES[kind].choices)
    return str(labels.get(value, value))


@register.simple_tag
def host_url(name: str, project_slug: str | None) -> str:
    """The host page of `name` in the project `project_slug`.

    Hosts are per project, and two projects may name the same machine; without the project
    the host page has to guess (the user's only match, or a 404 when it is ambiguous), so
    every link to a host says whose host it is."""
    target = reverse("logbook:host-detail", kwargs={"name": name})
    return f"{target}?{urlencode({'project': project_slug})}" if project_slug else target


@register.filter
def iso_when(value: str | None) -> str:
    """{{ e.at|iso_when }}: a time stored as an ISO string (an auto-triage evidence item) shown
    as every page shows times, in the reader's zone."""
    try:
        moment = datetime.fromisoformat(value or "")
    except ValueError:
        return display.DASH
    return display.moment(moment, timezone.get_current_timezone(), seconds=True, label=False)


EVIDENCE_KINDS = {
    "message": "Job's message",
    "dcgm": "DCGM event",
    "straggler": "Straggler",
    "first_silent": "First silent",
    "sdc": "SDC record",
    "group": "Incident group",
    "config": "Config change",
    "classifier": "Learned from triage",
    "semantic": "Similar public messages",
}


@register.filter
def evidence_kind(kind: str) -> str:
    """An auto-triage evidence item's kind in words."""
    return EVIDENCE_KINDS.get(kind, kind)
