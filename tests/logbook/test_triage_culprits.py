"""Culprits from the evidence that explains the cause, Confirm that files exactly what it
shows, and an accuracy page that counts culprit hosts as well as categories (issue 41, item 3:
the crash's suggestion named node0 and node1, node1 there only for its slow rank 13; Confirm
filed both; the accuracy page counted it confirmed)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from logbook.models import StragglerRecord, TriageSuggestion
from logbook.services import autotriage as autotriage_services
from tests.logbook.test_triage_suggestions import T0, record, xid_push

CRASH = "RuntimeError: CUDA error: unspecified launch failure\nNCCL error in: ProcessGroupNCCL.cpp"


def crash_beside_a_straggler(project):
    # given DCGM's XID 79 on node0, rank 13 straggling on node1, the job's crash on both
    xid_push(project, host="node0", uuid="GPU-node0-3", code=79, at=T0 - timedelta(seconds=20))
    interruption = record(project, message=CRASH, hosts=["node0", "node1"])
    StragglerRecord.objects.create(
        run=interruption.run, attempt=interruption.attempt, rank=13,
        host=interruption.hosts.get(name="node1"), relative_score=0.45, windows=5,
        first_window_at=T0 - timedelta(minutes=20), last_window_at=T0 - timedelta(minutes=1),
    )  # fmt: skip
    return interruption


@pytest.mark.django_db
def test_a_crash_whose_xid_sits_on_node0_beside_a_straggler_on_node1_blames_node0_only(project):
    interruption = crash_beside_a_straggler(project)
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug == "faulty-gpu"
    assert suggestion.hosts == ["node0"]
    assert suggestion.devices == ["GPU-node0-3"]


@pytest.mark.django_db
def test_confirm_shows_exactly_what_it_files_and_files_that(client, project, alice):
    interruption = crash_beside_a_straggler(project)
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None
    client.force_login(alice)
    page = client.get(f"/incidents/{interruption.pk}/").content.decode()
    shown = page[page.index('id="suggestion-files"') :]
    shown = shown[: shown.index("</dl>")]
    # the page says what Confirm files: the category, component, every host and device
    assert "Faulty GPU" in shown and suggestion.component in shown
    assert '<dd id="suggestion-files-hosts">node0</dd>' in shown
    assert "GPU-node0-3" in shown and "node1" not in shown
    # and Confirm files exactly that
    client.post(
        f"/incidents/{interruption.pk}/", {"action": "confirm", "version": interruption.version}
    )
    interruption.refresh_from_db()
    assert interruption.root_cause.slug == "faulty-gpu"
    assert interruption.component == suggestion.component
    assert sorted(h.name for h in interruption.hosts.all()) == ["node0"]
    assert sorted(d.uuid for d in interruption.devices.all()) == ["GPU-node0-3"]


@pytest.mark.django_db
def test_the_accuracy_page_counts_culprit_hosts_as_well_as_categories(client, project, alice):
    # given two Faulty GPU suggestions confirmed in one click, one of which named a second
    # host that on-call later took off the incident
    right = crash_beside_a_straggler(project)
    autotriage_services.suggestion_make(interruption_id=right.pk)
    wrong = record(project, message=CRASH, hosts=["node0", "node1"], key="i2")
    autotriage_services.suggestion_make(interruption_id=wrong.pk)
    TriageSuggestion.objects.filter(interruption=wrong).update(hosts=["node0", "node1"])
    client.force_login(alice)
    for incident in (right, wrong):
        incident.refresh_from_db()
        client.post(
            f"/incidents/{incident.pk}/", {"action": "confirm", "version": incident.version}
        )
    wrong.refresh_from_db()
    client.post(
        f"/incidents/{wrong.pk}/",
        {"version": wrong.version, "root_cause": "faulty-gpu", "hosts": "node0",
         "severity": "medium"},
    )  # fmt: skip
    # when the accuracy is read
    body = client.get("/api/v1/triage/accuracy").json()
    (row,) = body["categories"]
    # then both count confirmed by category, but only one had the right culprit hosts
    assert (row["confirmed"], row["overridden"]) == (2, 0)
    assert (row["culprit_hosts_right"], row["culprit_hosts_named"]) == (1, 2)
    assert row["culprit_hosts_right_share"] == 0.5
    page = client.get("/incidents/accuracy/").content.decode()
    assert "1 of 2" in page
