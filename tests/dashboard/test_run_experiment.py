"""The MLflow experiment a run was logged under (its label experiment=<name>) on the run page,
and the run list filtered by it."""

from __future__ import annotations

import pytest

from ingest.mlflow_tags import run_labels
from telemetry import services as telemetry_services


def test_the_experiment_is_a_label_of_its_own() -> None:
    labels = run_labels(tags={"owner": "alice"}, labels=["mine"], experiment="pretrain")
    assert labels == ["mine", "experiment=pretrain", "owner=alice"]


@pytest.mark.django_db
def test_run_page_names_the_experiment_and_the_run_list_filters_by_it(client, project, alice):
    telemetry_services.run_upsert(
        project=project, name="in-sweep", info={"tags": ["experiment=lr-sweep"]}
    )
    telemetry_services.run_upsert(
        project=project, name="elsewhere", info={"tags": ["experiment=other"]}
    )
    client.force_login(alice)
    listed = client.get("/", {"experiment": "lr-sweep"}).content.decode()
    assert "in-sweep" in listed and "elsewhere" not in listed
    assert '<option value="lr-sweep" selected>' in listed
    run = project.runs.get(name="in-sweep")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        'id="run-experiment">MLflow experiment: <a href="/?experiment=lr-sweep">lr-sweep</a>'
        in page
    )
    # a bad value is a clear 4xx-free message on the page, never a 500
    assert client.get("/", {"experiment": "x" * 300}).status_code == 200


@pytest.mark.django_db
def test_run_page_lists_the_other_labels_apart_and_leaves_the_experiment_to_its_line(
    client, project, alice
):
    run = telemetry_services.run_upsert(
        project=project,
        name="labelled",
        info={"tags": ["experiment=lr-sweep", "7b", "owner=alice"]},
    )
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    tags = page.split('id="run-tags">', 1)[1].split("</p>", 1)[0]
    # one link a label, apart from the next (read as "7bowner=alice" without the space)
    assert tags == (
        '<a class="tag" href="/?tag=7b">7b</a> '
        '<a class="tag" href="/?tag=owner%3Dalice">owner=alice</a>'
    )
