"""The fleet page, its sites section and /api/v1/fleet/hosts keep what they draw from the
sliding offender window until an incident enters or leaves it (OffenderRule.holds_until),
not a minute: the next view after that moment shows the new counts, and views before it are
served from the cache."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from logbook.selectors import fleet as fleet_selectors
from logbook.selectors.offenders import OffenderRule, still_holds
from logbook.services import interruptions as interruption_services
from tests.logbook.test_fleet_pages import T0, build_run

DAY = timedelta(days=1)
E = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_a_sliding_window_holds_until_an_incident_enters_or_leaves():
    rule = OffenderRule(k=3, window_days=30, window_end=E, slides=True)
    inside, gone, ahead = E - 10 * DAY, E - 40 * DAY, E + 2 * DAY
    # an incident in the window leaves it window_days after it happened
    assert rule.holds_until([inside, gone]) == inside + 30 * DAY
    # one ahead of the end enters first
    assert rule.holds_until([inside, gone, ahead]) == ahead
    # nothing to enter or leave, or a window whose end a filter fixed: it never changes
    assert rule.holds_until([gone]) is None
    fixed = OffenderRule(k=3, window_days=30, window_end=E)
    assert fixed.holds_until([inside, ahead]) is None
    # until that moment the counts hold (the incident is still in at an end equal to it)
    assert still_holds(ahead, at=ahead) and not still_holds(ahead, at=ahead + timedelta(0, 1))
    assert still_holds(None, at=E + 1000 * DAY)


def _sites(html: str) -> dict[str, int]:
    """Site -> incidents, from the sites table."""
    rows = re.findall(r'<tr data-site="([^"]*)">.*?</td>\s*<td class="num">(\d+)</td>\s*'
                      r'<td class="num">(\d+)</td>', html, re.S)  # fmt: skip
    return {site: int(incidents) for site, _hosts, incidents in rows}


@pytest.mark.django_db
def test_fleet_counts_change_on_the_first_view_after_an_incident_leaves_the_window(
    client: Any, alice: Any, project: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given h000's SDC record at day 1 and interruptions at days 2, 5 and 9 (a repeat
    # offender at K = 3 in 30 days), and a clock at day 12 that the test moves
    build_run(project)
    client.force_login(alice)
    clock = [T0 + 12 * DAY]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    drawn: list[int] = []
    real = fleet_selectors.fleet_health
    monkeypatch.setattr(fleet_selectors, "fleet_health", lambda **kw: drawn.append(1) or real(**kw))

    # when the page is viewed now and an hour later
    first = client.get("/fleet/").content.decode()
    clock[0] += timedelta(hours=1)
    later = client.get("/fleet/").content.decode()
    # then it was drawn once, and the window's end written on each view is the view's own
    assert len(drawn) == 1
    assert re.search(r'id="offender-count">1<', first) and re.search(
        r'id="offender-count">1<', later
    )
    assert "2026-11-14 01:00" in later and "2026-11-14 01:00" not in first
    assert _sites(later)["iad"] == 3
    api = client.get("/api/v1/fleet/hosts").json()
    h000 = next(one for one in api["hosts"] if one["name"] == "sdc-run-h000")
    assert (h000["in_window"], h000["repeat_offender"]) == (4, True)

    # when the clock passes day 32, where the day-1 record and the day-2 interruption have
    # left the 30-day window
    clock[0] = T0 + 32 * DAY + timedelta(seconds=1)
    page = client.get("/fleet/").content.decode()
    api = client.get("/api/v1/fleet/hosts").json()
    # then the very next views count two on h000: no repeat offender, two incidents at the
    # site, and the API's rule ends now
    assert re.search(r'id="offender-count">0<', page)
    assert _sites(page)["iad"] == 2
    h000 = next(one for one in api["hosts"] if one["name"] == "sdc-run-h000")
    assert (h000["in_window"], h000["repeat_offender"]) == (2, False)
    assert api["rule"]["window_end"].startswith("2026-12-04T00:00:01")


def _facts(html: str) -> tuple[int, str]:
    """(interruptions, repeat offender) from the host page's facts."""
    count = re.search(r"<dt>Interruptions</dt><dd>(\d+)</dd>", html)
    offender = re.search(r'id="host-offender">(.*?)</dd>', html)
    assert count and offender
    return int(count[1]), re.sub(r"<[^>]+>", "", offender[1])


@pytest.mark.django_db
def test_host_page_is_drawn_again_once_its_incidents_or_its_window_change(
    client: Any, alice: Any, project: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given h000 with interruptions at days 2, 5 and 9, viewed at day 12 and an hour later
    run = build_run(project)
    client.force_login(alice)
    clock = [T0 + 12 * DAY]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    drawn: list[int] = []
    real = fleet_selectors.fleet_health
    monkeypatch.setattr(fleet_selectors, "fleet_health", lambda **kw: drawn.append(1) or real(**kw))
    url = "/fleet/hosts/sdc-run-h000/"
    assert _facts(client.get(url).content.decode()) == (3, "yes")
    clock[0] += timedelta(hours=1)
    assert _facts(client.get(url).content.decode()) == (3, "yes")
    assert len(drawn) == 1  # the second view from the cache

    # when it has a new interruption (day 11), then the next view lists it
    interruption_services.interruption_record(
        run=run, source_key="int-11", occurred_at=T0 + 11 * DAY, category="nic",
        hosts=["sdc-run-h000"],
    )  # fmt: skip
    html = client.get(url).content.decode()
    assert _facts(html) == (4, "yes") and "chart-host-timeline" in html
    assert len(drawn) == 2

    # when the clock passes day 35, where days 1 to 5 have left the 30-day window (two
    # interruptions in it), then the next view no longer calls it a repeat offender
    clock[0] = T0 + 35 * DAY + timedelta(seconds=1)
    assert _facts(client.get(url).content.decode()) == (4, "no")
    assert len(drawn) == 3
