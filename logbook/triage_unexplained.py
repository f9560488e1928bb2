"""The suggestion for a failure that says nothing about its cause: an MLflow run set to FAILED
carries no message, and when no GPU event, hang or straggler around it points anywhere either,
auto-triage still has something to tell on-call, like for any other incident. Pure."""

from __future__ import annotations

from datetime import datetime

from logbook.autotriage import EvidenceItem, Suggestion
from logbook.taxonomy import UNKNOWN_SLUG

# Low on purpose: nothing points anywhere; the suggestion is a where-to-look, not a verdict.
CONFIDENCE = 0.1


def unexplained_suggestion(
    *, occurred_at: datetime, step: int | None, source: str, run_url: str
) -> Suggestion:
    """ "Unknown, under investigation", with the one fact there is (who said the run failed, at
    which step) as its evidence and a note on where the reason is."""
    at_step = f" at step {step:,}" if step is not None else ""
    return Suggestion(
        category=UNKNOWN_SLUG,
        component="",
        hosts=[],
        devices=[],
        confidence=CONFIDENCE,
        evidence=[
            EvidenceItem(
                kind="message",
                at=occurred_at,
                text=f"{source} set the run to FAILED{at_step} and gives no reason",
                url=run_url,
                category=UNKNOWN_SLUG,
                weight=CONFIDENCE,
            )
        ],
        note=(
            f"{source} sends no reason, and no GPU event, hang or straggler near the failure "
            "points at one. The cause is in the job's own log around the last step: its "
            "traceback (an NCCL timeout, a CUDA error, an OOM) files it. Report crashes with "
            "chronicle_client's callbacks to have the message read here."
        ),
    )
