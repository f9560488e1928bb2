"""Learning from on-call: train a project's classifier on its triaged incidents (in the
worker, never in a request), store it, and turn its vote on a message into evidence for the
suggestion (logbook.autotriage weighs it beside the rules)."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from logbook import triage_classifier
from logbook.autotriage import EvidenceItem, category_name
from logbook.models import Interruption, TriageClassifier, TriageSuggestion
from logbook.selectors import triage_learning as selectors
from telemetry.models import Project

logger = logging.getLogger(__name__)

# After a training that changed the model, the project's pending suggestions are remade (the
# newest first, at most this many), so the queue shows the new vote without new evidence.
REMAKE_AFTER_TRAINING = 200
# A stored model is read once per process and training (it is tens to hundreds of KB).
_MODELS: dict[int, tuple[str, dict[str, Any] | None]] = {}


def classifier_train(*, project_id: int, now: datetime | None = None) -> TriageClassifier | None:
    """Train the project's classifier on its triaged incidents and store it, with its
    cross-validated accuracy; returns the stored row (None when the project is gone).
    Idempotent: unchanged triaged incidents store nothing new."""
    if not Project.objects.filter(pk=project_id).exists():
        return None
    examples = selectors.triaged_examples(project_id=project_id)
    fingerprint = selectors.examples_fingerprint(examples)
    existing = selectors.classifier_of(project_id=project_id)
    if existing is not None and existing.fingerprint == fingerprint:
        return existing
    model = triage_classifier.train(examples)
    scored = triage_classifier.cross_validated_accuracy(examples)
    counts = Counter(item.category for item in examples if item.message.strip())
    values: dict[str, Any] = {
        "trained_at": now or timezone.now(),
        "fingerprint": fingerprint,
        "triaged": sum(counts.values()),
        "learned": len(triage_classifier.learnable(examples)),
        "categories": dict(counts),
        "cv_right": scored[1] if scored else None,
        "cv_total": scored[2] if scored else None,
        "model": model,
    }
    with transaction.atomic():
        row, _ = TriageClassifier.objects.update_or_create(project_id=project_id, defaults=values)
    _MODELS.pop(project_id, None)
    return row


def suggestions_remake(*, project_id: int, limit: int | None = REMAKE_AFTER_TRAINING) -> int:
    """Remake the project's pending suggestions (newest first, at most `limit`; None for all,
    as `manage.py triage_remake` does after an upgrade): what a new model or rule says
    reaches the queue; returns how many were remade. The worker's tasks keep the limit so a
    remake fits their time limit; the newest are the ones on-call reads."""
    from logbook.services import autotriage  # autotriage imports this module

    pending = (
        TriageSuggestion.objects.filter(
            interruption__run__project_id=project_id,
            outcome=TriageSuggestion.Outcome.PENDING,
            interruption__status=Interruption.Status.OPEN,
        )
        .order_by("-interruption__occurred_at")
        .values_list("interruption_id", flat=True)
    )
    if limit is not None:
        pending = pending[:limit]
    return sum(
        1
        for interruption_id in list(pending)
        if autotriage.suggestion_make(interruption_id=interruption_id) is not None
    )


def _model(project_id: int) -> dict[str, Any] | None:
    stamp = (
        TriageClassifier.objects.filter(project_id=project_id)
        .values_list("fingerprint", flat=True)
        .first()
    )
    if stamp is None:
        return None
    cached = _MODELS.get(project_id)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    model = (
        TriageClassifier.objects.filter(project_id=project_id)
        .values_list("model", flat=True)
        .first()
    )
    _MODELS[project_id] = (stamp, model)
    return model


def vote_evidence(
    *, interruption: Interruption, names: dict[str, str] | None = None
) -> list[EvidenceItem]:
    """The project's classifier's vote on the interruption's message, as one evidence item
    ("3 confirmed incidents with similar messages were NIC", linked to the most similar), or
    nothing (no model yet, or it abstains)."""
    try:
        vote = triage_classifier.vote(_model(interruption.run.project_id), interruption.message)
    except Exception:  # a stored model this code cannot read must not stop the rules
        logger.exception(
            "triage classifier of project %s could not vote", interruption.run.project_id
        )
        return []
    if vote is None:
        return []
    name = category_name(vote.category, names)
    count = vote.agreeing
    nearest = next(item for item in vote.neighbours if item.category == vote.category)
    url = (
        reverse("logbook:incident-detail", args=[nearest.incident_id])
        if nearest.incident_id
        else ""
    )
    text = (
        f"{count} confirmed incident{'s' if count != 1 else ''} with similar messages "
        f"{'were' if count != 1 else 'was'} {name} "
        f"(learned from on-call's triage, {vote.probability:.0%})"
    )
    return [
        EvidenceItem(
            "classifier",
            interruption.occurred_at,
            text,
            url,
            vote.category,
            vote.weight,
            component=name,
            rule="classifier",
        )
    ]


def classifier_enqueue(*, project_id: int) -> None:
    """After the current transaction commits, have the worker train the project's classifier
    (a triage decision is a new labelled example)."""
    transaction.on_commit(lambda: _publish(project_id))


def _publish(project_id: int) -> None:
    from logbook import tasks  # tasks import this module

    try:
        tasks.triage_classifier_train_task.delay(project_id)
    except Exception:  # the triage is stored; the periodic training picks it up
        logger.exception("could not enqueue the triage classifier's training (%s)", project_id)
