"""Caps on series per run and runs per project (settings INGEST_MAX_SERIES_PER_RUN and
INGEST_MAX_RUNS_PER_PROJECT), checked when a batch is accepted, on both the at-once and
the worker path: a batch answered 202 is never refused later by a worker because of a cap.

Cheap on the hot path: one keyed lookup for the batch's names that the run already has (and
one for the run when it has none of them); the counts run only when the batch would create a
run or a series. The caps are soft under concurrency: two batches accepted at the same moment
may each pass the check and overshoot by what they add, which keeps the promise that a 202 is
stored."""

from __future__ import annotations

from operator import itemgetter

from django.conf import settings

from ingest.schema import BatchError, BatchIn
from telemetry.models import MetricSeries, Run
from telemetry.selectors import packed

# Unprocessable, not 429: the cap does not lift by retrying, so the client must not retry.
CAP_STATUS = 422


def runs_cap_check(*, project_id: int, run_name: str, new: bool = False) -> None:
    """Raise BatchError when a run named `run_name` would be new (or is, with `new`) and
    the project is full."""
    cap = settings.INGEST_MAX_RUNS_PER_PROJECT
    if not new and Run.objects.filter(project_id=project_id, name=run_name).exists():
        return
    if Run.objects.filter(project_id=project_id).count() >= cap:
        raise BatchError(
            CAP_STATUS,
            f"run {run_name!r} would be new, and this project already holds its maximum of "
            f"{cap} runs (setting INGEST_MAX_RUNS_PER_PROJECT). Nothing was stored.",
        )


def batch_caps_check(*, project_id: int, batch_in: BatchIn) -> None:
    """Raise BatchError when the batch would create a run or series past its cap."""
    names = set(map(itemgetter(0), batch_in.metrics))  # each point's name, in C
    if not names:
        runs_cap_check(project_id=project_id, run_name=batch_in.run)
        return
    cap = settings.INGEST_MAX_SERIES_PER_RUN
    known = packed.series_names_known(
        project_id=project_id, run_name=batch_in.run, names=sorted(names)
    )
    if not known:
        # A series the batch names exists only in an existing run: the run check (one
        # query) is needed only when none does, which spares it for a run's every batch
        # after its first.
        runs_cap_check(project_id=project_id, run_name=batch_in.run)
    new = names - known
    if not new:
        return
    in_run = MetricSeries.objects.filter(run__project_id=project_id, run__name=batch_in.run)
    held = in_run.values("name").distinct().count()
    if held + len(new) > cap:
        raise BatchError(
            CAP_STATUS,
            f"run {batch_in.run!r} holds {held} metric series and this batch names {len(new)} "
            f"new ones, past the maximum of {cap} series per run (setting "
            "INGEST_MAX_SERIES_PER_RUN). Nothing was stored.",
        )
