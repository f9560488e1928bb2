"""Fleet health: incidents per host and device, repeat offenders at the edges of K and of the
window, the site/cluster and run filters, quarantine services and who may use them, and
quarantined hardware showing where it is used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError

from logbook.models import AuditEvent, SdcReplay
from logbook.selectors import fleet as fleet_selectors
from logbook.selectors import offenders
from logbook.selectors import sdc as sdc_selectors
from logbook.selectors.filters import FilterError
from logbook.selectors.sdc import HardwareFilters
from logbook.services import interruptions as interruption_services
from logbook.services import quarantine as quarantine_services
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Cluster, Device, Host, Run, Site

T = datetime(2026, 12, 1, tzinfo=UTC)  # the end of the offender window in these tests
DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


def _run(project: Any, name: str = "fleet-run", hosts: tuple[str, ...] = ()) -> Run:
    run = telemetry_services.run_upsert(project=project, name=name)
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T - 60 * DAY, hosts=hosts)
    return run


def _interruption(run: Run, key: str, at: datetime, *, hosts=(), devices=()) -> Any:
    return interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, category="faulty-gpu", hosts=hosts, devices=devices
    )


def _device_on(project: Any, uuid: str, host: str) -> Device:
    device = telemetry_services.devices_ensure(project=project, uuids=[uuid])[0]
    device.host = telemetry_services.hosts_ensure(project=project, names=[host])[0]
    device.save(update_fields=["host"])
    return device


def _health(
    user: Any, *, k: int = 3, days: int = 30, **filters: Any
) -> fleet_selectors.FleetHealth:
    hardware_filters = HardwareFilters(until=T, **filters)
    rule = offenders.OffenderRule(k=k, window_days=days, window_end=T)
    return fleet_selectors.fleet_health(user=user, filters=hardware_filters, rule=rule)


def _by_name(health: fleet_selectors.FleetHealth) -> dict[str, fleet_selectors.HardwareHealth]:
    return {one.name: one for one in health.hosts}


# --- Repeat offenders ------------------------------------------------------------------------


@pytest.fixture
def edges(project: Any) -> Run:
    """Three hosts with three incidents each, placed around the window [T - 30 d, T)."""
    run = _run(project)
    moments = {
        "h-in": [T - 30 * DAY, T - 10 * DAY, T - SECOND],  # first one exactly at the start
        "h-early": [T - 30 * DAY - SECOND, T - 10 * DAY, T - SECOND],  # one just before it
        "h-late": [T - 20 * DAY, T - 10 * DAY, T],  # one exactly at the (exclusive) end
    }
    for host, times in moments.items():
        for index, moment in enumerate(times):
            _interruption(run, f"{host}-{index}", moment, hosts=[host])
    return run


@pytest.mark.django_db
def test_repeat_offender_window_includes_its_start_and_excludes_its_end(edges, alice):
    hosts = _by_name(_health(alice))

    assert (hosts["h-in"].in_window, hosts["h-in"].repeat_offender) == (3, True)
    assert (hosts["h-early"].in_window, hosts["h-early"].repeat_offender) == (2, False)
    assert (hosts["h-late"].in_window, hosts["h-late"].repeat_offender) == (2, False)


@pytest.mark.django_db
def test_repeat_offender_k_on_both_sides(edges, alice):
    # K = 2: two incidents in the window are enough
    at_two = _by_name(_health(alice, k=2))
    assert {name for name, h in at_two.items() if h.repeat_offender} == {
        "h-in",
        "h-early",
        "h-late",
    }
    # K = 4: three are not
    at_four = _by_name(_health(alice, k=4))
    assert not any(h.repeat_offender for h in at_four.values())


@pytest.mark.django_db
def test_a_longer_window_takes_in_the_early_incident(edges, alice):
    hosts = _by_name(_health(alice, days=31))
    assert (hosts["h-early"].in_window, hosts["h-early"].repeat_offender) == (3, True)


def test_offender_rule_from_query_parameters():
    filters = HardwareFilters(until=T)
    default = offenders.offender_rule_parse(params={}, filters=filters)
    assert (default.k, default.window_days) == (3, 30)
    assert default.window_start == T - 30 * DAY

    custom = offenders.offender_rule_parse(params={"k": "5", "window_days": "7"}, filters=filters)
    assert (custom.k, custom.window_days, custom.window_end) == (5, 7, T)

    for bad in ({"k": "0"}, {"k": "two"}, {"window_days": "-3"}, {"window_days": "99999"}):
        with pytest.raises(FilterError):
            offenders.offender_rule_parse(params=bad, filters=filters)


def test_offender_window_ends_now_without_an_until():
    now = datetime(2027, 1, 15, tzinfo=UTC)
    rule = offenders.offender_rule_parse(params={}, filters=HardwareFilters(), now=now)
    assert rule.window_end == now
    assert rule.is_offender([now - DAY] * 3)
    assert not rule.is_offender([now - 31 * DAY] * 3)


# --- How incidents reach hardware --------------------------------------------------------------


@pytest.mark.django_db
def test_incidents_reach_a_host_through_its_devices_not_through_attempt_pairs(project, alice):
    # given an interruption naming a GPU of h5 (and h5 itself, to be counted once), an SDC
    # record naming h6, and a divergence record whose attempts ran on h7 (naming no host)
    run = _run(project, hosts=("h7",))
    _device_on(project, "GPU-5", "h5")
    _interruption(run, "xid", T - DAY, hosts=["h5"], devices=["GPU-5"])
    _interruption(run, "xid-2", T - 2 * DAY, devices=["GPU-5"])
    sdc_services.sdc_record(
        run=run, source_key="spike", step=10, detected_at=T - 3 * DAY, host="h6"
    )
    pair = SdcReplay.objects.create(
        run=run, step=11, detected_at=T - 4 * DAY, detection="attempt_divergence"
    )
    pair.hosts.add(Host.objects.get(name="h7"))

    # when
    health = _health(alice)
    hosts = _by_name(health)

    # then
    assert [(i.kind, i.via) for i in hosts["h5"].incidents] == [
        ("interruption", "named"),
        ("interruption", "device"),
    ]
    assert [(i.kind, i.via) for i in hosts["h6"].incidents] == [("sdc", "named")]
    # a suspicion naming no hardware blames none: unattributed, not charged to h7
    assert "h7" not in hosts
    assert [(i.kind, i.pk) for i in health.unattributed] == [("sdc", pair.pk)]
    devices = {one.name: one for one in health.devices}
    assert devices["GPU-5"].interruptions == 2
    assert devices["GPU-5"].host.name == "h5"


def _divergence(run: Run, step: int, pair: tuple[int, int], metric: str = "loss") -> SdcReplay:
    attempts = [telemetry_services.attempt_ensure(run=run, number=n) for n in pair]
    return SdcReplay.objects.create(
        run=run,
        step=step,
        detected_at=T - DAY + step * SECOND,
        detection="attempt_divergence",
        metric_name=metric,
        attempt=attempts[1],
        compared_attempt=attempts[0],
        source_key=f"{metric}:{step}:{pair}",
    )


@pytest.mark.django_db
def test_consecutive_divergences_of_one_attempt_pair_are_one_suspicion(project, alice):
    # given a divergence of attempts 1 and 2 over steps 3150-3155, one at 3160, another
    # metric at 3151, and attempts 2 and 3 at 3152
    run = _run(project)
    for step in range(3150, 3156):
        _divergence(run, step, (1, 2))
    _divergence(run, 3160, (1, 2))
    _divergence(run, 3151, (1, 2), metric="grad_norm")
    _divergence(run, 3152, (2, 3))

    # when
    shown = [(one.step, one.last_step) for one in _health(alice).unattributed]

    # then one record per run of consecutive steps of one pair and metric
    assert sorted(shown, key=repr) == sorted(
        [(3150, 3155), (3160, None), (3151, None), (3152, None)], key=repr
    )


@pytest.mark.django_db
def test_hosts_an_incident_singles_out_rank_before_hosts_it_names_among_many(project, alice):
    # given a leaf switch failure naming eight hosts twice, a watchdog naming one host, and
    # an XID naming one host and its GPU
    run = _run(project)
    leaf = [f"leaf-{i}" for i in range(8)]
    _interruption(run, "switch-1", T - 3 * DAY, hosts=leaf)
    _interruption(run, "switch-2", T - 2 * DAY, hosts=leaf)
    _interruption(run, "watchdog", T - DAY, hosts=["rank-host"])
    _device_on(project, "GPU-x", "xid-host")
    _interruption(run, "xid", T - DAY, hosts=["xid-host"], devices=["GPU-x"])

    # when
    hosts = _health(alice).hosts

    # then the XID host first (named with its GPU), then the watchdog's, then the switch's
    assert [one.name for one in hosts[:2]] == ["xid-host", "rank-host"]
    assert {one.name for one in hosts[2:]} == set(leaf)
    assert hosts[2].blame == 0.25 and hosts[0].blame == 1.0
    assert not any(one.repeat_offender for one in hosts)


@pytest.mark.django_db
def test_offender_score_takes_any_incident_like_records():
    # given records of another kind (a straggler ledger's, say) with the same attributes
    class Straggle:
        def __init__(self, at: datetime) -> None:
            self.occurred_at, self.weight, self.names_device = at, 0.5, False

    rule = offenders.OffenderRule(k=2, window_days=30, window_end=T)

    # when
    score = offenders.offender_score(
        records=[Straggle(T - DAY), Straggle(T - 2 * DAY), Straggle(T - 40 * DAY)], rule=rule
    )

    # then
    assert (score.in_window, score.blame, score.repeat_offender) == (2, 1.0, True)


@pytest.mark.django_db
def test_fleet_shows_only_the_users_runs(project, other_project, alice, charlie):
    # given one incident in alice's project and one in charlie's, on different hosts
    _interruption(_run(project), "mine", T - DAY, hosts=["shared-a"])
    _interruption(_run(other_project, "theirs"), "theirs", T - DAY, hosts=["private-b"])

    # then each sees their own host only
    assert set(_by_name(_health(alice))) == {"shared-a"}
    assert set(_by_name(_health(charlie))) == {"private-b"}


@pytest.mark.django_db
def test_run_time_and_place_filters(project, alice):
    # given two runs; hosts in two clusters of one site
    first, second = _run(project, "first"), _run(project, "second")
    site = Site.objects.create(name="iad")
    east = Cluster.objects.create(site=site, name="east")
    west = Cluster.objects.create(site=site, name="west")
    Host.objects.bulk_create(
        [
            Host(project=project, name="e1", cluster=east),
            Host(project=project, name="w1", cluster=west),
        ]
    )
    _interruption(first, "a", T - 2 * DAY, hosts=["e1"])
    _interruption(second, "b", T - DAY, hosts=["w1"])
    _interruption(second, "c", T - 40 * DAY, hosts=["e1"])

    assert set(_by_name(_health(alice, run=first))) == {"e1"}
    assert set(_by_name(_health(alice, cluster="iad/west"))) == {"w1"}
    assert set(_by_name(_health(alice, site="iad"))) == {"e1", "w1"}
    assert set(_by_name(_health(alice, site="elsewhere"))) == set()
    # a history window that starts after e1's last incident leaves w1 only
    assert set(_by_name(_health(alice, since=T - 36 * 3600 * SECOND))) == {"w1"}
    assert len(_by_name(_health(alice))["e1"].incidents) == 2


# --- Quarantine services -----------------------------------------------------------------------


@pytest.mark.django_db
def test_quarantine_requires_a_reason(alice):
    host = Host.objects.create(name="h1")
    with pytest.raises(ValidationError):
        quarantine_services.host_quarantine(host=host, user=alice, reason="   ")
    host.refresh_from_db()
    assert host.quarantined_at is None


@pytest.mark.django_db
def test_quarantine_and_release_a_host(alice, bob):
    host = Host.objects.create(name="h1")

    quarantine_services.host_quarantine(host=host, user=alice, reason=" Xid 79 twice ")
    host.refresh_from_db()
    first_time = host.quarantined_at
    assert first_time is not None
    assert (host.quarantine_reason, host.quarantined_by) == ("Xid 79 twice", alice)

    # a second quarantine keeps the original time, records the new reason and author
    quarantine_services.host_quarantine(host=host, user=bob, reason="and an ECC error")
    host.refresh_from_db()
    assert host.quarantined_at == first_time
    assert (host.quarantine_reason, host.quarantined_by) == ("and an ECC error", bob)

    quarantine_services.host_release(host=host, user=alice)
    host.refresh_from_db()
    assert (host.quarantined_at, host.quarantine_reason, host.quarantined_by) == (None, "", None)


@pytest.mark.django_db
def test_quarantine_and_release_a_device(alice):
    device = Device.objects.create(uuid="GPU-1")
    with pytest.raises(ValidationError):
        quarantine_services.device_quarantine(device=device, user=alice, reason="")
    quarantine_services.device_quarantine(device=device, user=alice, reason="SDC confirmed")
    device.refresh_from_db()
    assert device.quarantine_reason == "SDC confirmed" and device.quarantined_at is not None
    quarantine_services.device_release(device=device, user=alice)
    device.refresh_from_db()
    assert device.quarantined_at is None


@pytest.mark.django_db
def test_quarantine_and_release_are_audited(alice, bob):
    host = Host.objects.create(name="h1")
    device = Device.objects.create(uuid="GPU-1")

    # when alice quarantines the host, bob restates why, alice releases it (twice)
    quarantine_services.host_quarantine(host=host, user=alice, reason="Xid 79 twice")
    quarantine_services.host_quarantine(host=host, user=bob, reason="and an ECC error")
    quarantine_services.host_release(host=host, user=alice)
    quarantine_services.host_release(host=host, user=alice)
    quarantine_services.device_quarantine(device=device, user=bob, reason="SDC confirmed")

    # then each change is one audit event, with who, before and after; the second release
    # changed nothing and recorded nothing
    events = list(AuditEvent.objects.filter(entity="host", object_id=host.pk).order_by("at", "pk"))
    assert [event.username for event in events] == ["alice", "bob", "alice"]
    assert all(event.project is None for event in events)
    assert events[0].changes["quarantine_reason"] == ["", "Xid 79 twice"]
    assert events[0].changes["quarantined_by"] == [None, "alice"]
    assert events[1].changes == {
        "quarantine_reason": ["Xid 79 twice", "and an ECC error"],
        "quarantined_by": ["alice", "bob"],
    }
    assert events[2].changes["quarantined_at"][1] is None
    assert events[2].changes["quarantined_by"] == ["bob", None]
    (device_event,) = AuditEvent.objects.filter(entity="device", object_id=device.pk)
    assert device_event.username == "bob"
    assert device_event.changes["quarantine_reason"] == ["", "SDC confirmed"]


# --- Quarantine on the host page: who may ------------------------------------------------------


@pytest.fixture
def touched_host(project: Any) -> Host:
    _interruption(_run(project, hosts=("h042",)), "x", T - DAY, hosts=["h042"])
    return Host.objects.get(name="h042")


@pytest.mark.django_db
def test_oncall_quarantines_from_the_host_page(client, alice, touched_host):
    client.force_login(alice)
    response = client.post(
        "/fleet/hosts/h042/", {"action": "quarantine", "reason": "Xid 79 on GPU 3"}
    )
    assert response.status_code == 302
    touched_host.refresh_from_db()
    assert touched_host.quarantine_reason == "Xid 79 on GPU 3"
    assert touched_host.quarantined_by == alice

    page = client.get("/fleet/hosts/h042/")
    assert "Xid 79 on GPU 3" in page.content.decode()
    assert 'id="quarantine-form"' in page.content.decode()

    response = client.post("/fleet/hosts/h042/", {"action": "release"})
    assert response.status_code == 302
    touched_host.refresh_from_db()
    assert touched_host.quarantined_at is None


@pytest.mark.django_db
def test_quarantine_without_a_reason_is_refused(client, alice, touched_host):
    client.force_login(alice)
    response = client.post("/fleet/hosts/h042/", {"action": "quarantine", "reason": " "})
    # the form comes back with the error, as Django forms do (not a redirect)
    assert response.status_code == 200
    assert "reason is required" in response.content.decode()
    touched_host.refresh_from_db()
    assert touched_host.quarantined_at is None


@pytest.mark.django_db
def test_viewer_sees_the_host_but_may_not_quarantine(client, bob, touched_host):
    client.force_login(bob)
    page = client.get("/fleet/hosts/h042/")
    assert page.status_code == 200
    assert 'id="quarantine-form"' not in page.content.decode()

    response = client.post("/fleet/hosts/h042/", {"action": "quarantine", "reason": "mine now"})
    assert response.status_code == 403
    touched_host.refresh_from_db()
    assert touched_host.quarantined_at is None


@pytest.mark.django_db
def test_outsider_gets_404_for_the_host(client, charlie, touched_host):
    client.force_login(charlie)
    assert client.get("/fleet/hosts/h042/").status_code == 404
    response = client.post("/fleet/hosts/h042/", {"action": "quarantine", "reason": "x"})
    assert response.status_code == 404
    touched_host.refresh_from_db()
    assert touched_host.quarantined_at is None


@pytest.mark.django_db
def test_anonymous_is_sent_to_login(client, touched_host):
    for response in (client.get("/fleet/hosts/h042/"), client.get("/fleet/"), client.get("/sdc/")):
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_device_quarantine_from_the_host_page(client, alice, project):
    # given a GPU of h9 named by an interruption
    _device_on(project, "GPU-9", "h9")
    _interruption(_run(project, hosts=("h9",)), "x", T - DAY, devices=["GPU-9"])
    client.force_login(alice)

    # when
    response = client.post(
        "/fleet/hosts/h9/", {"action": "quarantine", "device": "GPU-9", "reason": "ECC"}
    )
    wrong_host = client.post(
        "/fleet/hosts/h9/", {"action": "quarantine", "device": "GPU-404", "reason": "ECC"}
    )

    # then
    assert response.status_code == 302
    assert Device.objects.get(uuid="GPU-9").quarantine_reason == "ECC"
    assert wrong_host.status_code == 200
    assert "No such device on this host." in wrong_host.content.decode()


# --- Quarantine is visible where the hardware is used -------------------------------------------


@pytest.mark.django_db
def test_quarantined_hardware_for_run(project, alice):
    # given a run on h1 and h2 whose interruption named GPU-7 (on a host outside the run)
    run = _run(project, hosts=("h1", "h2"))
    _device_on(project, "GPU-7", "spare")
    _device_on(project, "GPU-1", "h1")
    _interruption(run, "x", T - DAY, devices=["GPU-7"])
    other = _run(project, "other", hosts=("h3",))
    for name in ("h2", "h3"):
        quarantine_services.host_quarantine(
            host=Host.objects.get(name=name), user=alice, reason=f"{name} flaky"
        )
    for uuid in ("GPU-7", "GPU-1"):
        quarantine_services.device_quarantine(
            device=Device.objects.get(uuid=uuid), user=alice, reason="bad"
        )

    # when
    shown = fleet_selectors.quarantined_hardware_for_run(run=run)

    # then h3 (another run's host) is not shown; both GPUs are (one on a run host)
    assert [(q.kind, q.name, q.host_name) for q in shown] == [
        ("host", "h2", "h2"),
        ("device", "GPU-1", "h1"),
        ("device", "GPU-7", "spare"),
    ]
    assert shown[0].reason == "h2 flaky" and shown[0].quarantined_by == "alice"
    assert [q.name for q in fleet_selectors.quarantined_hardware_for_run(run=other)] == ["h3"]


@pytest.mark.django_db
def test_quarantined_host_listed_on_the_fleet_page_even_without_incidents(client, project, bob):
    _run(project, hosts=("quiet",))
    quarantine_services.host_quarantine(
        host=Host.objects.get(name="quiet"), user=None, reason="burn-in failed"
    )
    client.force_login(bob)
    page = client.get("/fleet/").content.decode()
    assert 'data-host="quiet"' in page
    assert "burn-in failed" in page


# --- Filters (no database) ----------------------------------------------------------------------


def test_a_bare_until_date_runs_through_the_end_of_that_day():
    filters = sdc_selectors.filters_parse(
        user=AnonymousUser(), params={"since": "2026-11-04", "until": "2026-11-12"}
    )
    assert filters.since == datetime(2026, 11, 4, tzinfo=UTC)
    assert filters.until == datetime(2026, 11, 13, tzinfo=UTC)
    exact = sdc_selectors.filters_parse(
        user=AnonymousUser(), params={"until": "2026-11-12T06:30:00Z"}
    )
    assert exact.until == datetime(2026, 11, 12, 6, 30, tzinfo=UTC)
    with pytest.raises(FilterError):
        sdc_selectors.filters_parse(
            user=AnonymousUser(), params={"since": "2026-11-12", "until": "2026-11-01"}
        )


@pytest.mark.django_db
def test_an_sdc_quarantine_decision_is_the_fleets_quarantine(project, alice):
    # given an SDC record naming a GPU of h-sdc
    run = _run(project)
    _device_on(project, "GPU-sdc", "h-sdc")
    record = sdc_services.sdc_record(
        run=run, source_key="s", step=5, detected_at=T - DAY, device="GPU-sdc"
    )

    # when on-call confirms it and records "device quarantined"
    sdc_services.sdc_verdict_set(
        replay=record, user=alice, verdict="confirmed", action="quarantined"
    )

    # then the device is out of service where the fleet shows it, audited under the project
    (device,) = [one for one in _health(alice).devices if one.name == "GPU-sdc"]
    assert device.row.quarantined_at is not None
    assert device.row.quarantine_reason.startswith(f"SDC record {record.pk}")
    audit = AuditEvent.objects.get(entity=AuditEvent.Entity.DEVICE, object_id=device.row.pk)
    assert audit.project_id == project.pk


@pytest.mark.django_db
def test_an_interruption_naming_one_host_places_its_unplaced_gpus_there(project):
    run = _run(project)
    _device_on(project, "GPU-placed", "elsewhere")
    _interruption(run, "x", T - DAY, hosts=["h-one"], devices=["GPU-new", "GPU-placed"])
    hosts = dict(Device.objects.values_list("uuid", "host__name"))
    assert hosts == {"GPU-new": "h-one", "GPU-placed": "elsewhere"}
