"""Reads behind a run's checkpoint history and the interval advisor. The run comes from
telemetry.selectors.run_get_for_user, so it is already one the user may see."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import pandas as pd
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import F, FloatField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Extract

from logbook.checkpoint_interval import Advice, advise
from logbook.models import Checkpoint, CheckpointRestore
from logbook.selectors.failures import FailureFilters, interruptions_in_scope, run_spans
from telemetry import run_cache
from telemetry.models import Run

T = TypeVar("T")

# What the advisor and the save-cost chart read of every checkpoint in the window.
CHECKPOINT_FRAME_COLUMNS = [
    "step",
    "attempt",
    "saved_at",
    "blocking_save_s",
    "async_save_s",
    "status",
]


def _in_window(run: Run, start: datetime | None, end: datetime | None) -> QuerySet[Checkpoint]:
    checkpoints = Checkpoint.objects.filter(run=run)
    if start is not None:
        checkpoints = checkpoints.filter(saved_at__gte=start)
    if end is not None:
        checkpoints = checkpoints.filter(saved_at__lt=end)
    return checkpoints


def run_checkpoints_frame(
    *, run: Run, start: datetime | None = None, end: datetime | None = None
) -> pd.DataFrame:
    """Every checkpoint of the run (CHECKPOINT_FRAME_COLUMNS), newest step first. One query.
    A window keeps checkpoints saved inside it. Save times travel as epoch seconds: building
    an aware datetime per row cost more than the query at 3,000 checkpoints."""
    rows = list(
        _in_window(run, start, end)
        # A float, not Extract's default integer: save times keep their fractions (an
        # integer epoch turned a 622.08 s interval into 622.0 s).
        .annotate(saved_epoch=Extract("saved_at", "epoch", output_field=FloatField()))
        .order_by("-step")
        .values_list(
            "step", "attempt__number", "saved_epoch", "blocking_save_s", "async_save_s", "status"
        )
    )
    frame = pd.DataFrame(rows, columns=CHECKPOINT_FRAME_COLUMNS)
    frame["saved_at"] = pd.to_datetime(
        pd.to_numeric(frame["saved_at"], errors="coerce"), unit="s", utc=True
    )
    return frame


def checkpoint_history(
    *, run: Run, start: datetime | None = None, end: datetime | None = None
) -> QuerySet[Checkpoint]:
    """The history table's rows, newest step first, each with `attempt_number` and
    `restored_by` (the attempt numbers that resumed from it, in order) annotated, so that a
    page of it (a slice) is one query whatever its length."""
    restored_by = (
        CheckpointRestore.objects.filter(checkpoint=OuterRef("pk"))
        .order_by()
        .values("checkpoint")
        .annotate(numbers=ArrayAgg("attempt__number", order_by="attempt__number"))
        .values("numbers")
    )
    return (
        _in_window(run, start, end)
        .annotate(restored_by=Subquery(restored_by))
        .order_by("-step")
        .values(
            "id",
            "step",
            "saved_at",
            "blocking_save_s",
            "async_save_s",
            "size_bytes",
            "tier",
            "status",
            "uri",
            "restored_count",
            "restored_by",
            attempt_number=F("attempt__number"),
        )
    )


@dataclass(frozen=True)
class RunCheckpoints:
    checkpoints: pd.DataFrame  # CHECKPOINT_FRAME_COLUMNS, every checkpoint in the window
    advice: Advice


def run_checkpoints(
    *,
    run: Run,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
) -> RunCheckpoints:
    """Every checkpoint's save facts and the advice for one run over an optional window: MTBF
    from the run's own unexpected interruptions over its observed span, δ from its own
    saves. Three queries."""
    filters = FailureFilters(run_id=run.pk, start=start, end=end)
    runs: QuerySet[Run] = Run.objects.filter(pk=run.pk)
    frame = run_checkpoints_frame(run=run, start=start, end=end)
    rows = interruptions_in_scope(runs=runs, filters=filters)
    spans = run_spans(runs=runs, filters=filters, now=now)
    return RunCheckpoints(checkpoints=frame, advice=advise(frame, rows, spans))


def run_checkpoints_cached(
    *,
    run: Run,
    start: datetime | None,
    end: datetime | None,
    name: str,
    compute: Callable[[], T],
) -> T:
    """compute() (built from run_checkpoints over this window) cached under the run's
    data_version, so a new checkpoint or interruption shows on the next request. A run that
    has reported nothing yet is not cached: a running one's span (its MTBF) ends at "now"
    (see run_spans), which no version moves with."""
    if run.last_seen_at is None:
        return compute()
    version = run_cache.run_version_key(run=run)
    window = f"{start.isoformat() if start else ''}/{end.isoformat() if end else ''}"
    return run_cache.cached(f"logbook-checkpoints:{name}:{version}:{window}", compute)


def blocking_save_steps(*, run: Run) -> dict[int, list[int]]:
    """attempt number -> the steps its blocking checkpoint saves were taken at (steps whose
    time is the save's as much as training's). One query."""
    found: dict[int, list[int]] = {}
    rows = Checkpoint.objects.filter(run=run, attempt__isnull=False).values_list(
        "attempt__number", "step"
    )
    for number, step in rows:
        found.setdefault(number, []).append(step)
    return found
