"""The restart draft's text from the facts of one restart (pure: no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from logbook.restart_drafts import RestartFacts, duration_text, hosts_text, restart_text

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)

# Attempt 11 reached step 12,345 and hit an NCCL watchdog timeout on h123 at T0 + 60 min;
# attempt 12 started at T0 + 74 min from the checkpoint at step 12,000.
OPT = RestartFacts(
    attempt_number=12,
    attempt_started_at=T0 + timedelta(minutes=74),
    previous_number=11,
    cause="NCCL Watchdog Timeouts",
    interrupted_at=T0 + timedelta(minutes=60),
    planned=False,
    incident_id=7,
    message="",
    hosts=["h123"],
    resume_step=12_000,
    checkpoint_found=True,
    checkpoint_uri="s3://ckpt/12000",
    lost_steps=None,
    last_step=12_345,
)


def test_the_title_tells_what_happened_and_what_it_cost():
    text = restart_text(OPT)

    # 12,345 - 12,000 = 345 steps lost; 74 - 60 = 14 min down.
    assert text.title == (
        "Attempt 12 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts on "
        "host h123; 345 steps lost, 14 min downtime"
    )
    assert text.step_end == 12_345


def test_the_body_lists_each_fact_with_its_formula():
    lines = restart_text(OPT).body.splitlines()

    assert lines[0] == (
        "- **Interruption:** NCCL Watchdog Timeouts at 2026-03-01 09:00 UTC (unexpected), "
        "incident #7"
    )
    assert lines[1] == "- **Hosts:** h123"
    assert lines[2] == "- **Resumed from:** checkpoint at step 12,000 (`s3://ckpt/12000`)"
    assert lines[3] == (
        "- **Steps lost:** 345 = last step attempt 11 reached (12,345) \u2212 resume step (12,000)"
    )
    assert lines[4] == (
        "- **Downtime:** 14 min = attempt 12 start (2026-03-01 09:14 UTC) \u2212 interruption "
        "(2026-03-01 09:00 UTC)"
    )
    assert lines[-1].startswith("*Drafted automatically")


def test_reported_lost_steps_win_over_the_computed_ones():
    text = restart_text(replace(OPT, lost_steps=1, message="watchdog fired"))

    assert text.title.endswith("; 1 step lost, 14 min downtime")
    assert "- **Steps lost:** 1 (as reported with the interruption)" in text.body
    assert "incident #7: watchdog fired" in text.body


def test_without_a_restore_or_a_start_time_the_draft_says_less():
    text = restart_text(
        replace(OPT, resume_step=None, checkpoint_found=False, attempt_started_at=None)
    )

    # Nothing to subtract from: no lost steps, no downtime, no range.
    assert text.title == "Attempt 12 started after NCCL Watchdog Timeouts on host h123"
    assert "- **Resumed from:** no checkpoint restore reported" in text.body
    assert "Steps lost" not in text.body and "Downtime" not in text.body
    assert text.step_end is None


def test_a_resume_step_without_a_checkpoint_row_is_named_as_a_step():
    text = restart_text(replace(OPT, checkpoint_found=False, checkpoint_uri=""))

    assert text.title.startswith("Attempt 12 resumed from step 12,000 after")
    assert "- **Resumed from:** step 12,000" in text.body


def test_no_steps_lost_means_no_lost_range():
    text = restart_text(replace(OPT, last_step=12_000))

    assert "0 steps lost" in text.title
    assert text.step_end is None


def test_the_title_fits_the_column():
    text = restart_text(replace(OPT, cause="x" * 400))

    assert len(text.title) == 300


def test_durations_and_host_lists_read_naturally():
    assert duration_text(14 * 60) == "14 min"
    assert duration_text(119 * 60) == "119 min"
    assert duration_text(150 * 60) == "2.5 h"
    assert hosts_text([]) == ""
    assert hosts_text(["a"]) == " on host a"
    assert hosts_text(["a", "b", "c", "d", "e"]) == " on hosts a, b, c and 2 more"
