"""Compare runs: two or more runs overlaid on the run page's charts, their configs' differences
shown, only runs the user may see."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction

from dashboard.config_diff import config_differences, flatten, runs_settings
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

START = datetime(2026, 11, 20, tzinfo=UTC)


def test_nested_configs_compare_setting_by_setting() -> None:
    first = {"optimizer": {"lr": 3e-4, "betas": [0.9, 0.95]}, "seed": 1, "tp": 8}
    second = {"optimizer": {"lr": 1.5e-4, "betas": [0.9, 0.95]}, "seed": 1, "pp": 4}

    assert flatten(first) == {"optimizer.lr": 3e-4, "optimizer.betas": [0.9, 0.95], "seed": 1,
                              "tp": 8}  # fmt: skip
    assert config_differences([first, second]) == [
        {"key": "optimizer.lr", "values": [3e-4, 1.5e-4]},
        {"key": "pp", "values": [None, 4]},
        {"key": "tp", "values": [8, None]},
    ]
    assert config_differences([first, first, first]) == []


def test_labels_compare_as_what_differs_and_the_experiment_on_its_own() -> None:
    # given runs sharing a label and an experiment, one of them in another experiment too
    sweep_a = ({"lr": 3e-4}, ["experiment=sweep", "7b", "owner=alice"])
    sweep_b = ({"lr": 3e-4}, ["experiment=sweep", "7b", "owner=bob"])
    other = ({"lr": 3e-4}, ["experiment=other", "7b"])

    # then the tags row leaves out the label all of them carry, and the experiment is a row
    # only where it differs
    assert config_differences(runs_settings([sweep_a, sweep_b])) == [
        {"key": "tags", "values": ["owner=alice", "owner=bob"]},
    ]
    assert config_differences(runs_settings([sweep_a, sweep_b, other])) == [
        {"key": "MLflow experiment", "values": ["sweep", "sweep", "other"]},
        {"key": "tags", "values": ["owner=alice", "owner=bob", None]},
    ]
    assert config_differences(runs_settings([sweep_a, sweep_a])) == []


def _run_with_loss(project: Any, name: str, config: dict[str, Any], attempts: int) -> Run:
    run = telemetry_services.run_upsert(project=project, name=name)
    Run.objects.filter(pk=run.pk).update(config=config)
    for number in range(1, attempts + 1):
        attempt = Attempt.objects.create(run=run, number=number, started_at=START)
        points = [
            ("loss", step, 10.0 - step / 50 + number, START + timedelta(seconds=30 * step))
            for step in range(number * 10, number * 10 + 50)
        ]
        with transaction.atomic():
            telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
    return run


def _charts(html: str) -> list[dict[str, Any]]:
    found = re.search(r'<script id="charts-data" type="application/json">(.*?)</script>', html)
    assert found
    return json.loads(found.group(1))


@pytest.mark.django_db
def test_compare_overlays_each_runs_attempts_and_shows_config_differences(client, project, alice):
    # given two runs, one restarted once, differing in lr
    first = _run_with_loss(project, "lr-3e-4", {"lr": "3e-4", "seed": 1}, attempts=2)
    second = _run_with_loss(project, "lr-1e-4", {"lr": "1e-4", "seed": 1}, attempts=1)
    client.force_login(alice)

    # when the compare page is opened on both
    response = client.get(f"/compare/?runs={first.pk},{second.pk}")

    # then one loss chart holds every attempt of both runs, named by run and attempt
    assert response.status_code == 200
    html = response.content.decode()
    (loss,) = [c for c in _charts(html) if c["id"] == "chart-0"]
    names = [t["name"] for t in loss["figure"]["data"]]
    assert names == ["lr-3e-4 · attempt 1", "lr-3e-4 · attempt 2", "lr-1e-4 · attempt 1"]
    lines = [(t["line"]["color"], t["line"]["dash"]) for t in loss["figure"]["data"]]
    # one hue per run; a run's earlier attempt lighter and dashed
    assert lines == [("#8fbbda", "dash"), ("#1f77b4", "solid"), ("#ff7f0e", "solid")]
    # and the configs' one difference, not the shared seed
    assert '<td>lr</td><td class="before">3e-4</td><td class="after">1e-4</td>' in html
    assert "<td>seed</td>" not in html


@pytest.mark.django_db
def test_a_metric_only_one_run_has_is_drawn_for_that_run(client, project, alice):
    first = _run_with_loss(project, "with-mfu", {}, attempts=1)
    second = _run_with_loss(project, "without", {}, attempts=1)
    attempt = first.attempts.get()
    with transaction.atomic():
        telemetry_services.metric_points_insert(
            run=first, attempt=attempt, points=[("mfu", step, 0.4, None) for step in range(5)]
        )
    client.force_login(alice)

    response = client.get(f"/compare/?runs={second.pk},{first.pk}")

    assert response.status_code == 200
    (mfu,) = [c for c in _charts(response.content.decode()) if c["id"] == "chart-1"]
    assert [t["name"] for t in mfu["figure"]["data"]] == ["with-mfu · attempt 1"]


@pytest.mark.django_db
def test_the_run_list_checkboxes_submit_to_compare(client, project, alice):
    first = _run_with_loss(project, "a", {}, attempts=1)
    second = _run_with_loss(project, "b", {}, attempts=1)
    client.force_login(alice)

    html = client.get("/").content.decode()
    assert f'name="runs" value="{first.pk}" form="compare-form"' in html
    # the checkboxes' GET form sends runs=1&runs=2
    response = client.get("/compare/", {"runs": [first.pk, second.pk]})
    assert response.status_code == 200
    assert "Compare 2 runs" in response.content.decode()


@pytest.mark.django_db
def test_compare_refuses_bad_ids_and_hides_runs_of_other_projects(
    client, project, other_project, alice
):
    mine = _run_with_loss(project, "mine", {}, attempts=1)
    theirs = telemetry_services.run_upsert(project=other_project, name="theirs")
    client.force_login(alice)

    for query in (f"runs={mine.pk}", f"runs={mine.pk},x", f"runs={mine.pk},{mine.pk}"):
        response = client.get(f"/compare/?{query}")
        assert response.status_code == 400, query
        assert "runs:" in response.content.decode()
        assert 'id="compare-pick"' in response.content.decode()  # the picker, not a dead end
    assert client.get(f"/compare/?runs={mine.pk},{theirs.pk}").status_code == 404
    assert client.get(f"/compare/?runs={mine.pk},999999").status_code == 404
    client.logout()
    assert client.get(f"/compare/?runs={mine.pk},{mine.pk + 1}").status_code == 302


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_compare_two_runs_in_a_browser(browser, live_server, login_page, project, alice):
    # given two runs differing in lr
    first = _run_with_loss(project, "lr-3e-4", {"lr": "3e-4"}, attempts=2)
    second = _run_with_loss(project, "lr-1e-4", {"lr": "1e-4"}, attempts=1)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice ticks both in the run list and presses Compare
    page.goto(f"{live_server.url}/")
    page.check(f"input[name=runs][value='{first.pk}']")
    page.check(f"input[name=runs][value='{second.pk}']")
    page.click("#compare-button")
    page.wait_for_selector("#chart-0 .main-svg")
    page.wait_for_function(
        "() => window.ChronicleCharts && document.querySelector('#chart-0')._fullData"
    )

    # then the loss chart draws both runs' attempts, on one linked step range
    names = page.evaluate(
        "Array.from(document.querySelector('#chart-0')._fullData).map(t => t.name)"
    )
    assert "lr-3e-4 · attempt 2" in names and "lr-1e-4 · attempt 1" in names
    assert page.evaluate("document.querySelector('#chart-0').layout.xaxis.range") == [10, 69]
    # and the config difference
    assert page.locator("#config-diff").inner_text().split() == [
        "Setting", "lr-3e-4", "lr-1e-4", "lr", "3e-4", "1e-4"
    ]  # fmt: skip

    # and when she adds a third run with the page's own picker
    third = _run_with_loss(project, "lr-6e-4", {"lr": "6e-4"}, attempts=1)
    page.fill("#compare-add input[name=add]", f"{project.slug}/lr-6e-4")
    with page.expect_navigation():
        page.click("#compare-add button")
    page.wait_for_function(
        "() => { const gd = document.querySelector('#chart-0');"
        " return gd && gd._fullData && gd._fullData.some(t => t.name === 'lr-6e-4 · attempt 1'); }"
    )
    # then the choice is in the URL (a link reproduces it) and each run can be removed again
    assert f"runs={first.pk}%2C{second.pk}%2C{third.pk}" in page.url
    with page.expect_navigation():
        page.click("#compared-runs li:nth-child(1) a.remove-run")
    assert page.locator("#compared-runs li").count() == 2
    assert page.locator("#compared-runs a.remove-run").count() == 0  # two is the least


@pytest.mark.django_db
def test_the_picker_adds_only_the_users_runs_and_says_why_not(
    client, project, other_project, alice
):
    first = _run_with_loss(project, "a", {}, attempts=1)
    second = _run_with_loss(project, "b", {}, attempts=1)
    mine = _run_with_loss(project, "c", {}, attempts=1)
    telemetry_services.run_upsert(project=other_project, name="secret")
    client.force_login(alice)
    base = {"runs": f"{first.pk},{second.pk}"}

    # the picker offers her other runs, never another project's
    html = client.get("/compare/", base).content.decode()
    assert f'value="{project.slug}/c"' in html and "secret" not in html
    # adding one of hers redirects to the comparison with it
    added = client.get("/compare/", {**base, "add": f"{project.slug}/c"})
    assert added.status_code == 302 and f"{first.pk}%2C{second.pk}%2C{mine.pk}" in added.url
    # another project's run, or a name that is no run, is refused in words on the page
    for label in (f"{other_project.slug}/secret", "nothing/here"):
        refused = client.get("/compare/", {**base, "add": label})
        assert refused.status_code == 200
        assert "None of your runs is named" in refused.content.decode()


def test_a_run_keeps_one_hue_and_its_attempts_shade_within_it() -> None:
    from dashboard.charts import run_attempt_lines

    lines = run_attempt_lines("#1f77b4", [1, 2, 3])
    assert lines[3] == {"color": "#1f77b4", "dash": "solid"}  # the latest: the run's hue
    assert lines[2] == {"color": "#5799c7", "dash": "dash"}
    assert lines[1] == {"color": "#8fbbda", "dash": "dot"}  # the earliest: lightest
    assert run_attempt_lines("#ff7f0e", [4]) == {4: {"color": "#ff7f0e", "dash": "solid"}}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_compare_colours_lines_by_run(browser, live_server, login_page, project, alice):
    # given two runs of two attempts each
    first = _run_with_loss(project, "run-a", {"lr": "3e-4"}, attempts=2)
    second = _run_with_loss(project, "run-b", {"lr": "1e-4"}, attempts=2)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice compares them
    page.goto(f"{live_server.url}/compare/?runs={first.pk},{second.pk}")
    page.wait_for_function("() => document.querySelector('#chart-0')._fullData")
    lines = dict(
        page.evaluate(
            "Array.from(document.querySelector('#chart-0')._fullData)"
            ".map(t => [t.name, [t.line.color, t.line.dash]])"
        )
    )

    # then each run is one hue, its latest attempt solid and the earlier one a lighter dash
    assert lines["run-a · attempt 2"] == ["#1f77b4", "solid"]
    assert lines["run-a · attempt 1"] == ["#8fbbda", "dash"]
    assert lines["run-b · attempt 2"] == ["#ff7f0e", "solid"]
    assert lines["run-b · attempt 1"] == ["#ffbf86", "dash"]
    # and the list of runs is the legend: each run's swatch in its hue
    swatches = page.eval_on_selector_all(
        "#compared-runs li",
        "items => items.map(li => [li.querySelector('a').textContent,"
        " li.querySelector('.swatch').dataset.colour])",
    )
    assert swatches == [["run-a", "#1f77b4"], ["run-b", "#ff7f0e"]]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_bare_compare_is_a_page_to_choose_runs(browser, live_server, login_page, project, alice):
    # given two runs
    first = _run_with_loss(project, "pick-a", {}, attempts=1)
    second = _run_with_loss(project, "pick-b", {}, attempts=1)
    page = browser.new_page()
    login_page(page, live_server.url, "alice")

    # when alice opens /compare/ with no runs chosen
    response = page.goto(f"{live_server.url}/compare/")

    # then she gets the site's page (navigation included) listing her runs to tick
    assert response.status == 200
    assert page.locator("header.topbar nav a", has_text="Runs").count() == 1
    assert page.locator("#compare-error").count() == 0
    page.check(f"#compare-pick input[value='{first.pk}']")
    page.check(f"#compare-pick input[value='{second.pk}']")
    with page.expect_navigation():
        page.click("#compare-pick button[type=submit]")
    assert page.locator("h1").inner_text() == "Compare 2 runs"
