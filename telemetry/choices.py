"""The values of telemetry's choice fields, in a module without models: the ingest contract
validates against them without importing any model, and the models use the same classes."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import models

# The run label that names a run's MLflow experiment ("experiment=llama-sweeps", written by
# ingest's MLflow API): the run page shows it and the run list filters by it (?experiment=).
EXPERIMENT_LABEL = "experiment"


def experiment_of(labels: Sequence[str]) -> str:
    """The MLflow experiment a run's labels name ("" for none)."""
    prefix = f"{EXPERIMENT_LABEL}="
    return next((label[len(prefix) :] for label in labels if label.startswith(prefix)), "")


def labels_besides_experiment(labels: Sequence[str]) -> list[str]:
    """A run's labels less the one naming its MLflow experiment: pages that show the
    experiment on its own (the run page, compare's row) list these as its tags."""
    prefix = f"{EXPERIMENT_LABEL}="
    return [label for label in labels if not label.startswith(prefix)]


class AttemptStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    KILLED = "killed", "Killed"
    PREEMPTED = "preempted", "Preempted"
    UNKNOWN = "unknown", "Unknown"


class JobIntervalKind(models.TextChoices):
    ACCELERATOR_INIT = "accelerator_init", "Accelerator initialisation"
    TRAINING_PREP = "training_prep", "Training preparation"
    DATA_LOADING = "data_loading", "Data loading"
    CHECKPOINT_SAVE = "checkpoint_save", "Checkpoint save (blocking)"
    CHECKPOINT_RESTORE = "checkpoint_restore", "Checkpoint restore"
    CUSTOM = "custom", "Custom (eval, SDC scan, ...)"
