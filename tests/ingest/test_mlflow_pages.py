"""What an MLflow job logs is seen on Chronicle's pages: params as the run's config, its own
tags as run tags and its experiment on its own (page and compare), and the run link MLflow
prints opens the run's page."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

# Before mlflow is imported: no usage telemetry leaves the machine during tests.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

import mlflow

from ingest.mlflow_tags import run_labels
from telemetry.models import Run


def _mlflow_job(name: str, lr: float, owner: str) -> str:
    """An MLflow job as a user writes it; returns the run link MLflow printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        mlflow.set_experiment("sweep")
        with mlflow.start_run(run_name=name):
            mlflow.log_params({"lr": lr, "batch_size": 256, "model": "llama-1b"})
            mlflow.set_tag("owner", owner)
            for step in range(5):
                mlflow.log_metric("loss", 3.0 - 0.1 * step, step=step)
    match = re.search(r"View run \S+ at: (\S+)", printed.getvalue())
    assert match, printed.getvalue()
    return match.group(1)


def test_mlflow_tags_become_labels_and_follow_their_latest_value() -> None:
    labels = run_labels(
        tags={"owner": "bob", "mlflow.user": "root", "note": "x" * 80}, labels=["owner=alice", "7b"]
    )
    assert labels == ["7b", "owner=bob"]  # system and over-long tags stay out


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_printed_run_link_opens_the_run_page_with_params_and_tags(
    mlflow_tracking, browser, live_server, login_page, project, alice
):
    # given a job that logged params and an owner tag, and the link MLflow printed
    link = _mlflow_job("sweep-a", 3e-4, "alice")
    assert link.startswith(f"{mlflow_tracking}/#/experiments/")
    run = Run.objects.get(name="sweep-a")
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice opens the link in her browser
    page.goto(link)
    page.wait_for_url(f"{live_server.url}/runs/{run.pk}/")

    # then she is on the run's page, which shows the params, the experiment and the owner
    config = page.locator("#run-config").inner_text()
    for setting in ("batch_size\t256", "lr\t0.0003", "model\tllama-1b"):
        assert setting in config, config
    assert page.locator("#run-experiment").inner_text() == "MLflow experiment: sweep"
    # (the experiment on its own line, not again among the tags)
    assert page.locator("#run-tags").inner_text().split() == ["owner=alice"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_compare_shows_mlflow_params_and_tags_that_differ(
    mlflow_tracking, browser, live_server, login_page, project, alice
):
    # given two MLflow runs of different lr and owner
    _mlflow_job("sweep-a", 3e-4, "alice")
    _mlflow_job("sweep-b", 1e-4, "bob")
    ids = [Run.objects.get(name=name).pk for name in ("sweep-a", "sweep-b")]
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice compares them
    page.goto(f"{live_server.url}/compare/?runs={ids[0]},{ids[1]}")

    # then the config differences name the lr and the owner, not what they share (the
    # experiment "sweep" of both runs among them)
    rows = [row.split("\t") for row in page.locator("#config-diff tbody").inner_text().splitlines()]
    assert rows == [["lr", "0.0003", "0.0001"], ["tags", "owner=alice", "owner=bob"]]


@pytest.mark.django_db
def test_mlflow_links_for_api_clients_and_strangers(client, alice, charlie, project):
    from ingest import services
    from ingest.services.mlflow import mlflow_run_create

    token, _ = services.token_create(project=project, name="mlflow")
    mlflow_run = mlflow_run_create(token=token, experiment_id="0", run_name="private")
    # an API client asking /mlflow/ still gets MLflow's JSON 404
    api = client.get("/mlflow/", HTTP_ACCEPT="application/json")
    assert api.status_code == 404 and api.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    # a browser gets the page that reads the link's fragment
    page = client.get("/mlflow/", HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert page.status_code == 200 and b"mlflow_link" in page.content
    # the redirect needs a login, and finds only runs of the user's projects
    opened = f"/mlflow/open?run={mlflow_run.run_uuid}"
    assert client.get(opened).status_code == 302 and "/login/" in client.get(opened)["Location"]
    client.force_login(charlie)
    assert client.get(opened).status_code == 404
    client.force_login(alice)
    assert client.get(opened)["Location"] == f"/runs/{mlflow_run.run_id}/"
    assert client.get("/mlflow/open?experiment=1")["Location"] == "/"
