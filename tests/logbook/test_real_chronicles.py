"""A logbook that can hold the public OPT-175B and BLOOM-176B chronicles: times known to a day
or a window, the source's local time label, lost time as reported, hardware swaps and resized
clusters, counted entries, links the run lacks reported and kept, incidents by run-local
number, and an export that reads oldest first."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ingest import services as ingest_services
from logbook.chronicles import ChronicleEntry, logbook_to_markdown, markdown_to_entries
from logbook.failure_maths import rates
from logbook.models import Interruption, LogbookEntry
from logbook.selectors.failures import FailureFilters, run_spans
from logbook.selectors.logbook import run_chronicle
from logbook.services import imports as import_services
from logbook.services import interruptions as interruption_services
from logbook.services.entries import logbook_entry_create
from telemetry import services as telemetry_services
from telemetry.models import Run

T0 = datetime(2021, 11, 30, 19, 24, tzinfo=UTC)
DAY = datetime(2021, 12, 3, tzinfo=UTC)
# Where the page screenshots go (the lead's notes folder when it exists, else test-artifacts).
SHOTS = Path(
    os.environ.get("CHRONICLE_SHOTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)


def _entry(**fields: Any) -> ChronicleEntry:
    base: dict[str, Any] = {
        "occurred_at": T0,
        "author_name": "Stas",
        "role": "oncall",
        "kind": "note",
        "title": "a note",
    }
    return ChronicleEntry(**{**base, **fields})


# --- The Markdown layout (pure) ------------------------------------------------------------


def test_day_and_window_times_are_written_as_such_and_read_back():
    # given an entry known to the day and one known within a window, with local labels
    day = _entry(title="NCCL hangs all day", time_precision="day", occurred_at=DAY)
    window = _entry(
        title="lost the node overnight",
        time_precision="window",
        occurred_at=T0,
        occurred_until=T0 + timedelta(hours=11),
        local_time="11:24am PST",
    )

    text = logbook_to_markdown([day, window])

    # then the headings say the day and the window, no invented minute
    assert "## 2021-12-03 [on-call: Stas] NCCL hangs all day" in text
    assert (
        "## 2021-11-30 19:24 UTC \u2013 2021-12-01 06:24 UTC [on-call: Stas] lost the node" in text
    )
    assert "- **Local time:** 11:24am PST" in text
    # and import gives back the same precision, window end and label
    read = {data["title"]: data for data in markdown_to_entries(text)}
    assert read["NCCL hangs all day"]["time_precision"] == "day"
    assert read["NCCL hangs all day"]["occurred_at"] == DAY
    assert read["lost the node overnight"]["time_precision"] == "window"
    assert read["lost the node overnight"]["occurred_until"] == T0 + timedelta(hours=11)
    assert read["lost the node overnight"]["local_time"] == "11:24am PST"


def test_hardware_swap_and_counted_entries_round_trip():
    swap = _entry(
        kind="hardware_swap",
        title="swapped a bad node for a spare",
        hosts_out=["r7i4n1"],
        hosts_in=["r7i5n3-spare"],
    )
    counted = _entry(
        occurred_at=T0 + timedelta(days=1),
        title="restarts so far",
        count=90,
        count_approximate=True,
        count_unit="restarts",
    )

    text = logbook_to_markdown([swap, counted])

    assert "- **Kind:** hardware swap" in text
    assert "- **Hosts out:** r7i4n1\n- **Hosts in:** r7i5n3-spare" in text
    assert "- **Count:** ~90 restarts" in text
    read = {data["title"]: data for data in markdown_to_entries(text)}
    assert (read["swapped a bad node for a spare"]["hosts_out"], read[swap.title]["hosts_in"]) == (
        ["r7i4n1"],
        ["r7i5n3-spare"],
    )
    assert read["restarts so far"]["count"] == 90
    assert read["restarts so far"]["count_approximate"] is True
    assert read["restarts so far"]["count_unit"] == "restarts"


def test_export_can_read_oldest_first():
    entries = [_entry(title=f"entry {n}", occurred_at=T0 + timedelta(hours=n)) for n in range(3)]

    newest = logbook_to_markdown(entries)
    oldest = logbook_to_markdown(entries, oldest_first=True)

    assert newest.index("entry 2") < newest.index("entry 0")
    assert oldest.index("entry 0") < oldest.index("entry 1") < oldest.index("entry 2")
    assert [d["title"] for d in markdown_to_entries(oldest)] == ["entry 0", "entry 1", "entry 2"]


# --- Import into a run (database) ----------------------------------------------------------


def _incident(run: Run, key: str, minutes: int, **fields: Any) -> Any:
    return interruption_services.interruption_record(
        run=run,
        source_key=key,
        occurred_at=T0 + timedelta(minutes=minutes),
        category="faulty-gpu",
        **fields,
    )


@pytest.mark.django_db
def test_import_reports_each_missing_link_and_keeps_it_in_the_text(run, alice):
    # given a chronicle naming a checkpoint, an attempt and an incident this run lacks
    text = logbook_to_markdown(
        [
            _entry(title="first", body="All fine."),
            _entry(
                occurred_at=T0 + timedelta(hours=1),
                title="restart after the NCCL hang",
                body="Resumed.",
                attempt=7,
                checkpoint_step=17_235,
                interruption_number=4,
            ),
        ],
        oldest_first=True,
    )

    # when imported
    result = import_services.logbook_import(run=run, user=alice, text=text)

    # then each missing link is reported by entry, and the entry's text keeps it
    assert result.created == 2
    assert result.unlinked == [
        "entry 2: attempt 7 not found; kept as text",
        "entry 2: checkpoint at step 17,235 not found; kept as text",
        "entry 2: incident #4 not found; kept as text",
    ]
    entry = LogbookEntry.objects.get(run=run, title="restart after the NCCL hang")
    assert entry.body.startswith("Resumed.")
    assert "checkpoint at step 17,235 not found" in entry.body
    assert "incident #4 not found" in entry.body
    assert LogbookEntry.objects.get(run=run, title="first").body == "All fine."


@pytest.mark.django_db
def test_incident_links_survive_export_and_import_between_instances(project, alice):
    # given two runs (two instances' worth) whose incidents have different database ids
    source = telemetry_services.run_upsert(project=project, name="opt-source", info={})
    target = telemetry_services.run_upsert(project=project, name="opt-target", info={})
    for key in ("filler-a", "filler-b", "filler-c"):
        _incident(target, key, 0)  # pushes the target's ids past the source's
    Run.objects.filter(pk=target.pk).delete()
    target = telemetry_services.run_upsert(project=project, name="opt-target", info={})
    source_incidents = [_incident(source, f"s{n}", n) for n in range(3)]
    target_incidents = [_incident(target, f"t{n}", n) for n in range(3)]
    assert [i.number for i in source_incidents] == [1, 2, 3]
    assert source_incidents[1].pk != target_incidents[1].pk
    logbook_entry_create(
        run=source, user=alice, title="ECC errors", interruption=source_incidents[1]
    )

    # when the source's logbook is exported and imported into the target
    text = logbook_to_markdown(run_chronicle(run=source))
    result = import_services.logbook_import(run=target, user=alice, text=text)

    # then the entry links the target's incident #2
    assert "- **Incident:** #2" in text
    assert result.unlinked == []
    assert LogbookEntry.objects.get(run=target).interruption_id == target_incidents[1].pk


@pytest.mark.django_db
def test_entries_keep_precision_local_time_count_and_swap_through_export(run, alice):
    # given entries written with the new fields
    logbook_entry_create(
        run=run,
        user=alice,
        title="the whole day was lost to NCCL",
        occurred_at=DAY + timedelta(hours=15),  # a day entry is stored at the day's 00:00
        time_precision="day",
        local_time="Friday, cluster time",
    )
    logbook_entry_create(
        run=run,
        user=alice,
        kind="hardware_swap",
        title="48 → 24 nodes",
        occurred_at=T0,
        hosts_out=["n1", "n2"],
        hosts_in=["spare-1"],
        count=8,
        count_unit="auto-recovered failures",
    )

    # when exported and imported into a fresh run
    text = logbook_to_markdown(run_chronicle(run=run), oldest_first=True)
    other = telemetry_services.run_upsert(project=run.project, name="copy", info={})
    import_services.logbook_import(run=other, user=alice, text=text)

    # then the second export is the same text, and the fields are on the rows
    assert logbook_to_markdown(run_chronicle(run=other), oldest_first=True) == text
    day = LogbookEntry.objects.get(run=other, time_precision="day")
    assert day.occurred_at == DAY and day.local_time == "Friday, cluster time"
    swap = LogbookEntry.objects.get(run=other, kind="hardware_swap")
    assert (swap.hosts_out, swap.hosts_in, swap.count) == (["n1", "n2"], ["spare-1"], 8)


# --- Pages ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_logbook_page_shows_day_window_local_time_count_and_swap(client, alice, run):
    logbook_entry_create(
        run=run, user=alice, title="day entry", occurred_at=DAY, time_precision="day"
    )
    logbook_entry_create(
        run=run,
        user=alice,
        title="window entry",
        occurred_at=T0,
        time_precision="window",
        occurred_until=T0 + timedelta(hours=6),
        local_time="11:24am PST",
    )
    logbook_entry_create(
        run=run,
        user=alice,
        kind="hardware_swap",
        title="swap",
        occurred_at=T0 - timedelta(days=1),
        hosts_out=["bad-node"],
        hosts_in=["spare-node"],
        count=90,
        count_approximate=True,
        count_unit="restarts",
    )
    client.force_login(alice)

    html = client.get(f"/runs/{run.pk}/logbook/").content.decode()

    assert '<time class="when-day" datetime="2021-12-03">2021-12-03</time>' in html
    assert "(day, UTC)" in html
    assert "2021-12-03 00:00" not in html  # no invented minute for a day
    assert '2021-12-01 01:24 UTC</time> <span class="when-precision">(window)' in html
    assert "(11:24am PST as written)" in html
    assert "~90 restarts" in html
    assert "out: bad-node" in html and "in: spare-node" in html
    assert "?order=oldest" in html


@pytest.mark.django_db
def test_export_view_reads_oldest_first_on_request(client, alice, run):
    for n in range(2):
        logbook_entry_create(
            run=run, user=alice, title=f"entry {n}", occurred_at=T0 + timedelta(hours=n)
        )
    client.force_login(alice)

    newest = client.get(f"/runs/{run.pk}/logbook.md").content.decode()
    oldest = client.get(f"/runs/{run.pk}/logbook.md?order=oldest").content.decode()

    assert newest.index("entry 1") < newest.index("entry 0")
    assert oldest.index("entry 0") < oldest.index("entry 1")


@pytest.mark.django_db
def test_entry_form_takes_window_local_time_count_and_hosts(client, alice, run):
    client.force_login(alice)

    response = client.post(
        f"/runs/{run.pk}/logbook/",
        {
            "kind": "hardware_swap",
            "role": "oncall",
            "title": "replaced two nodes",
            "occurred_at": "2021-11-30 18:00",
            "time_precision": "window",
            "occurred_until": "2021-12-01 06:00",
            "local_time": "overnight PST",
            "count": "2",
            "count_unit": "nodes",
            "hosts_out": "n1, n2",
            "hosts_in": "spare-1,spare-2",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    entry = LogbookEntry.objects.get(run=run)
    assert entry.time_precision == "window"
    assert entry.occurred_until == datetime(2021, 12, 1, 6, tzinfo=UTC)
    assert (entry.local_time, entry.count, entry.count_unit) == ("overnight PST", 2, "nodes")
    assert (entry.hosts_out, entry.hosts_in) == (["n1", "n2"], ["spare-1", "spare-2"])


@pytest.mark.django_db
def test_window_without_an_end_is_a_400_naming_the_field(client, alice, run):
    client.force_login(alice)

    response = client.post(
        f"/runs/{run.pk}/logbook/",
        {"kind": "note", "role": "oncall", "title": "x", "time_precision": "window"},
    )

    assert response.status_code == 400
    assert "A time window needs its end." in response.content.decode()
    assert not LogbookEntry.objects.exists()


@pytest.mark.django_db
def test_incident_shows_reported_lost_time_beside_computed_downtime(client, alice, run):
    incident = _incident(
        run,
        "lost-18h",
        0,
        recovered_at=T0 + timedelta(hours=2),
        reported_lost_s=18 * 3600,
        time_precision="day",
        local_time="Tuesday PST",
    )
    client.force_login(alice)

    html = client.get(f"/incidents/{incident.pk}/").content.decode()

    assert '<dd id="incident-downtime">2 h</dd>' in html
    assert '<dd id="incident-reported-lost">18 h</dd>' in html
    assert "(day, UTC)" in html and "(Tuesday PST as written)" in html
    # one number everywhere: the incident's own, as its address has it
    assert "incident-run-number" not in html
    assert f"Incident #{incident.pk} is this incident's number everywhere" in html
    body = client.get(f"/api/v1/incidents/{incident.pk}").json()["incident"]
    assert (body["reported_lost_s"], body["downtime_s"]) == (64_800.0, 7_200.0)
    assert (body["number"], body["time_precision"], body["local_time"]) == (
        1,
        "day",
        "Tuesday PST",
    )


# --- A resized cluster: MFU and failure rates per attempt ----------------------------------


@pytest.mark.django_db
def test_failure_rates_weight_each_attempts_accelerator_count(project):
    # given a run on 48 x 8 GPUs for a day, then resized to 24 x 8 for a day (BLOOM-176B)
    run = telemetry_services.run_upsert(
        project=project, name="bloom", info={"accelerator_count": 384}
    )
    first = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    telemetry_services.attempt_end(attempt=first, status="failed", ended_at=T0 + timedelta(days=1))
    second = telemetry_services.attempt_ensure(
        run=run, number=2, started_at=T0 + timedelta(days=1), accelerator_count=192
    )
    telemetry_services.attempt_end(
        attempt=second, status="completed", ended_at=T0 + timedelta(days=2)
    )
    Run.objects.filter(pk=run.pk).update(last_seen_at=T0 + timedelta(days=2))

    # when the observed spans are read
    spans = run_spans(runs=Run.objects.filter(pk=run.pk), filters=FailureFilters())

    # then the accelerator-days are 384 + 192, not 2 x 384
    result = rates([], spans)
    assert result.accelerator_days.value == pytest.approx(576.0)


@pytest.mark.django_db
def test_ingest_takes_attempt_accelerators_and_reported_lost_time(project):
    # given a job that reports its resized attempt and an interruption as its chronicle did
    token, _ = ingest_services.token_create(project=project, name="chronicle")
    document = {
        "batch_id": "bloom-1",
        "run": "bloom",
        "events": [
            {"type": "attempt_started", "time": T0.isoformat(), "attempt": 2,
             "accelerator_count": 192},
            {"type": "interruption", "time": DAY.isoformat(), "id": "lost-7h",
             "category": "faulty-gpu", "lost_s": 7.3 * 3600, "time_precision": "day",
             "local_time": "Friday, Paris time"},
        ],
    }  # fmt: skip

    # when the batch is processed
    acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
    assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"

    # then the attempt has its own count and the incident its reported loss and precision
    run = Run.objects.get(project=project, name="bloom")
    assert run.attempts.get(number=2).accelerator_count == 192
    incident = Interruption.objects.get(run=run)
    assert incident.reported_lost_s == pytest.approx(26_280)
    assert (incident.time_precision, incident.local_time) == ("day", "Friday, Paris time")
    assert incident.number == 1


OPT_LIKE = """# Logbook of OPT-175B (excerpt, as imported)

## 2021-11-29 [on-call: Susan] Run 12 so far

- **Kind:** note
- **Local time:** Monday, PST
- **Count:** ~90 restarts

Most were hardware: lost GPUs, NCCL hangs, ECC errors.

## 2021-11-30 19:24 UTC [on-call: Stephen] manual requeue after a lost node

- **Kind:** restart
- **Local time:** 11:24am PST
- **Checkpoint:** step 17,235
- **Incident:** #1

Job hung after the NCCL timeout; requeued by hand.

## 2021-12-01 02:00 UTC \u2013 2021-12-01 09:00 UTC [cluster manager: Naman] swapped two nodes

- **Kind:** hardware swap
- **Hosts out:** node-17, node-40
- **Hosts in:** spare-3, spare-4

Buffer hosts brought in overnight; ~7 h lost.
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_chronicle_imported_in_the_browser_reads_as_written(
    browser, live_server, alice, run, login_page, console_errors, tmp_path
):
    # given an OPT-like chronicle file whose incident #1 exists and checkpoint does not
    incident = _incident(
        run, "hang", 0, recovered_at=T0 + timedelta(hours=2), reported_lost_s=18 * 3600
    )
    upload = tmp_path / "opt.md"
    upload.write_text(OPT_LIKE, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when on-call imports it from the logbook page
    page.goto(f"{live_server.url}/runs/{run.pk}/logbook/")
    page.click("#new-entry summary")
    page.set_input_files("#import-form input[type=file]", str(upload))
    page.click("#import-form button[type=submit]")
    page.wait_for_selector("#messages")

    # then the missing checkpoint is reported, and each entry reads as the source wrote it
    messages = page.locator("#messages").inner_text()
    assert "Imported 3 new entries." in messages
    assert "Entry 2: checkpoint at step 17,235 not found; kept as text." in messages
    entries = page.locator("#entries").inner_text()
    assert "2021-11-29 (day, UTC)" in entries and "~90 restarts" in entries
    assert "(window)" in entries and "out: node-17, node-40" in entries
    # (the file's run-local "#1" links the run's first incident; pages name it by its id)
    assert "(11:24am PST as written)" in entries and f"incident #{incident.pk}" in entries
    assert "Not linked on import: checkpoint at step 17,235 not found." in entries
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "chron-logbook.png"), full_page=True)

    # and the entry form offers the chronicle's fields
    page.click("#new-entry summary")
    page.select_option("#id_time_precision", "window")
    page.select_option("#id_kind", "hardware_swap")
    page.fill("#id_hosts_out", "node-9")
    page.fill("#id_local_time", "3:10 cluster time")
    page.locator("#entry-form").screenshot(path=str(SHOTS / "chron-entry-form.png"))
    assert errors == []
    page.close()
