"""The text of the automatic "restart" logbook entry, written from the facts of one restart
("Attempt 12 resumed from checkpoint at step 12,000 after NCCL Watchdog Timeouts on host
h123; 345 steps lost, 14 min downtime"). Pure: no ORM. The service
(logbook.services.drafts) gathers the facts and decides when to write the entry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from logbook.chronicles import heading_time
from telemetry import display

MINUS = "\u2212"
TITLE_MAX_LENGTH = 300  # LogbookEntry.title


@dataclass(frozen=True)
class RestartFacts:
    attempt_number: int
    attempt_started_at: datetime | None
    previous_number: int
    cause: str
    interrupted_at: datetime
    planned: bool
    incident_id: int
    message: str
    hosts: list[str]
    # The step the attempt resumed from, and whether a checkpoint row exists for it.
    resume_step: int | None
    checkpoint_found: bool
    checkpoint_uri: str
    # As reported with the interruption (None: not reported).
    lost_steps: int | None
    # The last step the interrupted attempt reached (None: unknown).
    last_step: int | None


@dataclass(frozen=True)
class RestartText:
    title: str
    body: str
    # The lost range ends here: from the resume step to the last step reached.
    step_end: int | None


# The site's one way to write a duration: "9 s", "14 min", "2.5 h".
duration_text = display.duration


def hosts_text(names: list[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f" on host{'s' if len(names) > 1 else ''} {shown}"


def restart_text(facts: RestartFacts) -> RestartText:
    """The title, the Markdown body (one fact a line, each cost with its formula) and the end
    of the lost step range."""
    number, resume_step = facts.attempt_number, facts.resume_step
    facts_md = [
        f"- **Interruption:** {facts.cause} at {heading_time(facts.interrupted_at)} "
        f"({'planned' if facts.planned else 'unexpected'}), incident "
        f"#{facts.incident_id}" + (f": {facts.message}" if facts.message else ""),
    ]
    if facts.hosts:
        facts_md.append(f"- **Hosts:** {', '.join(facts.hosts)}")
    if resume_step is None:
        resumed = f"Attempt {number} started"
        facts_md.append("- **Resumed from:** no checkpoint restore reported")
    elif facts.checkpoint_found:
        resumed = f"Attempt {number} resumed from checkpoint at step {resume_step:,}"
        facts_md.append(
            f"- **Resumed from:** checkpoint at step {resume_step:,}"
            + (f" (`{facts.checkpoint_uri}`)" if facts.checkpoint_uri else "")
        )
    else:
        resumed = f"Attempt {number} resumed from step {resume_step:,}"
        facts_md.append(f"- **Resumed from:** step {resume_step:,}")

    costs: list[str] = []
    last_step = facts.last_step
    lost = facts.lost_steps
    derived = (
        max(0, last_step - resume_step)
        if last_step is not None and resume_step is not None
        else None
    )
    if lost is not None and lost != derived:
        facts_md.append(f"- **Steps lost:** {lost:,} (as reported with the interruption)")
    elif derived is not None:
        # The incident holds this very number (filled from the restart when not reported).
        lost = derived
        facts_md.append(
            f"- **Steps lost:** {lost:,} = last step attempt {facts.previous_number} reached "
            f"({last_step:,}) {MINUS} resume step ({resume_step:,})"
        )
    if lost is not None:
        costs.append(f"{lost:,} step{'' if lost == 1 else 's'} lost")
    if facts.attempt_started_at is not None:
        downtime_s = max(0.0, (facts.attempt_started_at - facts.interrupted_at).total_seconds())
        downtime = duration_text(downtime_s)
        costs.append(f"{downtime} downtime")
        facts_md.append(
            f"- **Downtime:** {downtime} = attempt {number} start "
            f"({heading_time(facts.attempt_started_at)}) {MINUS} interruption "
            f"({heading_time(facts.interrupted_at)})"
        )
    title = f"{resumed} after {facts.cause}{hosts_text(facts.hosts)}"
    if costs:
        title += "; " + ", ".join(costs)
    body = "\n".join(
        [
            *facts_md,
            "",
            "*Drafted automatically from the attempt's start, restore and interruption "
            "records; on-call may edit it.*",
        ]
    )
    return RestartText(
        title=title[:TITLE_MAX_LENGTH],
        body=body,
        step_end=last_step if lost and resume_step is not None and last_step else None,
    )
