"""Reads for the run list and the run page: runs with their interruption counts, the latest
attempts, interruptions and checkpoints of a run with how many there are, the quarantined
hardware it touched, and the annotations and logbook entries its charts mark. Each costs a
fixed number of queries whatever the run's size."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Func, IntegerField, Model, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from logbook.models import Annotation, Checkpoint, IncidentSource, Interruption, LogbookEntry
from telemetry.choices import EXPERIMENT_LABEL, AttemptStatus
from telemetry.models import Attempt, MetricPoint, MetricSeries, Run
from telemetry.query_time import BadTime, parse_time, storable_text
from telemetry.selectors import User, projects_for_user


def runs_for_user(*, user: User) -> QuerySet[Run]:
    """The user's runs with what the run list shows, in a fixed number of queries."""
    latest_attempt = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    latest_loss_series = MetricSeries.objects.filter(run=OuterRef(OuterRef("pk")), name="loss")
    last_loss = (
        MetricPoint.objects.filter(
            series=Subquery(latest_loss_series.order_by("-attempt__number").values("pk")[:1])
        )
        .order_by("-step")
        .values("value")[:1]
    )
    interruption_count = (
        Run.objects.filter(pk=OuterRef("pk")).annotate(n=Count("interruptions")).values("n")[:1]
    )
    hang = _open_hangs(attempt=Q(attempt__number=OuterRef("current_attempt")))
    return (
        Run.objects.filter(project__in=projects_for_user(user=user))
        .select_related("project")
        .annotate(
            current_attempt=Subquery(latest_attempt.values("number")[:1]),
            current_status=Subquery(latest_attempt.values("status")[:1]),
            interruption_count=Subquery(interruption_count, output_field=IntegerField()),
            last_loss=Subquery(last_loss),
        )
        .annotate(hung_since=Subquery(hang.values("occurred_at")[:1]))
        .order_by("-last_seen_at", "project__slug", "name")
    )


def _open_hangs(*, attempt: Q) -> QuerySet[Interruption]:
    """A run's open hang incidents (hang detection among their sources, not resolved) on the
    attempt `attempt` picks, still at the step the hang stopped at (a step past it means the
    job moved on), earliest first. Correlated on the outer run."""
    return (
        Interruption.objects.filter(
            attempt,
            run=OuterRef("pk"),
            step=OuterRef("last_step"),
            sources__kind=IncidentSource.Kind.HANG,
        )
        .exclude(status=Interruption.Status.RESOLVED)
        .order_by("occurred_at")
    )


def run_hung_since(*, run: Run, attempt: Attempt | None) -> datetime | None:
    """When the open hang of the run's latest attempt began (its last step), or None."""
    if attempt is None:
        return None
    return (
        Run.objects.filter(pk=run.pk)
        .annotate(
            hung_since=Subquery(
                _open_hangs(attempt=Q(attempt_id=attempt.pk)).values("occurred_at")[:1]
            )
        )
        .values_list("hung_since", flat=True)
        .first()
    )


# The run list's sortable columns: the name in ?sort= (with "-" for descending) and the
# expression it orders by. Missing values sort last either way.
RUN_SORTS: dict[str, str] = {
    "project": "project__slug",
    "name": "name",
    "tags": "tags",
    "status": "current_status",
    "attempt": "current_attempt",
    "step": "last_step",
    "interruptions": "interruption_count",
    "loss": "last_loss",
    "last_seen": "last_seen_at",
}
RUN_STATUSES = (*AttemptStatus.values, "none")
# The status filter's choices in the words the run page uses ("Running", not "running").
RUN_STATUS_CHOICES = (*AttemptStatus.choices, ("none", "No attempt yet"))


class RunListError(ValueError):
    """A run-list parameter that cannot be read, named in the user's words."""


@dataclass(frozen=True)
class RunListQuery:
    search: str = ""
    status: str = ""
    tag: str = ""
    since: datetime | None = None
    until: datetime | None = None  # exclusive
    sort: str = "-last_seen"
    # The MLflow experiment (the run label experiment=<name>); "" for any.
    experiment: str = ""

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> RunListQuery:
        """Read ?q, ?status, ?tag, ?experiment, ?since, ?until (dates or times, in the display
        zone) and ?sort; raises RunListError saying which and why."""
        search = (params.get("q") or "").strip()[:200]
        tag = (params.get("tag") or "").strip()
        if not storable_text(search):
            raise RunListError("Search: no NUL bytes or unpaired surrogates.")
        if len(tag) > Run.TAG_MAX_LENGTH or not storable_text(tag):
            raise RunListError(
                f"Tag: at most {Run.TAG_MAX_LENGTH} characters, no NUL or unpaired surrogates."
            )
        status = (params.get("status") or "").strip()
        if status and status not in RUN_STATUSES:
            raise RunListError(f"Status must be one of {', '.join(RUN_STATUSES)}.")
        sort = (params.get("sort") or "-last_seen").strip()
        if sort.lstrip("-") not in RUN_SORTS:
            raise RunListError(f"Sort by one of {', '.join(RUN_SORTS)}.")
        moments = {}
        for name, label, end_of_day in (("since", "From", False), ("until", "To", True)):
            raw = (params.get(name) or "").strip()
            try:
                moments[name] = parse_time(raw, end_of_day=end_of_day) if raw else None
            except BadTime as exc:
                raise RunListError(f"{label}: {exc}.") from exc
        if moments["since"] and moments["until"] and moments["until"] <= moments["since"]:
            raise RunListError("To must be after From.")
        experiment = (params.get("experiment") or "").strip()
        if len(experiment) > Run.TAG_MAX_LENGTH or not storable_text(experiment):
            raise RunListError(
                f"Experiment: at most {Run.TAG_MAX_LENGTH} characters, no NUL or unpaired "
                "surrogates."
            )
        return cls(
            search, status, tag, moments["since"], moments["until"], sort, experiment=experiment
        )


def runs_list(*, user: User, query: RunListQuery) -> QuerySet[Run]:
    """The run list as `query` searches, filters (on the current attempt's status and the
    last data received) and sorts it; still a fixed number of queries a page."""
    runs = runs_for_user(user=user)
    if query.search:
        runs = runs.filter(
            Q(name__icontains=query.search) | Q(project__slug__icontains=query.search)
        )
    if query.status == "none":
        runs = runs.filter(current_status__isnull=True)
    elif query.status:
        runs = runs.filter(current_status=query.status)
    if query.tag:
        runs = runs.filter(tags__contains=[query.tag])
    if query.experiment:
        runs = runs.filter(tags__contains=[f"{EXPERIMENT_LABEL}={query.experiment}"])
    if query.since:
        runs = runs.filter(last_seen_at__gte=query.since)
    if query.until:
        runs = runs.filter(last_seen_at__lt=query.until)
    field = F(RUN_SORTS[query.sort.lstrip("-")])
    order = (
        field.desc(nulls_last=True) if query.sort.startswith("-") else field.asc(nulls_last=True)
    )
    return runs.order_by(order, "project__slug", "name", "pk")


@dataclass(frozen=True)
class RunPageTables:
    attempts: list[Attempt]  # by number, each with host_count
    attempt_count: int
    interruptions: list[Interruption]  # newest first, with root cause, attempt and hosts
    interruption_count: int
    checkpoints: list[Checkpoint]  # highest step first, with attempt
    checkpoint_count: int

    @property
    def bounded(self) -> bool:
        """Whether a table leaves rows out."""
        return (
            len(self.attempts) < self.attempt_count
            or len(self.interruptions) < self.interruption_count
            or len(self.checkpoints) < self.checkpoint_count
        )


def _count(model: type[Model], run: Run) -> Coalesce:
    rows = model.objects.filter(run_id=run.pk).order_by().values("run_id").annotate(n=Count("*"))
    return Coalesce(Subquery(rows.values("n"), output_field=IntegerField()), 0)


def run_table_counts(*, run: Run) -> tuple[int, int, int]:
    """How many attempts, interruptions and checkpoints the run has. One query (a count of
    each table by run, as subqueries of one SELECT)."""
    counts = (
        Run.objects.filter(pk=run.pk)
        .annotate(
            attempt_n=_count(Attempt, run),
            interruption_n=_count(Interruption, run),
            checkpoint_n=_count(Checkpoint, run),
        )
        .values_list("attempt_n", "interruption_n", "checkpoint_n")
    )
    attempts, interruptions, checkpoints = counts.get()
    return attempts, interruptions, checkpoints


def run_latest_attempt(*, run: Run) -> Attempt | None:
    """The run's latest attempt (by number), or None before its first."""
    return run.attempts.order_by("-number").first()


def run_page_tables(*, run: Run, rows: int | None) -> RunPageTables:
    """The latest `rows` of each table (every row when rows is None). Six queries."""
    # A correlated count: only the rows shown pay for their hosts (a GROUP BY would count
    # every attempt's thousands of hosts before the LIMIT).
    hosts = (
        Attempt.hosts.through.objects.filter(attempt_id=OuterRef("pk"))
        .order_by()
        .values("attempt_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    attempts = run.attempts.annotate(
        host_count=Coalesce(Subquery(hosts, output_field=IntegerField()), 0)
    ).order_by("-number")
    interruptions = (
        Interruption.objects.filter(run=run)
        .select_related("root_cause", "attempt")
        .prefetch_related("hosts")
        .order_by("-occurred_at")
    )
    checkpoints = Checkpoint.objects.filter(run=run).select_related("attempt").order_by("-step")
    if rows is not None:
        attempts, interruptions, checkpoints = (
            attempts[:rows], interruptions[:rows], checkpoints[:rows]
        )  # fmt: skip
    attempt_count, interruption_count, checkpoint_count = run_table_counts(run=run)
    return RunPageTables(
        attempts=list(attempts)[::-1],
        attempt_count=attempt_count,
        interruptions=list(interruptions),
        interruption_count=interruption_count,
        checkpoints=list(checkpoints),
        checkpoint_count=checkpoint_count,
    )


def run_annotations(*, run: Run) -> list[Annotation]:
    """The run's annotations in chart order, with who wrote them."""
    return list(
        Annotation.objects.filter(run=run).select_related("created_by").order_by("step", "time")
    )


def run_chart_interruptions(*, run: Run) -> list[Interruption]:
    """The run's interruptions, newest first, with their root cause (the charts' labels)."""
    return list(
        Interruption.objects.filter(run=run).select_related("root_cause").order_by("-occurred_at")
    )


def run_chart_entries(*, run: Run) -> list[LogbookEntry]:
    """What the charts read of the run's logbook entries. With the run set on each row, so
    reading entry.run costs no query."""
    entries = list(
        LogbookEntry.objects.filter(run=run).only(
            "run", "occurred_at", "step", "step_end", "title", "kind"
        )
    )
    for entry in entries:
        entry.run = run
    return entries


# How many runs the compare page offers to add (the most recently seen first).
COMPARE_CHOICES = 200


def compare_choices(*, user: User, exclude: list[int]) -> list[Run]:
    """Runs the user may add to a comparison: the most recently seen, each named by
    "project/run" in the picker (two projects may both have a run of the same name)."""
    return list(
        Run.objects.filter(project__in=projects_for_user(user=user))
        .exclude(pk__in=exclude)
        .select_related("project")
        .order_by(F("last_seen_at").desc(nulls_last=True), "-pk")[:COMPARE_CHOICES]
    )


def run_by_label_for_user(*, user: User, label: str) -> Run | None:
    """The run "project/run" names among the user's runs, or None."""
    slug, _, name = label.strip().partition("/")
    if not name:
        return None
    return (
        Run.objects.filter(project__in=projects_for_user(user=user), project__slug=slug, name=name)
        .select_related("project")
        .first()
    )


def run_tags_in_use(*, user: User, limit: int = 200) -> list[str]:
    """The tags on the user's runs, for the run list's tag picker (alphabetical). Through the
    ORM, so a read replica serves it like the rest of the page (config.replica)."""
    tags = (
        Run.objects.filter(project__in=projects_for_user(user=user))
        .annotate(tag=Func(F("tags"), function="unnest"))
        .values_list("tag", flat=True)
        .distinct()
        .order_by("tag")
    )
    return list(tags[:limit])
