"""The SDC ledger and fleet pages and their JSON: the numbers they return (weekly rate,
repeat offenders), who may read and write, a fixed number of queries whatever the data, and
one pass through all three pages in a real browser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from logbook.models import SdcReplay
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Cluster, Host, Run, Site

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
DAY = timedelta(days=1)


def build_run(project: Any, name: str = "sdc-run", *, hosts: int = 4) -> Run:
    """Attempt 1 from T0 on `hosts` hosts of cluster iad/east, last seen at T0 + 14 days;
    three SDC records (days 1, 3 and 10; the second confirmed) and an interruption on h000
    at days 2, 5 and 9 (a repeat offender at K = 3)."""
    site, _ = Site.objects.get_or_create(name="iad")
    cluster, _ = Cluster.objects.get_or_create(site=site, name="east")
    names = [f"{name}-h{i:03d}" for i in range(hosts)]
    run = telemetry_services.run_upsert(project=project, name=name)
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=names)
    Host.objects.filter(name__in=names).update(cluster=cluster)
    Run.objects.filter(pk=run.pk).update(last_seen_at=T0 + 14 * DAY)
    for index, day in enumerate((1, 3, 10)):
        record = sdc_services.sdc_record(
            run=run,
            source_key=f"sdc-{index}",
            step=100 * day,
            detected_at=T0 + day * DAY,
            host=names[index % hosts],
            device=f"GPU-{name}-{index}",
            detection="loss_spike",
            observed_value=9.5,
        )
        if index == 1:
            SdcReplay.objects.filter(pk=record.pk).update(verdict="confirmed", action="rma")
    for day in (2, 5, 9):
        interruption_services.interruption_record(
            run=run,
            source_key=f"int-{day}",
            occurred_at=T0 + day * DAY,
            category="faulty-gpu",
            hosts=[names[0]],
        )
    return run


# --- GET /api/v1/sdc ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_sdc_api_returns_records_and_the_weekly_rate(client, alice, project):
    # given 3 records over a 14-day span (first attempt start to last seen)
    run = build_run(project)
    client.force_login(alice)

    # when
    body = client.get("/api/v1/sdc").json()

    # then 3 / (14 / 7) = 1.5 a week, with its inputs
    rate = body["weekly_rate"]
    assert body["total"] == 3
    assert rate["records"] == 3
    assert rate["span_days"] == 14.0
    assert rate["per_week"] == pytest.approx(1.5)
    assert rate["formula"] == "rate = records / max(span days / 7, 1)"
    assert rate["span_start"].startswith("2026-11-02T00:00")
    assert rate["span_end"].startswith("2026-11-16T00:00")
    # the two weeks of the span: Nov 2 (days 1 and 3) and Nov 9 (day 10)
    assert [w["count"] for w in body["weekly"]] == [2, 1]
    assert body["by_verdict"]["confirmed"] == 1 and body["by_verdict"]["pending"] == 2
    newest = body["records"][0]
    assert newest["run"] == {"id": run.pk, "name": "sdc-run", "project": "pretrain"}
    assert (newest["step"], newest["detection"], newest["verdict"]) == (
        1000,
        "loss_spike",
        "pending",
    )
    assert newest["device"] == "GPU-sdc-run-2" and newest["host"] == "sdc-run-h002"


@pytest.mark.django_db
def test_sdc_api_filters(client, alice, project):
    run = build_run(project)
    other = build_run(project, "other-run")
    client.force_login(alice)

    # a window from Nov 4 through Nov 12: the records of days 3 and 10, over 9 days
    body = client.get(
        "/api/v1/sdc", {"run": run.pk, "since": "2026-11-04", "until": "2026-11-12"}
    ).json()
    assert [r["step"] for r in body["records"]] == [1000, 300]
    assert body["weekly_rate"]["span_days"] == 9.0
    assert body["weekly_rate"]["per_week"] == pytest.approx(2 / (9 / 7))

    assert client.get("/api/v1/sdc").json()["total"] == 6
    assert client.get("/api/v1/sdc", {"run": other.pk}).json()["total"] == 3
    assert client.get("/api/v1/sdc", {"verdict": "confirmed"}).json()["total"] == 2
    assert client.get("/api/v1/sdc", {"cluster": "iad/east"}).json()["total"] == 6
    assert client.get("/api/v1/sdc", {"cluster": "iad/west"}).json()["total"] == 0
    assert client.get("/api/v1/sdc", {"site": "iad"}).json()["total"] == 6

    for bad in ({"since": "yesterday"}, {"verdict": "guilty"}, {"run": "x"}, {"cluster": "east"}):
        response = client.get("/api/v1/sdc", bad)
        assert response.status_code == 400, bad
        assert set(response.json()) == set(bad)

    # values PostgreSQL text cannot hold: refused as the parameter's error, on the APIs and
    # on the pages (which show the message above an unfiltered view)
    for bad in ({"site": "iad\x00"}, {"cluster": "iad/east\x00"}):
        for url in ("/api/v1/sdc", "/api/v1/fleet/hosts", "/api/v1/failures"):
            response = client.get(url, bad)
            assert response.status_code == 400, (url, bad)
            assert set(response.json()) == set(bad)
        for url in ("/sdc/", "/fleet/", "/failures/"):
            assert client.get(url, bad).status_code == 200, (url, bad)


@pytest.mark.django_db
def test_sdc_api_divergence_record_carries_its_inputs(client, alice, project):
    # given a divergence opened by the service: 2.5 replayed as 2.75, tolerance 0.1
    run = telemetry_services.run_upsert(project=project, name="det")
    Run.objects.filter(pk=run.pk).update(sdc_tolerance=0.1)
    run.refresh_from_db()
    for number, value in ((1, 2.5), (2, 2.75)):
        attempt = telemetry_services.attempt_ensure(run=run, number=number, hosts=[f"d{number}"])
        telemetry_services.metric_points_insert(
            run=run, attempt=attempt, points=[("loss", 7, value, T0 + number * DAY)]
        )
    sdc_services.sdc_divergence_check(run=run, attempt=attempt)
    client.force_login(alice)

    # when
    record = client.get("/api/v1/sdc").json()["records"][0]

    # then
    assert record["detection"] == "attempt_divergence"
    assert (record["attempt"], record["compared_attempt"]) == (2, 1)
    assert (record["observed_value"], record["expected_value"]) == (2.75, 2.5)
    assert record["difference"] == 0.25 and record["tolerance"] == 0.1
    assert record["hosts"] == ["d1", "d2"]
    page = client.get("/sdc/").content.decode()
    assert "|observed \u2212 expected| = 0.25 &gt; tolerance 0.1" in page


@pytest.mark.django_db
def test_sdc_outsiders_see_nothing_and_anonymous_is_refused(client, charlie, project):
    run = build_run(project)
    assert client.get("/api/v1/sdc").status_code == 403
    client.force_login(charlie)
    assert client.get("/api/v1/sdc").json()["total"] == 0
    assert client.get("/api/v1/sdc", {"run": run.pk}).status_code == 404
    assert client.get("/sdc/", {"run": run.pk}).status_code == 404
    assert "sdc-run" not in client.get("/sdc/").content.decode()


# --- GET /api/v1/fleet/hosts --------------------------------------------------------------------


@pytest.mark.django_db
def test_fleet_api_lists_hosts_and_repeat_offenders(client, bob, project):
    # given h000 with 3 interruptions and an SDC record; the other hosts one record or none
    build_run(project)
    client.force_login(bob)

    # when the offender window ends on Nov 30 (30 days back: all of November)
    body = client.get("/api/v1/fleet/hosts", {"until": "2026-11-29"}).json()

    # then
    hosts = {h["name"]: h for h in body["hosts"]}
    assert body["rule"]["k"] == 3 and body["rule"]["window_days"] == 30
    assert body["rule"]["window_end"].startswith("2026-11-30T00:00")
    assert body["rule"]["window_start"].startswith("2026-10-31T00:00")
    first = hosts["sdc-run-h000"]
    assert (first["interruptions"], first["sdc"], first["in_window"]) == (3, 1, 4)
    assert first["repeat_offender"] is True
    assert first["place"] == "iad/east"
    assert hosts["sdc-run-h001"]["repeat_offender"] is False
    assert "sdc-run-h003" not in hosts  # no incident
    assert {d["name"] for d in body["devices"]} == {f"GPU-sdc-run-{i}" for i in range(3)}

    # K and the window from the query
    five = client.get("/api/v1/fleet/hosts", {"until": "2026-11-29", "k": "5"}).json()
    assert not any(h["repeat_offender"] for h in five["hosts"])
    # a 7-day window through Nov 11 holds the incidents of days 5 and 9 only
    week = client.get("/api/v1/fleet/hosts", {"until": "2026-11-11", "window_days": "7", "k": "2"})
    first = {h["name"]: h for h in week.json()["hosts"]}["sdc-run-h000"]
    assert (first["in_window"], first["repeat_offender"]) == (2, True)

    assert client.get("/api/v1/fleet/hosts", {"k": "0"}).status_code == 400


@pytest.mark.django_db
def test_fleet_api_outsider_and_anonymous(client, charlie, project):
    build_run(project)
    assert client.get("/api/v1/fleet/hosts").status_code == 403
    client.force_login(charlie)
    body = client.get("/api/v1/fleet/hosts").json()
    assert body["hosts"] == [] and body["devices"] == []
    assert "sdc-run-h000" not in client.get("/fleet/").content.decode()


# --- POST/DELETE /api/v1/fleet/hosts/<name>/quarantine ------------------------------------------


def _csrf_client(user: Any) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/login/")  # sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


URL = "/api/v1/fleet/hosts/sdc-run-h000/quarantine"


@pytest.mark.django_db
def test_quarantine_api_for_oncall(alice, project):
    build_run(project)
    client, token = _csrf_client(alice)

    # without the CSRF token the session write is refused
    assert client.post(URL, {"reason": "x"}, content_type="application/json").status_code == 403

    response = client.post(
        URL, {"reason": "4 incidents in 9 days"}, content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )  # fmt: skip
    assert response.status_code == 200
    body = response.json()
    assert body["host"] == "sdc-run-h000"
    assert body["quarantine"]["reason"] == "4 incidents in 9 days"
    assert body["quarantine"]["by"] == "alice"
    assert Host.objects.get(name="sdc-run-h000").quarantined_at is not None

    missing = client.post(URL, {}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert missing.status_code == 400 and "reason" in missing.json()

    released = client.delete(URL, HTTP_X_CSRFTOKEN=token)
    assert released.status_code == 200 and released.json()["quarantine"] is None
    assert Host.objects.get(name="sdc-run-h000").quarantined_at is None


@pytest.mark.django_db
def test_quarantine_api_refuses_viewer_outsider_and_anonymous(bob, charlie, project):
    build_run(project)
    viewer, token = _csrf_client(bob)
    response = viewer.post(
        URL, {"reason": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 403
    assert viewer.delete(URL, HTTP_X_CSRFTOKEN=token).status_code == 403

    outsider, token = _csrf_client(charlie)
    response = outsider.post(
        URL, {"reason": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 404
    assert outsider.post(
        "/api/v1/fleet/hosts/nonexistent/quarantine", {"reason": "x"},
        content_type="application/json", HTTP_X_CSRFTOKEN=token,
    ).status_code == 404  # fmt: skip

    assert Client().post(URL, {"reason": "x"}, content_type="application/json").status_code == 403
    assert Host.objects.get(name="sdc-run-h000").quarantined_at is None


@pytest.mark.django_db
def test_host_runs_are_every_run_the_host_touched_and_only_those(alice, project):
    # given runs that touched host "h1" each one way (an attempt on it, an interruption
    # naming it or one of its GPUs, an SDC record on it), and one that ran elsewhere
    from logbook.selectors.fleet import host_runs

    at = datetime(2026, 11, 1, tzinfo=UTC)
    host = telemetry_services.hosts_ensure(project=project, names=["h1"])[0]
    gpu = telemetry_services.devices_ensure(project=project, uuids=["GPU-h1-0"])[0]
    gpu.host = host
    gpu.save(update_fields=["host"])
    runs = {name: telemetry_services.run_upsert(project=project, name=name)
            for name in ("attempt", "interruption", "gpu", "sdc", "elsewhere")}  # fmt: skip
    for name, run in runs.items():
        on = ["h1"] if name == "attempt" else ["h2"]
        telemetry_services.attempt_ensure(run=run, number=1, started_at=at, hosts=on)
    interruption_services.interruption_record(
        run=runs["interruption"], source_key="i", occurred_at=at, hosts=["h1"]
    )
    interruption_services.interruption_record(
        run=runs["gpu"], source_key="g", occurred_at=at, devices=["GPU-h1-0"]
    )
    sdc_services.sdc_record(run=runs["sdc"], source_key="s", step=1, detected_at=at, host="h1")
    # when
    found = {run.name for run in host_runs(user=alice, host=host)}
    # then
    assert found == {"attempt", "interruption", "gpu", "sdc"}


@pytest.mark.django_db
def test_fleet_levels_are_drawn_once_for_views_within_a_minute(client, alice, project, monkeypatch):
    # given a clock that moves a millisecond a reading, all within one minute, and a fleet
    # with incidents
    import itertools

    from django.utils import timezone

    from logbook.views import fleet as fleet_views

    start = datetime(2026, 11, 20, 12, 30, 17, tzinfo=UTC)
    ticks = itertools.count()
    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(milliseconds=next(ticks)))
    client.force_login(alice)
    build_run(project)
    drawn: list[int] = []
    real = fleet_views.site_health
    monkeypatch.setattr(
        fleet_views, "site_health", lambda **kwargs: drawn.append(1) or real(**kwargs)
    )
    # when the fleet page is viewed three times
    statuses = [client.get("/fleet/").status_code for _ in range(3)]
    # then the sites, groups and at-risk section was drawn once (its key is the minute's,
    # not the offender window's end to the microsecond)
    assert statuses == [200, 200, 200]
    assert len(drawn) == 1


# --- Query counts ---------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/sdc/",
        "/sdc/?site=iad&verdict=pending",
        "/fleet/",
        "/fleet/?cluster=iad/east&k=2",
        "/fleet/hosts/sdc-run-h000/",
        "/api/v1/sdc",
        "/api/v1/fleet/hosts",
    ],
)
def test_query_count_does_not_grow_with_the_data(client, alice, project, url, query_budget):
    # given one small run, then the same page over five runs with ten times the hosts
    client.force_login(alice)
    build_run(project)
    got: list[Any] = []
    small = query_budget.count(lambda: got.append(client.get(url)))
    for index in range(4):
        build_run(project, f"more-{index}", hosts=40)
    big = query_budget.count(lambda: got.append(client.get(url)))
    # then the page costs what it did (constant in the runs and hosts)
    assert [response.status_code for response in got] == [200, 200]
    query_budget.constant(small=small, big=big, guards="the runs and hosts")


# --- In a browser ---------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sdc_fleet_and_host_pages_in_a_browser(
    browser, live_server, alice, project, login_page, console_errors
):
    # given a run with SDC records and a repeat offender, and a divergence between attempts
    build_run(project, hosts=16)
    run = Run.objects.get(name="sdc-run")
    second = telemetry_services.attempt_ensure(run=run, number=2, hosts=["sdc-run-h015"])
    first = run.attempts.get(number=1)
    telemetry_services.metric_points_insert(
        run=run, attempt=first, points=[("loss", 500, 2.0, T0 + 6 * DAY)]
    )
    telemetry_services.metric_points_insert(
        run=run, attempt=second, points=[("loss", 500, 2.5, T0 + 7 * DAY)]
    )
    assert len(sdc_services.sdc_divergence_check(run=run, attempt=second)) == 1
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when on-call opens the SDC ledger
    page.goto(f"{live_server.url}/sdc/")
    page.wait_for_selector("#chart-weekly-sdc .main-svg")

    # then the weekly chart has its bars and mean line, and the table its four records
    assert page.evaluate("document.querySelector('#chart-weekly-sdc').data.length") == 2
    assert page.evaluate("document.querySelector('#chart-weekly-sdc').data[0].type") == "bar"
    assert page.locator("#sdc-records tbody tr").count() == 4
    assert page.locator("#sdc-total").inner_text() == "4"
    assert "Attempt-vs-attempt divergence" in page.locator("#sdc-records").inner_text()

    # when they open the fleet page, filtered to the cluster, and follow the worst host
    page.goto(f"{live_server.url}/fleet/?cluster=iad/east&until=2026-11-29")
    page.wait_for_selector("#chart-host-incidents .main-svg")
    # interruptions, SDC records and straggler records, stacked
    assert page.evaluate("document.querySelector('#chart-host-incidents').data.length") == 3
    worst = page.locator("#fleet-hosts tbody tr").first
    assert worst.get_attribute("data-host") == "sdc-run-h000"
    assert "yes" in worst.inner_text()
    worst.locator("a").click()

    # then the host page draws its timeline, and the quarantine form refuses an empty reason
    page.wait_for_selector("#chart-host-timeline .main-svg")
    traces = page.evaluate("document.querySelector('#chart-host-timeline').data.map(t => t.name)")
    assert traces == ["interruption", "sdc"]
    page.click("#quarantine-submit")
    page.wait_for_selector("#quarantine-error")
    assert "reason is required" in page.locator("#quarantine-error").inner_text()

    # when they quarantine with a reason
    page.fill("#quarantine-reason", "3 Xid 79 in a week")
    page.click("#quarantine-submit")
    page.wait_for_selector("#host-quarantine .quarantined")

    # then the host shows quarantined, and so does the fleet page
    assert "3 Xid 79 in a week" in page.locator("#host-quarantine").inner_text()
    assert Host.objects.get(name="sdc-run-h000").quarantine_reason == "3 Xid 79 in a week"
    page.goto(f"{live_server.url}/fleet/")
    page.wait_for_selector("#chart-host-incidents .main-svg")
    assert "quarantined" in page.locator('[data-host="sdc-run-h000"]').inner_text()
    assert errors == []


@pytest.mark.django_db
def test_a_host_without_incidents_draws_no_empty_timeline(project: Any, alice: Any) -> None:
    # given two hosts of one run, an incident on the first only
    run = telemetry_services.run_upsert(project=project, name="calm-and-not")
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=["hot1", "calm1"])
    interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=T0 + DAY, category="faulty-gpu", hosts=["hot1"]
    )
    client = Client()
    client.force_login(alice)

    # when both host pages are opened
    hot = client.get("/fleet/hosts/hot1/").content.decode()
    calm = client.get("/fleet/hosts/calm1/").content.decode()

    # then the first draws its incidents over time, the second no empty axes
    assert (
        'id="chart-host-timeline"' in hot and "chart-host-timeline" in hot.split("charts-data")[-1]
    )
    assert "chart-host-timeline" not in calm
    assert "No incidents in this window." in calm


@pytest.mark.django_db
def test_a_host_name_with_a_slash_is_routed_not_a_500(project: Any, alice: Any) -> None:
    # given a host whose name holds a slash (ingest accepted those before names were checked)
    run = telemetry_services.run_upsert(project=project, name="slashed")
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0, hosts=["rack7/h001"])
    interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=T0 + DAY, category="faulty-gpu", hosts=["rack7/h001"]
    )
    client = Client()
    client.force_login(alice)

    # when the fleet pages are opened, then they answer and link to the host's own page
    for url in ("/fleet/", "/sdc/", "/fleet/hosts/rack7/h001/"):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    assert 'href="/fleet/hosts/rack7/h001/' in client.get("/fleet/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["rack7/h001", "h 1", "..", "h\x00"])
def test_triage_refuses_a_host_name_pages_cannot_link_to(name: str) -> None:
    from logbook.services.triage import _clean_one

    with pytest.raises(ValueError, match="not a host or device name"):
        _clean_one("hosts", ["h002", name])
