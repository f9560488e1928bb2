"""The logbook as Markdown that reads like the OPT chronicles: the export's layout, the import
back, a round trip of a varied logbook keeping every entry and field, idempotent import, and
clear errors for malformed files."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook.chronicles import (
    ChronicleEntry,
    ChronicleError,
    CorrectionRef,
    logbook_to_markdown,
    markdown_to_entries,
)
from logbook.models import AuditEvent, LogbookEntry
from logbook.selectors.logbook import run_chronicle
from logbook.services import imports as import_services
from telemetry import services as telemetry_services

T0 = datetime(2021, 11, 30, 19, 24, tzinfo=UTC)

REQUEUE = ChronicleEntry(
    occurred_at=T0,
    author_name="Stephen",
    role="oncall",
    kind="restart",
    title="manual requeue of 12.36",
    body="Job hung after the NCCL timeout.\n\n- requeued by hand\n- lost **2 h**",
    attempt=37,
    step=12_000,
    step_end=12_345,
    checkpoint_step=12_000,
    interruption_number=45,
    corrected_by=CorrectionRef(
        kind="debrief", occurred_at=T0 + timedelta(days=2), title="what really happened"
    ),
)


def varied_entries() -> list[ChronicleEntry]:
    """Every field in use: roles, kinds, automatic drafts, ranges and points, config diffs
    with awkward characters, seconds in the time, bodies with headings and code."""
    return [
        REQUEUE,
        ChronicleEntry(
            occurred_at=T0 + timedelta(days=2),
            author_name="Naman",
            role="oncall",
            kind="debrief",
            title="what really happened",
            body=(
                "## Timeline\n\n```\nNCCL WARN Timeout\n"
                "## 2021-12-01 01:00 UTC [x: y] not a heading\n```"
            ),
        ),
        ChronicleEntry(
            occurred_at=T0 + timedelta(hours=3, seconds=17, microseconds=250_000),
            author_name="Chronicle",
            role="automation",
            kind="restart",
            title="Attempt 38 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts",
            is_automatic=True,
            attempt=38,
            step=12_000,
            sdc_replay_id=3,
        ),
        ChronicleEntry(
            occurred_at=T0 + timedelta(hours=5),
            author_name="Susan [cluster] \\ ops",
            role="cluster_manager",
            kind="config_change",
            title="Lower LR | tighten clipping",
            config_changes=[
                {"key": "lr", "before": "3e-4", "after": "1.5e-4"},
                {"key": "clip|norm", "before": "1.0", "after": "0.3 \\ 0.5"},
                {"key": "torch", "before": "", "after": "2.5.1"},
            ],
        ),
        ChronicleEntry(
            occurred_at=T0 + timedelta(hours=6),
            author_name="Stephen",
            role="oncall",
            kind="milestone",
            title="Attempt 9: a title that looks like an attempt prefix",
            step=20_448,
        ),
    ]


def test_export_reads_like_the_chronicles():
    # when one entry is exported
    text = logbook_to_markdown([REQUEUE], title="Logbook of opt/175b")

    # then it has the chronicles' heading and its facts, in this layout
    lines = text.splitlines()
    assert lines[0] == "# Logbook of opt/175b"
    assert "## 2021-11-30 19:24 UTC [on-call: Stephen] Attempt 37: manual requeue of 12.36" in lines
    assert "- **Kind:** restart" in lines
    assert "- **Steps:** 12,000\u201312,345" in lines
    assert "- **Checkpoint:** step 12,000" in lines
    assert "- **Incident:** #45" in lines
    assert "- **Corrected by:** the debrief of 2021-12-02 19:24 UTC: what really happened" in lines
    assert lines[-2:] == ["- requeued by hand", "- lost **2 h**"]


def test_export_is_newest_first_with_a_config_table():
    # given entries in no particular order
    entries = varied_entries()

    # when exported
    text = logbook_to_markdown(entries)

    # then one heading per entry, newest first, and the config diff as a table
    headings = [line for line in text.splitlines() if line.startswith("## 2021-")]
    assert [h[3:19] for h in headings] == [
        "2021-12-02 19:24",
        "2021-12-01 01:24",
        "2021-12-01 00:24",
        "2021-11-30 22:24",
        "2021-11-30 19:24",
    ]
    assert "| Setting | Before | After |" in text
    assert "| clip\\|norm | 1.0 | 0.3 \\\\ 0.5 |" in text
    # The debrief's code line that looks like a heading is escaped, so it stays body text.
    assert "\\## 2021-12-01 01:00 UTC [x: y] not a heading" in text


def test_round_trip_keeps_every_entry_and_field():
    # given a varied logbook
    entries = varied_entries()

    # when exported and read back
    parsed = markdown_to_entries(logbook_to_markdown(entries, title="Logbook"))

    # then every entry comes back with every field (newest first, as exported)
    expected = sorted((asdict(e) for e in entries), key=lambda e: e["occurred_at"], reverse=True)
    assert parsed == expected


def test_export_of_an_import_is_the_same_text():
    text = logbook_to_markdown(varied_entries(), title="Logbook")
    again = logbook_to_markdown(
        [ChronicleEntry(**_entry_kwargs(data)) for data in markdown_to_entries(text)],
        title="Logbook",
    )
    assert again == text


def _entry_kwargs(data: dict[str, Any]) -> dict[str, Any]:
    ref = data["corrected_by"]
    return {**data, "corrected_by": CorrectionRef(**ref) if ref else None}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just some notes\n\nno entries here", "no logbook entries found"),
        ("## 2021-11-30 19:24 [on-call: Stephen] no UTC\n", "Line 1: an entry heading"),
        ("## 2021-11-30 19:24 UTC [pilot: Stephen] x\n\n- **Kind:** note\n", "unknown role"),
        ("## 2021-11-30 19:24 UTC [on-call: Stephen] x\n\nbody only\n", "Line 3: expected a fact"),
        ("## 2021-11-30 19:24 UTC [on-call: S] x\n\n- **Steps:** ten\n", "the entry has no"),
        (
            "# L\n\n## 2021-11-30 19:24 UTC [on-call: S] x\n\n- **Kind:** note\n"
            "- **Steps:** 9\u20135\n",
            "Line 6: the step range ends before it starts",
        ),
        (
            "## 2021-11-30 19:24 UTC [on-call: S] x\n\n- **Kind:** config change\n"
            "- **Config changes:** 2 (before → after below)\n\n| Setting | Before | After |\n"
            "|---|---|---|\n| lr | 1 | 2 |\n",
            "2 config changes announced, 1 rows found",
        ),
    ],
)
def test_malformed_files_give_a_clear_error(text, message):
    with pytest.raises(ChronicleError, match=message):
        markdown_to_entries(text)


# --- Import into a run (database) ----------------------------------------------------------


@pytest.fixture
def run(run: Any) -> Any:
    """The shared run with attempts 37 and 38 started at T0."""
    for number in (37, 38):
        telemetry_services.attempt_ensure(run=run, number=number, started_at=T0)
    return run


@pytest.mark.django_db
def test_import_creates_every_entry_links_corrections_and_is_idempotent(run, alice):
    # given an exported chronicle of five entries, one corrected by a later one
    text = logbook_to_markdown(varied_entries(), title="Logbook")

    # when alice imports it twice
    first = import_services.logbook_import(run=run, user=alice, text=text).created
    second = import_services.logbook_import(run=run, user=alice, text=text).created

    # then five entries exist once each, with links to the run's own records
    assert (first, second) == (5, 0)
    assert LogbookEntry.objects.filter(run=run).count() == 5
    requeue = LogbookEntry.objects.get(run=run, title="manual requeue of 12.36")
    debrief = LogbookEntry.objects.get(run=run, kind="debrief")
    assert requeue.corrected_by_id == debrief.pk
    assert requeue.attempt.number == 37 and (requeue.step, requeue.step_end) == (12_000, 12_345)
    assert requeue.author_name == "Stephen" and requeue.role == "oncall"
    # Records the run does not have (incident #45, SDC #3, checkpoint 12,000) are not linked.
    assert requeue.interruption_id is None and requeue.checkpoint_id is None
    drafted = LogbookEntry.objects.get(run=run, is_automatic=True)
    assert drafted.occurred_at == T0 + timedelta(hours=3, seconds=17, microseconds=250_000)
    # every creation is in the audit trail, by the importer
    assert AuditEvent.objects.filter(entity="logbook_entry", action="create").count() == 5
    assert set(AuditEvent.objects.values_list("username", flat=True)) == {"alice"}


@pytest.mark.django_db
def test_export_of_an_imported_logbook_gives_back_the_same_entries(run, alice):
    # given a chronicle without links to records this run lacks
    entries = [
        ChronicleEntry(
            **{
                **asdict(e),
                "interruption_number": None,
                "sdc_replay_id": None,
                "checkpoint_step": None,
                "corrected_by": e.corrected_by,
            }
        )
        for e in varied_entries()
    ]
    text = logbook_to_markdown(entries, title="Logbook of pretrain/opt-175b")

    # when imported and the run's logbook exported again
    import_services.logbook_import(run=run, user=alice, text=text)
    exported = logbook_to_markdown(run_chronicle(run=run), title="Logbook of pretrain/opt-175b")

    # then the text is the same
    assert exported == text


@pytest.mark.django_db
def test_a_malformed_import_writes_nothing(run, alice):
    good = logbook_to_markdown(varied_entries()[:2])
    bad = good + "\n## 2021-12-05 10:00 UTC [pilot: x] broken\n\n- **Kind:** note\n"
    with pytest.raises(ChronicleError, match="unknown role"):
        import_services.logbook_import(run=run, user=alice, text=bad)
    unknown_kind = good.replace("- **Kind:** debrief", "- **Kind:** gossip")
    with pytest.raises(ChronicleError, match="unknown kind 'gossip'"):
        import_services.logbook_import(run=run, user=alice, text=unknown_kind)
    assert not LogbookEntry.objects.exists()
