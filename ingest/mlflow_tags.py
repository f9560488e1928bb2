"""An MLflow run's own tags shown as its Chronicle run's labels (`owner=alice`): on the run
page, in compare and in the run list's tag filter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from telemetry import services as telemetry_services
from telemetry.choices import EXPERIMENT_LABEL
from telemetry.models import Run

if TYPE_CHECKING:
    from ingest.models import MlflowRun


EXPERIMENT_KEY = EXPERIMENT_LABEL


def run_labels(
    *, tags: Mapping[str, str], labels: Sequence[str], experiment: str = ""
) -> list[str]:
    """The run's labels with the MLflow tags as "key=value" and its experiment as
    "experiment=<name>": labels of other keys are kept, a key's label follows its latest
    value. MLflow's system tags (mlflow.*) stay out, as does a tag too long to be a label
    (the MLflow API still returns it; a longer experiment name is cut). Pure."""
    own = {key: value for key, value in tags.items() if not key.startswith("mlflow.")}
    if experiment:
        prefix = f"{EXPERIMENT_KEY}="
        own[EXPERIMENT_KEY] = experiment[: Run.TAG_MAX_LENGTH - len(prefix)]
    kept = [label for label in labels if label.split("=", 1)[0] not in own]
    added = [
        label
        for label in (f"{key}={value}" for key, value in sorted(own.items()))
        if len(label) <= Run.TAG_MAX_LENGTH
    ]
    return list(dict.fromkeys(kept + added))[: Run.TAGS_MAX]


def run_labels_sync(*, mlflow_run: MlflowRun) -> None:
    """Write the MLflow run's tags into its run's labels. The labels are read again: the
    caller holds the MLflow run's lock, but the run row joined to it may be older."""
    run = mlflow_run.run
    current = Run.objects.values_list("tags", flat=True).get(pk=run.pk)
    labels = run_labels(tags=mlflow_run.tags, labels=current, experiment=mlflow_run.experiment.name)
    if labels != current:
        telemetry_services.run_upsert(project=run.project, name=run.name, info={"tags": labels})
