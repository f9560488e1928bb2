"""Reads for learning from on-call: the triaged incidents a project's classifier trains on,
the stored classifier, and what the accuracy page shows of both (each rule's precision, the
overrides no rule explained, the classifier's cross-validated accuracy)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse

from logbook.models import Interruption, TriageClassifier, TriageSuggestion
from logbook.taxonomy import UNKNOWN_SLUG
from logbook.triage_classifier import MIN_EXAMPLES_PER_CATEGORY, Example
from telemetry.models import Project
from telemetry.selectors import User, projects_for_user

# The accuracy page lists this many of the latest overrides no rule explained.
UNEXPLAINED_SHOWN = 20
EXCERPT_CHARS = 160


def triaged_examples(*, project_id: int) -> list[Example]:
    """The project's unexpected incidents that on-call triaged (or resolved), with a message
    and a category other than "unknown": what each was filed under is the label. Oldest
    first, so the same incidents always give the same model."""
    rows = (
        Interruption.objects.filter(
            run__project_id=project_id, planned=False, triaged_at__isnull=False
        )
        .exclude(message="")
        .exclude(root_cause__slug=UNKNOWN_SLUG)
        .order_by("pk")
        .values_list("pk", "message", "root_cause__slug")
    )
    return [Example(message, slug, pk) for pk, message, slug in rows]


def examples_fingerprint(examples: Sequence[Example]) -> str:
    digest = hashlib.sha256()
    for item in examples:
        digest.update(f"{item.incident_id}\x1f{item.category}\x1f{item.message}\x1e".encode())
    return digest.hexdigest()


def classifier_of(*, project_id: int) -> TriageClassifier | None:
    return TriageClassifier.objects.filter(project_id=project_id).first()


def projects_with_triage() -> list[int]:
    """Projects with at least one triaged incident (the periodic training visits these)."""
    return list(
        Interruption.objects.filter(planned=False, triaged_at__isnull=False)
        .values_list("run__project_id", flat=True)
        .distinct()
        .order_by("run__project_id")
    )


def projects_with_pending_suggestions() -> list[tuple[int, str]]:
    """(id, slug) of the projects with a pending suggestion of an open incident, by slug:
    what `manage.py triage_remake` visits after an upgrade."""
    return list(
        TriageSuggestion.objects.filter(
            outcome=TriageSuggestion.Outcome.PENDING,
            interruption__status=Interruption.Status.OPEN,
        )
        .values_list("interruption__run__project_id", "interruption__run__project__slug")
        .distinct()
        .order_by("interruption__run__project__slug")
    )


# --- The accuracy page ------------------------------------------------------------------------


@dataclass(frozen=True)
class RulePrecision:
    """How often on-call filed an incident under the category a rule pointed at, over the
    decided suggestions whose evidence the rule was in."""

    rule: str
    categories: tuple[str, ...]
    fired: int
    right: int

    @property
    def precision(self) -> float | None:
        return self.right / self.fired if self.fired else None


@dataclass(frozen=True)
class UnexplainedOverride:
    interruption_id: int
    url: str
    suggested: str
    decided: str
    decided_at: datetime | None
    excerpt: str


@dataclass(frozen=True)
class ClassifierState:
    project: str
    trained_at: datetime
    triaged: int
    learned: int
    learned_categories: list[tuple[str, int]]
    waiting_categories: list[tuple[str, int]]  # not yet learned: fewer than the minimum
    cv_right: int | None
    cv_total: int | None

    @property
    def cv_accuracy(self) -> float | None:
        return self.cv_right / self.cv_total if self.cv_total else None


@dataclass(frozen=True)
class Learning:
    rules: list[RulePrecision]
    unexplained: list[UnexplainedOverride]
    unexplained_total: int
    decided_without_rules: int  # decided before rules were recorded with the evidence
    classifiers: list[ClassifierState]
    min_examples: int = MIN_EXAMPLES_PER_CATEGORY


def _decided_for_user(user: User) -> Iterable[tuple[int, str, str, str, list, datetime | None]]:
    return (
        TriageSuggestion.objects.filter(
            interruption__run__project__in=projects_for_user(user=user),
            outcome__in=(TriageSuggestion.Outcome.CONFIRMED, TriageSuggestion.Outcome.OVERRIDDEN),
            decided_root_cause__isnull=False,
        )
        .order_by("-decided_at", "-pk")
        .values_list(
            "interruption_id",
            "root_cause__name",
            "decided_root_cause__slug",
            "decided_root_cause__name",
            "evidence",
            "decided_at",
        )
        .iterator()
    )


def triage_learning(*, user: User) -> Learning:
    """Per rule: on how many decided suggestions it was evidence, and how often the incident
    was filed under the category it pointed at; the overrides whose filed category no
    evidence item pointed at (latest first); and each of the user's projects' classifier."""
    fired: dict[str, int] = {}
    right: dict[str, int] = {}
    categories: dict[str, set[str]] = {}
    unexplained: list[tuple[int, str, str, datetime | None]] = []
    unexplained_total = without_rules = 0
    for (
        interruption_id,
        suggested,
        decided_slug,
        decided,
        evidence,
        decided_at,
    ) in _decided_for_user(user):
        items = [item for item in evidence or [] if isinstance(item, dict)]
        recorded = [item for item in items if item.get("rule") and item.get("category")]
        if not recorded:
            without_rules += 1
            continue
        seen: dict[str, set[str]] = {}
        for item in recorded:
            seen.setdefault(str(item["rule"]), set()).add(str(item["category"]))
        for rule, pointed in seen.items():
            fired[rule] = fired.get(rule, 0) + 1
            right[rule] = right.get(rule, 0) + (decided_slug in pointed)
            categories.setdefault(rule, set()).update(pointed)
        if suggested != decided and not any(decided_slug in pointed for pointed in seen.values()):
            unexplained_total += 1
            if len(unexplained) < UNEXPLAINED_SHOWN:
                unexplained.append((interruption_id, suggested, decided, decided_at))
    messages = dict(
        Interruption.objects.filter(pk__in=[row[0] for row in unexplained]).values_list(
            "pk", "message"
        )
    )
    rules = sorted(
        (
            RulePrecision(rule, tuple(sorted(categories[rule])), count, right[rule])
            for rule, count in fired.items()
        ),
        key=lambda row: (-row.fired, row.rule),
    )
    return Learning(
        rules=rules,
        unexplained=[
            UnexplainedOverride(
                pk,
                reverse("logbook:incident-detail", args=[pk]),
                suggested,
                decided,
                at,
                " ".join((messages.get(pk) or "").split())[:EXCERPT_CHARS],
            )
            for pk, suggested, decided, at in unexplained
        ],
        unexplained_total=unexplained_total,
        decided_without_rules=without_rules,
        classifiers=_classifiers(user),
    )


def _classifiers(user: User) -> list[ClassifierState]:
    projects = dict(
        Project.objects.filter(pk__in=projects_for_user(user=user)).values_list("pk", "name")
    )
    states = []
    rows = TriageClassifier.objects.filter(project_id__in=list(projects)).order_by("project_id")
    for row in rows.only(
        "project_id", "trained_at", "triaged", "learned", "categories", "cv_right", "cv_total"
    ):
        counts = sorted((row.categories or {}).items(), key=lambda kv: (-kv[1], kv[0]))
        states.append(
            ClassifierState(
                projects[row.project_id],
                row.trained_at,
                row.triaged,
                row.learned,
                [(slug, n) for slug, n in counts if n >= MIN_EXAMPLES_PER_CATEGORY],
                [(slug, n) for slug, n in counts if n < MIN_EXAMPLES_PER_CATEGORY],
                row.cv_right,
                row.cv_total,
            )
        )
    return states
