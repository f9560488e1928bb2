"""Logbook entries: writes audited with before and after, optimistic locking, corrections and
config diffs on the page, escaping, who may do what, the automatic restart draft (directly and
through ingest), query counts, and a shift's logbook work in a browser."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from ingest import services as ingest_services
from logbook.models import AuditEvent, LogbookEntry
from logbook.services import checkpoints as checkpoint_services
from logbook.services import drafts as draft_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Run

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def run_name() -> str:
    return "r12"


@pytest.fixture
def run(run: Run) -> Run:
    """The shared run with attempt 1 started at T0."""
    telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    return run


def url(run: Run, suffix: str = "") -> str:
    return f"/runs/{run.pk}/logbook/{suffix}"


def entry_post(**fields: Any) -> dict[str, Any]:
    data = {"kind": "note", "role": "oncall", "title": "a note", "body": ""}
    data.update(fields)
    return data


def audit(entry_pk: int) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(entity="logbook_entry", object_id=entry_pk).order_by("at", "pk")
    )


# --- Services: audit, locking ----------------------------------------------------------------


@pytest.mark.django_db
def test_create_update_delete_are_audited_with_before_and_after(run, alice):
    # given alice writes an entry
    entry = entry_services.logbook_entry_create(
        run=run, user=alice, title="Loss spike at 1,200", kind="loss_spike", occurred_at=at(5),
        step=1200, body="first look",
    )  # fmt: skip

    # when she edits its body and kind, then deletes it
    entry = entry_services.logbook_entry_update(
        entry=entry, user=alice, version=1, changes={"body": "grad norm 40x", "kind": "analysis"}
    )
    entry_services.logbook_entry_delete(entry=entry, user=alice, version=2)

    # then each change is one audit event with who, what, before and after
    created, updated, deleted = audit(entry.pk)
    assert (created.action, created.username) == ("create", "alice")
    assert created.changes["title"] == [None, "Loss spike at 1,200"]
    assert created.changes["step"] == [None, 1200]
    assert updated.action == "update"
    assert updated.changes == {
        "body": ["first look", "grad norm 40x"],
        "kind": ["loss_spike", "analysis"],
        "version": [1, 2],
    }
    assert deleted.action == "delete" and deleted.changes["body"] == ["grad norm 40x", None]
    assert not LogbookEntry.objects.filter(pk=entry.pk).exists()


@pytest.mark.django_db
def test_an_update_that_changes_nothing_records_nothing(run, alice):
    entry = entry_services.logbook_entry_create(run=run, user=alice, title="t", occurred_at=at(1))
    entry_services.logbook_entry_update(
        entry=entry, user=alice, version=1, changes={"title": " t "}
    )
    assert len(audit(entry.pk)) == 1
    assert LogbookEntry.objects.get(pk=entry.pk).version == 1


@pytest.mark.django_db
def test_a_stale_edit_is_refused_and_nothing_is_lost(run, alice, bob, django_user_model):
    # given two on-call engineers open the same entry at version 1
    dave = django_user_model.objects.create_user(username="dave", password="x")
    entry = entry_services.logbook_entry_create(
        run=run, user=alice, title="Hang", occurred_at=at(1)
    )
    entry_services.logbook_entry_update(
        entry=entry, user=dave, version=1, changes={"body": "dave: rank 17 never logged"}
    )

    # when alice saves from the version she started with
    with pytest.raises(entry_services.LogbookStaleEdit) as refused:
        entry_services.logbook_entry_update(
            entry=entry, user=alice, version=1, changes={"body": "alice: restarted"}
        )

    # then she is told who changed it, and dave's text is still there
    assert "changed by dave" in str(refused.value) and "Nothing was saved" in str(refused.value)
    assert [event.username for event in refused.value.their_changes] == ["dave"]
    stored = LogbookEntry.objects.get(pk=entry.pk)
    assert (stored.body, stored.version) == ("dave: rank 17 never logged", 2)


@pytest.mark.django_db
def test_a_correction_must_be_a_later_entry_of_the_same_run(run, alice, project):
    early = entry_services.logbook_entry_create(
        run=run, user=alice, title="early", occurred_at=at(1)
    )
    late = entry_services.logbook_entry_create(run=run, user=alice, title="late", occurred_at=at(9))
    with pytest.raises(ValidationError, match="later one"):
        entry_services.logbook_entry_update(
            entry=late, user=alice, version=1, changes={"corrected_by": early}
        )
    other = telemetry_services.run_upsert(project=project, name="other", info={})
    elsewhere = entry_services.logbook_entry_create(
        run=other, user=alice, title="x", occurred_at=at(20)
    )
    with pytest.raises(ValidationError, match="this run"):
        entry_services.logbook_entry_update(
            entry=early, user=alice, version=1, changes={"corrected_by": elsewhere}
        )
    with pytest.raises(ValidationError, match="same"):
        entry_services.logbook_entry_create(
            run=run, user=alice, title="no-op", config_changes=[{"key": "lr", "before": "1",
                                                                  "after": "1"}],
        )  # fmt: skip


# --- Restart drafts --------------------------------------------------------------------------


def interrupted_run(project: Any) -> tuple[Run, Any]:
    """Attempt 11 from T0 reached step 12,345 and hit an NCCL watchdog timeout on h123 at
    T0 + 60 min; attempt 12 started at T0 + 74 min from the checkpoint at step 12,000."""
    run = telemetry_services.run_upsert(project=project, name="opt", info={})
    eleven = telemetry_services.attempt_ensure(run=run, number=11, started_at=T0)
    checkpoint_services.checkpoint_record(run=run, step=12_000, attempt=eleven, saved_at=at(50))
    interruption_services.interruption_record(
        run=run, source_key="i-11", occurred_at=at(60), attempt=eleven,
        category="nccl-watchdog-timeout", hosts=["h123"], step=12_345,
    )  # fmt: skip
    twelve = telemetry_services.attempt_ensure(run=run, number=12, started_at=at(74))
    checkpoint_services.checkpoint_restore_record(attempt=twelve, step=12_000, restored_at=at(75))
    return run, twelve


@pytest.mark.django_db
def test_restart_draft_tells_what_happened_and_what_it_cost(project):
    _, twelve = interrupted_run(project)

    entry = draft_services.restart_entry_draft(attempt=twelve)

    # 12,345 - 12,000 = 345 steps lost; 08:00 + 74 min - (08:00 + 60 min) = 14 min down.
    assert entry.title == (
        "Attempt 12 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts on "
        "host h123; 345 steps lost, 14 min downtime"
    )
    assert entry.is_automatic and entry.role == "automation" and entry.kind == "restart"
    assert entry.source_key == f"draft:restart:{twelve.pk}"
    assert (entry.step, entry.step_end, entry.occurred_at) == (12_000, 12_345, at(74))
    assert entry.checkpoint.step == 12_000 and entry.interruption.source_key == "i-11"
    assert entry.attempt == twelve
    assert "345 = last step attempt 11 reached (12,345) \u2212 resume step (12,000)" in entry.body


@pytest.mark.django_db
def test_restart_draft_is_idempotent_and_never_overwrites_a_person(project, alice):
    run, twelve = interrupted_run(project)
    first = draft_services.restart_entry_draft(attempt=twelve)
    assert draft_services.restart_entry_draft(attempt=twelve).pk == first.pk
    assert LogbookEntry.objects.filter(run=run).count() == 1
    assert len(audit(first.pk)) == 1  # a repeat that changes nothing writes nothing

    # when on-call edits the draft and the draft runs again
    entry_services.logbook_entry_update(
        entry=first, user=alice, version=first.version, changes={"body": "Root cause: IB link"}
    )
    again = draft_services.restart_entry_draft(attempt=twelve)

    # then her text stays
    assert again.body == "Root cause: IB link"
    assert LogbookEntry.objects.get(pk=first.pk).body == "Root cause: IB link"


@pytest.mark.django_db
def test_no_restart_draft_without_a_preceding_interruption(run):
    second = telemetry_services.attempt_ensure(run=run, number=2, started_at=at(30))
    assert draft_services.restart_entry_draft(attempt=run.attempts.get(number=1)) is None
    assert draft_services.restart_entry_draft(attempt=second) is None


@pytest.mark.django_db
def test_restart_draft_through_ingest(project):
    """Through ingest.services.processing._apply, which calls logbook's restart_drafts_refresh
    once the batch's other records are written."""
    # given a job that reports attempt 11's interruption, then attempt 12's start and restore
    token, _ = ingest_services.token_create(project=project, name="job")

    def send(batch_id: str, attempt: int, events: list[dict[str, Any]]) -> None:
        document = {"batch_id": batch_id, "run": "opt", "attempt": attempt, "events": events}
        acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
        assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"

    send("b1", 11, [
        {"type": "attempt_started", "time": "2026-03-02T08:00:00Z"},
        {"type": "checkpoint_saved", "time": "2026-03-02T08:50:00Z", "step": 12000},
        {"type": "interruption", "time": "2026-03-02T09:00:00Z", "id": "int-11",
         "category": "NCCL Watchdog Timeouts", "hosts": ["h123"], "step": 12345},
    ])  # fmt: skip
    # when attempt 12 starts, in a batch of its own, and the batch is delivered twice
    started = [
        {"type": "attempt_started", "time": "2026-03-02T09:14:00Z", "resumed_from_step": 12000},
        {"type": "checkpoint_restored", "time": "2026-03-02T09:15:00Z", "step": 12000},
    ]
    send("b2", 12, started)
    send("b2-again", 12, started)

    # then one automatic restart entry tells the story
    entry = LogbookEntry.objects.get(kind="restart", is_automatic=True)
    assert entry.title == (
        "Attempt 12 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts on "
        "host h123; 345 steps lost, 14 min downtime"
    )
    assert entry.attempt.number == 12


# --- Pages -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_page_shows_entries_newest_first_with_correction_and_config_diff(client, run, alice):
    # given an entry corrected by a later debrief, and a config change
    first = entry_services.logbook_entry_create(
        run=run, user=alice, title="Blamed the NIC", kind="hardware", occurred_at=at(0)
    )
    debrief = entry_services.logbook_entry_create(
        run=run, user=alice, title="It was the switch", kind="debrief", occurred_at=at(2 * 1440)
    )
    entry_services.logbook_entry_update(
        entry=first, user=alice, version=1, changes={"corrected_by": debrief}
    )
    entry_services.logbook_entry_create(
        run=run, user=alice, title="Halve LR", kind="config_change", occurred_at=at(60),
        config_changes=[{"key": "lr", "before": "3e-4", "after": "1.5e-4"}],
    )  # fmt: skip
    client.force_login(alice)

    # when the logbook is opened
    response = client.get(url(run))

    # then newest first, the correction inline on the earlier entry, the diff as a table
    html = response.content.decode()
    assert response.status_code == 200
    order = [html.index(title) for title in ("It was the switch", "Halve LR", "Blamed the NIC")]
    assert order == sorted(order)
    earlier = html[html.index(f'id="entry-{first.pk}"') :]
    assert "Corrected by the debrief of" in earlier
    assert f'href="#entry-{debrief.pk}">It was the switch</a>' in earlier
    assert "Corrected by the debrief of 2026-03-04 08:00 UTC" in earlier
    assert '<td>lr</td><td class="before">3e-4</td><td>→</td><td class="after">1.5e-4</td>' in html


@pytest.mark.django_db
def test_alice_adds_an_entry_with_links_and_a_correction(client, run, alice):
    # given an earlier entry and records to link to
    earlier = entry_services.logbook_entry_create(
        run=run, user=alice, title="guess", occurred_at=at(0)
    )
    interruption = interruption_services.interruption_record(
        run=run, source_key="i1", occurred_at=at(1)
    )
    checkpoint_services.checkpoint_record(run=run, step=800)
    client.force_login(alice)

    # when she posts an entry that corrects the earlier one
    response = client.post(
        url(run),
        entry_post(
            title="Debrief", kind="debrief", body="It was **HBM**.", step="800", step_end="950",
            attempt="1", checkpoint="800", incident=str(interruption.pk), corrects=earlier.pk,
            occurred_at="2026-03-02 09:30", config_key=["ckpt_every", ""],
            config_before=["200", ""], config_after=["100", ""],
        ),
    )  # fmt: skip

    # then it is stored with its links, and the earlier entry points at it
    assert response.status_code == 302
    entry = LogbookEntry.objects.get(title="Debrief")
    assert (entry.author_name, entry.role, entry.is_automatic) == ("alice", "oncall", False)
    assert (entry.step, entry.step_end, entry.attempt.number) == (800, 950, 1)
    assert entry.checkpoint.step == 800 and entry.interruption == interruption
    assert entry.config_changes == [{"key": "ckpt_every", "before": "200", "after": "100"}]
    assert entry.occurred_at == at(90)
    assert LogbookEntry.objects.get(pk=earlier.pk).corrected_by == entry
    page = client.get(url(run)).content.decode()
    assert f'href="/incidents/{interruption.pk}/"' in page and "<strong>HBM</strong>" in page


@pytest.mark.django_db
def test_a_link_to_a_record_the_run_lacks_is_a_form_error(client, run, alice):
    client.force_login(alice)
    response = client.post(url(run), entry_post(attempt="7", checkpoint="5"))
    assert response.status_code == 400
    assert response.content.decode().count("This run has no such record.") == 2
    assert not LogbookEntry.objects.exists()


@pytest.mark.django_db
def test_edit_page_saves_shows_history_and_refuses_a_stale_save(client, run, alice):
    # given an entry at version 1 that someone else then edits
    entry = entry_services.logbook_entry_create(
        run=run, user=alice, title="Hang", occurred_at=at(1)
    )
    entry_services.logbook_entry_update(
        entry=entry, user=None, version=1, changes={"body": "automation: rank 17 silent"}
    )
    client.force_login(alice)
    edit = url(run, f"{entry.pk}/edit/")

    # when alice saves from version 1
    response = client.post(
        edit, entry_post(title="Hang at step 900", body="mine", occurred_at="2026-03-02 08:01",
                         version="1"),
    )  # fmt: skip

    # then she is told, her text is kept in the form, and the stored entry is unchanged
    html = response.content.decode()
    assert response.status_code == 409
    assert "changed by automation" in html and "Nothing was saved" in html
    assert 'value="Hang at step 900"' in html and ">\nmine</textarea>" in html
    assert 'name="version" value="2"' in html
    assert LogbookEntry.objects.get(pk=entry.pk).body == "automation: rank 17 silent"

    # when she saves again, knowingly, from version 2
    response = client.post(
        edit, entry_post(title="Hang at step 900", body="mine", occurred_at="2026-03-02 08:01",
                         version="2"),
    )  # fmt: skip

    # then it is saved and the history lists all three changes
    assert response.status_code == 302
    assert LogbookEntry.objects.get(pk=entry.pk).title == "Hang at step 900"
    page = client.get(edit).content.decode()
    assert page.count('class="audit-event"') == 3
    assert '<span class="before">automation: rank 17 silent</span>' in page


@pytest.mark.django_db
def test_xss_in_title_body_and_config_executes_nothing(client, run, alice):
    payload = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    entry_services.logbook_entry_create(
        run=run, user=alice, title=payload, occurred_at=at(1),
        body=f"{payload}\n\n[click](javascript:alert(3)) [data](data:text/html,<b>x</b>)\n\n"
        '<svg onload="alert(4)"></svg>',
        config_changes=[{"key": payload, "before": "<b>1</b>", "after": '"><script>x</script>'}],
    )  # fmt: skip
    client.force_login(alice)

    html = client.get(url(run)).content.decode()
    section = html[html.index('id="entries"') :]

    assert "<script>" not in section and "<img" not in section and "<svg" not in section
    assert "javascript:" not in section and "data:text" not in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    exported = client.get(f"/runs/{run.pk}/logbook.md")
    assert exported["Content-Type"].startswith("text/markdown")
    assert exported["Content-Disposition"] == 'attachment; filename="r12-logbook.md"'


@pytest.mark.django_db
def test_viewer_reads_but_cannot_write(client, run, alice, bob):
    entry = entry_services.logbook_entry_create(
        run=run, user=alice, title="seen", occurred_at=at(1)
    )
    client.force_login(bob)

    page = client.get(url(run))
    assert page.status_code == 200 and "seen" in page.content.decode()
    assert 'id="entry-form"' not in page.content.decode()
    assert client.get(f"/runs/{run.pk}/logbook.md").status_code == 200
    assert client.get(url(run, f"{entry.pk}/edit/")).status_code == 200
    assert client.post(url(run), entry_post()).status_code == 403
    assert client.post(url(run, f"{entry.pk}/edit/"), entry_post(version="1")).status_code == 403
    assert client.post(url(run, f"{entry.pk}/edit/"), {"action": "delete"}).status_code == 403
    assert client.post(url(run, "import/"), {}).status_code == 403
    assert list(LogbookEntry.objects.values_list("title", flat=True)) == ["seen"]


@pytest.mark.django_db
def test_outsider_gets_404_and_anonymous_is_sent_to_log_in(client, run, alice, charlie):
    entry = entry_services.logbook_entry_create(
        run=run, user=alice, title="secret", occurred_at=at(1)
    )
    paths = [url(run), url(run, f"{entry.pk}/edit/"), f"/runs/{run.pk}/logbook.md"]
    client.force_login(charlie)
    for path in paths:
        assert client.get(path).status_code == 404, path
    assert client.post(url(run), entry_post()).status_code == 404
    assert client.post(url(run, "import/"), {}).status_code == 404
    assert client.post(url(run, f"{entry.pk}/edit/"), {"action": "delete"}).status_code == 404
    client.logout()
    for path in paths:
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client.post(url(run), entry_post()).status_code == 302
    assert LogbookEntry.objects.count() == 1


@pytest.mark.django_db
def test_an_entry_of_another_run_is_404_under_this_run(client, run, alice, project):
    other = telemetry_services.run_upsert(project=project, name="other", info={})
    entry = entry_services.logbook_entry_create(run=other, user=alice, title="x", occurred_at=at(1))
    client.force_login(alice)
    assert client.get(url(run, f"{entry.pk}/edit/")).status_code == 404


@pytest.mark.django_db
def test_import_page_reports_success_and_errors(client, run, alice):
    from django.core.files.uploadedfile import SimpleUploadedFile

    text = "## 2026-03-02 08:00 UTC [on-call: Stephen] Requeued\n\n- **Kind:** restart\n"
    client.force_login(alice)

    def upload(content: str) -> str:
        file = SimpleUploadedFile("log.md", content.encode(), content_type="text/markdown")
        response = client.post(url(run, "import/"), {"file": file}, follow=True)
        return response.content.decode()

    assert "Imported 1 new entry." in upload(text)
    assert "Imported 0 new entries (the others were already" in upload(text)
    assert "Nothing was imported. Line 1: an entry heading" in upload("## 2026-03-02 bad\n")
    assert LogbookEntry.objects.filter(run=run).count() == 1


def _entries(run: Run, user: Any, count: int) -> None:
    interruption = interruption_services.interruption_record(
        run=run, source_key="q", occurred_at=at(0)
    )
    checkpoint = checkpoint_services.checkpoint_record(run=run, step=10)
    attempt = run.attempts.get(number=1)
    target = entry_services.logbook_entry_create(
        run=run, user=user, title="late", occurred_at=at(9999)
    )
    for index in range(count):
        entry_services.logbook_entry_create(
            run=run, user=user, title=f"e{index}", occurred_at=at(index), attempt=attempt,
            checkpoint=checkpoint, interruption=interruption, corrected_by=target, step=index,
            config_changes=[{"key": "lr", "before": "1", "after": "2"}], body="**b**",
        )  # fmt: skip


@pytest.mark.django_db
def test_query_counts_do_not_grow_with_entries(client, run, alice, query_budget):
    client.force_login(alice)
    costs: dict[str, list[int]] = {"page": [], "markdown": [], "edit": []}
    # given 3 entries, then 34
    for count in (2, 30):
        _entries(run, alice, count)
        entry = LogbookEntry.objects.filter(run=run).first()
        for what, path in (
            ("page", url(run)),
            ("markdown", f"/runs/{run.pk}/logbook.md"),
            ("edit", url(run, f"{entry.pk}/edit/")),
        ):
            cost, response = query_budget.run(lambda path=path: client.get(path))
            assert response.status_code == 200, path
            costs[what].append(cost)
    # then each page costs the same queries (constant in the entries)
    for what, (small, big) in costs.items():
        query_budget.constant(small=small, big=big, guards=f"the entries ({what})")


# --- In a browser ----------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_shift_in_the_logbook_in_a_browser(
    browser, live_server, alice, project, login_page, console_errors
):
    # given a run with an earlier entry
    run = telemetry_services.run_upsert(project=project, name="r12", info={})
    earlier = entry_services.logbook_entry_create(
        run=run, user=alice, title="Suspect the NIC on h123", kind="hardware", occurred_at=at(0)
    )
    page = browser.new_page()
    errors = console_errors(page)
    login_page(page, live_server.url, "alice")

    # when alice writes an entry with Markdown and a config change
    page.goto(f"{live_server.url}/runs/{run.pk}/logbook/")
    page.click("#new-entry summary")
    page.select_option("#id_kind", "debrief")
    page.fill("#id_title", "Debrief of the hang")
    page.fill("#id_body", "Rank **17** never logged.\n\n- swapped `h123`")
    page.locator('input[name="config_key"]').first.fill("lr")
    page.locator('input[name="config_before"]').first.fill("3e-4")
    page.locator('input[name="config_after"]').first.fill("1.5e-4")
    page.click("#entry-form button[type=submit]")
    page.wait_for_selector("article.entry[data-kind=debrief]")
    new = LogbookEntry.objects.get(title="Debrief of the hang")

    # and edits it
    page.click(f"#entry-{new.pk} .edit-link")
    page.fill("#id_title", "Debrief of the hang at step 900")
    page.click("#entry-form button[value=save]")
    page.wait_for_selector(f"#entry-{new.pk}")

    # and marks the earlier entry as corrected by it
    page.click(f"#entry-{earlier.pk} .edit-link")
    page.select_option("#id_corrected_by", str(new.pk))
    page.click("#entry-form button[value=save]")
    page.wait_for_selector(f"#entry-{earlier.pk} .correction")

    # then the page shows all of it, times in the reader's zone
    entry = page.locator(f"#entry-{new.pk}")
    assert "Debrief of the hang at step 900" in entry.inner_text()
    assert entry.locator(".body strong").inner_text() == "17"
    assert entry.locator("table.config-diff td.after").inner_text() == "1.5e-4"
    correction = page.locator(f"#entry-{earlier.pk} .correction").inner_text()
    assert "Corrected by the debrief of" in correction
    assert "Debrief of the hang at step 900" in correction
    # the time is in the display zone (UTC by default), labelled
    assert " UTC" in page.locator(f"#entry-{new.pk} h3").inner_text()

    # and the export downloads the chronicle, newest first
    with page.expect_download() as download_info:
        page.click("#export-link")
    text = download_info.value.path().read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert "[on-call: alice] Debrief of the hang at step 900" in headings[0]
    assert "Suspect the NIC on h123" in headings[1]
    assert "- **Corrected by:** the debrief of" in text
    assert errors == []


@pytest.mark.django_db
def test_a_long_logbook_shows_the_newest_entries_a_page_at_a_time(client, run, alice):
    # given more entries than a page holds (a restart entry per attempt at Llama 3 scale)
    from logbook.views.logbook import LOGBOOK_PAGE_SIZE

    start = datetime(2026, 9, 1, tzinfo=UTC)
    LogbookEntry.objects.bulk_create(
        [
            LogbookEntry(run=run, author_name="on-call", occurred_at=start + timedelta(hours=i),
                         title=f"restart number {i:04d}", source_key=f"page-{i}")
            for i in range(LOGBOOK_PAGE_SIZE + 5)
        ]
    )  # fmt: skip
    client.force_login(alice)

    # when the logbook is opened, then the next page
    # (the entries' section only: the form lists every entry as one it may correct)
    first, second = (
        client.get(f"/runs/{run.pk}/logbook/{query}").content.decode().split('id="entries"')[1]
        for query in ("", "?page=2")
    )

    # then the first page has the newest entries and a link on, the second the oldest
    newest, oldest = f"restart number {LOGBOOK_PAGE_SIZE + 4:04d}", "restart number 0000"
    assert newest in first and oldest not in first
    assert 'rel="next"' in first
    assert oldest in second and newest not in second
