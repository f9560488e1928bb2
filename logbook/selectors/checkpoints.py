"""Reads behind a run's checkpoint history and the interval advisor. The run comes from
telemetry.selectors.run_get_for_user, so it is already one the user may see."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from django.db.models import QuerySet

from logbook.checkpoint_interval import Advice, advise
from logbook.models import Checkpoint, CheckpointRestore
from logbook.selectors.failures import FailureFilters, interruptions_in_scope, run_spans
from telemetry.models import Run

CHECKPOINT_FRAME_COLUMNS = [
    "id",
    "step",
    "attempt",
    "saved_at",
    "blocking_save_s",
    "async_save_s",
    "size_bytes",
    "tier",
    "status",
    "uri",
    "restored_count",
    "restored_by",
]


def run_checkpoints_frame(
    *, run: Run, start: datetime | None = None, end: datetime | None = None
) -> pd.DataFrame:
    """The run's checkpoints, newest step first, with the attempt numbers that resumed from
    each (`restored_by`). Two queries. A window keeps checkpoints saved inside it."""
    checkpoints = Checkpoint.objects.filter(run=run)
    if start is not None:
        checkpoints = checkpoints.filter(saved_at__gte=start)
    if end is not None:
        checkpoints = checkpoints.filter(saved_at__lt=end)
    rows = list(
        checkpoints.order_by("-step").values_list(
            "id",
            "step",
            "attempt__number",
            "saved_at",
            "blocking_save_s",
            "async_save_s",
            "size_bytes",
            "tier",
            "status",
            "uri",
            "restored_count",
        )
    )
    restored_by: dict[int, list[int]] = defaultdict(list)
    restores = CheckpointRestore.objects.filter(checkpoint__run=run).order_by("attempt__number")
    for checkpoint_id, number in restores.values_list("checkpoint_id", "attempt__number"):
        restored_by[checkpoint_id].append(number)
    return pd.DataFrame(
        [(*row, restored_by.get(row[0], [])) for row in rows], columns=CHECKPOINT_FRAME_COLUMNS
    )


@dataclass(frozen=True)
class RunCheckpoints:
    checkpoints: pd.DataFrame
    advice: Advice


def run_checkpoints(
    *,
    run: Run,
    start: datetime | None = None,
    end: datetime | None = None,
    now: datetime | None = None,
) -> RunCheckpoints:
    """History and advice for one run over an optional window: MTBF from the run's own
    unexpected interruptions over its observed span, δ from its own saves. Four queries."""
    filters = FailureFilters(run_id=run.pk, start=start, end=end)
    runs: QuerySet[Run] = Run.objects.filter(pk=run.pk)
    frame = run_checkpoints_frame(run=run, start=start, end=end)
    rows = interruptions_in_scope(runs=runs, filters=filters)
    spans = run_spans(runs=runs, filters=filters, now=now)
    return RunCheckpoints(checkpoints=frame, advice=advise(frame, rows, spans))
