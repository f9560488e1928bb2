"""Goodput's vocabulary and inputs (pure, no database): the buckets time falls into, their
labels, and the records of a job that telemetry.goodput reads. Times are POSIX seconds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

PRODUCTIVE = "productive"
ACCELERATOR_INIT = "accelerator_init"
TRAINING_PREP = "training_prep"
PROGRAM_STARTUP = "program_startup"
DATA_LOADING_SYNC = "data_loading_sync"
DATA_LOADING_ASYNC = "data_loading_async"
CHECKPOINT_SAVE = "checkpoint_save"
CHECKPOINT_RESTORE = "checkpoint_restore"
WASTED_PROGRESS = "wasted_progress"
INFRASTRUCTURE_RECOVERY = "infrastructure_recovery"
OTHER = "other"
CUSTOM_PREFIX = "custom:"

# Display order of the badput buckets; custom ones go before OTHER.
BADPUT_BUCKETS = (
    ACCELERATOR_INIT,
    TRAINING_PREP,
    PROGRAM_STARTUP,
    DATA_LOADING_SYNC,
    CHECKPOINT_SAVE,
    CHECKPOINT_RESTORE,
    WASTED_PROGRESS,
    INFRASTRUCTURE_RECOVERY,
)
# The buckets a restart costs: what "lost to interruptions" adds up.
INTERRUPTION_BUCKETS = (
    ACCELERATOR_INIT,
    TRAINING_PREP,
    PROGRAM_STARTUP,
    CHECKPOINT_RESTORE,
    WASTED_PROGRESS,
    INFRASTRUCTURE_RECOVERY,
)
BUCKET_LABELS = {
    PRODUCTIVE: "Productive",
    ACCELERATOR_INIT: "Accelerator init",
    TRAINING_PREP: "Training prep",
    PROGRAM_STARTUP: "Program startup",
    DATA_LOADING_SYNC: "Data loading (sync)",
    DATA_LOADING_ASYNC: "Data loading (async, overlapped)",
    CHECKPOINT_SAVE: "Checkpoint save (blocking)",
    CHECKPOINT_RESTORE: "Checkpoint restore",
    WASTED_PROGRESS: "Wasted progress",
    INFRASTRUCTURE_RECOVERY: "Infrastructure recovery",
    OTHER: "Other",
}

# Interval kinds as ingest names them (telemetry.models.JobInterval.Kind values).
KIND_ACCELERATOR_INIT = "accelerator_init"
KIND_TRAINING_PREP = "training_prep"
KIND_DATA_LOADING = "data_loading"
KIND_CUSTOM = "custom"

MAD_FACTOR = 3.0
# Float noise allowed when comparing sums of seconds.
EPSILON_S = 1e-9


def bucket_label(bucket: str) -> str:
    if bucket.startswith(CUSTOM_PREFIX):
        return f"Custom: {bucket[len(CUSTOM_PREFIX) :]}"
    if bucket.startswith("slowdown:"):  # telemetry.goodput_slowdowns
        return f"Slowdown: {bucket.partition(':')[2].replace('_', ' ')}"
    return BUCKET_LABELS.get(bucket, bucket)


# --- Inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRecord:
    """One job launch: its start, its end (if known), whether it completed, and when each of
    its steps began as (step, start) pairs (or an (n, 2) array of them: a long run has a
    million steps, and tuples of them cost seconds)."""

    number: int
    job_start: float | None
    job_end: float | None = None
    completed: bool = False
    step_starts: Sequence[tuple[int, float]] | FloatArray = ()


@dataclass(frozen=True)
class Interval:
    """Wall time spent on one thing: kind is accelerator_init, training_prep, data_loading or
    custom (label says which: eval, sdc_scan...)."""

    kind: str
    start: float
    end: float
    label: str = ""


@dataclass(frozen=True)
class CheckpointSave:
    """A blocking save of the checkpoint at `step`, ending at `at`."""

    step: int
    blocking_s: float
    at: float


@dataclass(frozen=True)
class Restore:
    """An attempt's checkpoint restore, ending at `at`."""

    duration_s: float
    at: float


@dataclass(frozen=True)
class GoodputInputs:
    attempts: Sequence[AttemptRecord]
    intervals: Sequence[Interval] = ()
    checkpoint_saves: Sequence[CheckpointSave] = ()
    restores: Sequence[Restore] = ()
    # Where elapsed time ends when the last attempt has not ended (the query time).
    as_of: float | None = None
