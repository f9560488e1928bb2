"""The run list: search, filters, sorting, pages (page and API) and a column chooser, so
2,000 runs are not one 583 KB page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import F

from ingest import services as ingest_services
from ingest.models import IngestBatch
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

T0 = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def many_runs(project):
    """120 runs: run-000 ... run-119, run-k last seen k hours after T0, step 10·k; every
    tenth one's attempt failed, the others' run."""
    for k in range(120):
        run = telemetry_services.run_upsert(project=project, name=f"run-{k:03d}")
        Attempt.objects.create(run=run, number=1, status="failed" if k % 10 == 0 else "running")
    Run.objects.filter(project=project).update(last_step=F("id"))
    for run in Run.objects.filter(project=project):
        k = int(run.name[4:])
        Run.objects.filter(pk=run.pk).update(last_seen_at=T0 + timedelta(hours=k), last_step=10 * k)
    return project


def names(html: str) -> list[str]:
    import re

    return re.findall(r'<a href="/runs/\d+/">(run-\d+)</a>', html)


@pytest.mark.django_db
def test_the_run_list_is_paged_newest_first(client, alice, many_runs, query_budget):
    client.force_login(alice)
    got: list[str] = []
    small = query_budget.count(lambda: got.append(client.get("/").content.decode()))
    html = got[0]
    assert names(html)[:2] == ["run-119", "run-118"] and len(names(html)) == 50
    assert "Rows 1\u201350 of 120" in html
    assert names(client.get("/", {"page": 3}).content.decode())[-1] == "run-000"

    # and a page costs the same queries (constant in the runs) with 80 runs more
    for k in range(120, 200):
        telemetry_services.run_upsert(project=many_runs, name=f"run-{k:03d}")
    big = query_budget.count(lambda: got.append(client.get("/").content.decode()))
    assert "of 200" in got[1]
    query_budget.constant(small=small, big=big, guards="the runs")


@pytest.mark.django_db
def test_search_filter_and_sort(client, alice, many_runs):
    client.force_login(alice)
    assert names(client.get("/", {"q": "run-11"}).content.decode()) == [
        f"run-{k}" for k in range(119, 109, -1)
    ]
    failed = names(client.get("/", {"status": "failed", "sort": "step"}).content.decode())
    assert failed == [f"run-{k:03d}" for k in range(0, 120, 10)]
    window = {"since": "2026-11-02", "until": "2026-11-02", "sort": "name"}
    assert names(client.get("/", window).content.decode()) == [
        f"run-{k:03d}" for k in range(24, 48)
    ]
    html = client.get("/", {"sort": "bogus"}).content.decode()
    assert "Sort by one of project, name" in html


@pytest.mark.django_db
def test_the_column_chooser_keeps_only_the_chosen_columns(client, alice, many_runs):
    client.force_login(alice)
    html = client.get("/", {"cols": ["step"]}).content.decode()
    assert 'data-col="step"' in html and 'data-col="loss"' not in html
    assert 'data-col="name"' in html  # the run's name is always there
    assert ">1,190<" in html


@pytest.mark.django_db
def test_the_api_pages_and_filters_like_the_page(client, alice, many_runs):
    client.force_login(alice)
    body = client.get("/api/v1/runs", {"page_size": 10, "status": "failed"}).json()
    assert body["count"] == 12 and len(body["results"]) == 10 and body["next"]
    assert body["results"][0]["name"] == "run-110"
    assert len(client.get("/api/v1/runs").json()) == 120  # unpaged as before
    response = client.get("/api/v1/runs", {"status": "sleeping"})
    assert response.status_code == 400 and "Status must be one of" in response.json()["detail"]


@pytest.mark.django_db
def test_a_running_run_gone_quiet_or_stuck_reads_so_on_the_list_as_on_its_page(
    client, alice, project
):
    # given three running runs: one whose last data is 19 days old, one seen a minute ago, and
    # one seen a minute ago but at the step it first reached three hours ago (hung)
    now = datetime.now(UTC)
    started = now - timedelta(days=20)
    runs = {
        "quiet": (timedelta(days=19), timedelta(days=19)),
        "busy": (timedelta(minutes=1), timedelta(minutes=1)),
        "stuck": (timedelta(minutes=1), timedelta(hours=3)),
    }
    for name, (seen, stepped) in runs.items():
        run = telemetry_services.run_upsert(project=project, name=name)
        telemetry_services.attempt_ensure(run=run, number=1, started_at=started)
        Run.objects.filter(pk=run.pk).update(
            last_step=100, last_seen_at=now - seen, last_step_at=now - stepped
        )
    client.force_login(alice)

    # when the run list and the quiet and stuck runs' pages are read
    rows = {
        name: row
        for row in client.get("/").content.decode().split("<tr>")
        for name in runs
        if f">{name}</a>" in row
    }
    pages = {
        name: client.get(f"/runs/{Run.objects.get(name=name).pk}/").content.decode()
        for name in ("quiet", "stuck")
    }

    # then both say the quiet run is silent and the stuck one makes no progress since the
    # step's time, and the busy one still reads Running, in the run page's words (its status
    # label, not the stored value)
    assert "silent since" in rows["quiet"] and "unning" not in rows["quiet"]
    assert "silent since" in pages["quiet"]
    stuck_since = (now - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M")
    assert "no progress since" in rows["stuck"] and stuck_since in rows["stuck"]
    assert "no progress since" in pages["stuck"] and stuck_since in pages["stuck"]
    assert ">Running<" in rows["busy"] and "silent" not in rows["busy"]
    assert "progress" not in rows["busy"]
    assert '<option value="running">Running</option>' in client.get("/").content.decode()


@pytest.mark.django_db
def test_tags_sent_by_the_job_filter_the_run_list_and_the_api(client, alice, project, post_batch):
    # given two runs tagged by their jobs (run_info.tags), one untagged
    for name, tags in (("sweep-a", ["ablation", "lr-sweep", "ablation"]), ("main", ["prod"])):
        body = {"batch_id": f"t-{name}", "run": name, "run_info": {"tags": tags}}
        assert post_batch(body).status_code == 202
        # what the Celery worker does with it (tests/ingest prove the worker path itself)
        batch = IngestBatch.objects.get(batch_id=f"t-{name}")
        assert ingest_services.batch_process(batch_pk=batch.pk) == "done"
    telemetry_services.run_upsert(project=project, name="untagged")
    client.force_login(alice)

    # when the run list is filtered by a tag
    html = client.get("/", {"tag": "lr-sweep"}).content.decode()
    api = client.get("/api/v1/runs", {"tag": "lr-sweep"}).json()

    # then only the run carrying it is listed, with its tags once each, as links
    assert ">sweep-a</a>" in html and ">main</a>" not in html and ">untagged</a>" not in html
    assert [(r["name"], r["tags"]) for r in api] == [("sweep-a", ["ablation", "lr-sweep"])]
    assert 'href="?tag=ablation"' in html
    # and the tag picker offers every tag in use
    assert all(f'<option value="{t}">' in html for t in ("ablation", "lr-sweep", "prod"))


@pytest.mark.django_db
def test_too_many_or_too_long_tags_are_a_400_naming_the_field(post_batch):
    for tags in (["x"] * 33, ["y" * 65]):
        body = {"batch_id": f"bad-{len(tags)}", "run": "r", "run_info": {"tags": tags}}
        response = post_batch(body)
        assert response.status_code == 400
        assert "run_info.tags" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("param", ["q", "tag"])
def test_a_nul_in_the_search_or_tag_is_refused_not_a_500(client, alice, param):
    # Found by `make chaos`'s full parameter sweep: /api/v1/runs?q=%00 answered 500.
    client.force_login(alice)
    api = client.get("/api/v1/runs", {param: "a\x00b"})
    page = client.get("/", {param: "a\x00b"})
    assert api.status_code == 400 and "NUL" in api.content.decode()
    assert page.status_code == 200 and "NUL" in page.content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_on_a_phone_the_run_list_and_the_navigation_are_whole(
    browser, live_server, login_page, project, alice
):
    # given a run with an attempt, and a 390 px wide phone
    run = telemetry_services.run_upsert(project=project, name="phone-run")
    Attempt.objects.create(run=run, number=1, started_at=datetime(2026, 11, 20, tzinfo=UTC))
    page = browser.new_page(viewport={"width": 390, "height": 844})
    login_page(page, live_server.url, "alice")

    # when the run list opens
    page.goto(f"{live_server.url}/")

    # then every navigation link is on screen, whole (it was cut at "Project s")
    for link in page.locator("header.topbar nav a").all():
        box = link.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, link.inner_text()
    # and the run's status, step and last-seen cells are on screen, each named
    for label in ("Status", "Latest step", "Last seen (UTC)"):
        cell = page.locator(f"#run-list td[data-label='{label}']").first
        box = cell.bounding_box()
        assert box and box["x"] + box["width"] <= 390, label
        assert (
            page.evaluate("el => getComputedStyle(el, '::before').content", cell.element_handle())
            == f'"{label}"'
        )
