"""Hang detection: a run still reporting (heartbeats, any batch) whose step stopped advancing.

Threshold per run: its `hang_after_s` (at least 60 s, as the ingest contract accepts it), else
10 x its median step time, at least 5 minutes. A hang needs evidence that the job is alive
after its last step (`job_alive`): batches (heartbeats, rank timings, anything) for at least
half the threshold after the step stopped, the latest within the last half threshold. A run
that went silent altogether (the README's two-point example, a one-batch run, a job killed
without ending its attempt) is the webhooks' "stopped reporting" case instead, never a hang. A hang
opens one interruption per (attempt, last step), category NCCL Watchdog Timeouts until
on-call triages it, naming the last step and, when rank timings exist, the ranks that
stopped reporting first (MegaScale: the hung ranks are the ones that did not log).
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta
from itertools import pairwise

from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from logbook.models import IncidentSource, Interruption
from logbook.services.interruptions import interruption_record
from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Attempt, RankStepStats, Run, StepStart
from telemetry.selectors import ranks as rank_selectors

HANG_MIN = timedelta(minutes=5)
# The least `hang_after_s` the ingest contract accepts: runs that set one are looked at from
# this age on, or a threshold under HANG_MIN would be honoured only at HANG_MIN.
HANG_AFTER_MIN = timedelta(seconds=60)
HANG_STEP_MULTIPLE = 10
HANG_CATEGORY = "NCCL Watchdog Timeouts"
# Median over this many recent steps.
STEP_SAMPLE = 200
# How many of the first-silent ranks the interruption names.
RANKS_NAMED = 16


def median_step_s(attempt: Attempt) -> float | None:
    """The attempt's median step time: from the `step` section of its rank timings, else
    from its step start times."""
    medians = list(
        RankStepStats.objects.filter(attempt=attempt, section="step")
        .order_by("-step")
        .values_list("median_s", flat=True)[:STEP_SAMPLE]
    )
    if medians:
        return float(statistics.median(medians))
    starts = list(
        StepStart.objects.filter(attempt=attempt)
        .order_by("-step")
        .values_list("step", "started_at")[: STEP_SAMPLE + 1]
    )
    gaps = [
        (later - earlier).total_seconds() / (step_b - step_a)
        for (step_b, later), (step_a, earlier) in pairwise(starts)
        if step_b > step_a
    ]
    return float(statistics.median(gaps)) if gaps else None


def hang_threshold(run: Run, attempt: Attempt) -> timedelta:
    if run.hang_after_s:
        return timedelta(seconds=run.hang_after_s)
    median = median_step_s(attempt)
    if median is None:
        return HANG_MIN
    return max(HANG_MIN, timedelta(seconds=HANG_STEP_MULTIPLE * median))


def job_alive(
    *, last_step_at: datetime, last_seen_at: datetime, now: datetime, threshold: timedelta
) -> bool:
    """Whether the job showed it is alive while its step stood still: it kept sending for at
    least half the threshold after its last step (a killed job's trailing batch a second
    later is not that), and its latest batch is within the last half threshold (or
    RUN_STALL_AFTER, if shorter). Pure."""
    half = threshold / 2
    return last_seen_at - last_step_at >= half and now - last_seen_at <= min(half, RUN_STALL_AFTER)


def hangs_check(*, now: datetime | None = None) -> list[Interruption]:
    """Open a "hang suspected" interruption for each running run whose step has not moved for
    longer than its threshold while it was seen within RUN_STALL_AFTER. Once per (attempt,
    last step): the source key holds both, so a run that advances and hangs again opens
    another."""
    now = now or timezone.now()
    latest = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    candidates = (
        Run.objects.filter(
            Q(hang_after_s__isnull=True, last_step_at__lt=now - HANG_MIN)
            | Q(hang_after_s__isnull=False, last_step_at__lt=now - HANG_AFTER_MIN),
            last_seen_at__gte=now - RUN_STALL_AFTER,
            # Seen after the step stopped: a run that went silent with it is not hung.
            last_seen_at__gt=F("last_step_at"),
            last_step__isnull=False,
        )
        .annotate(
            latest_status=Subquery(latest.values("status")[:1]),
            latest_pk=Subquery(latest.values("pk")[:1]),
        )
        .filter(latest_status=Attempt.Status.RUNNING)
        .select_related("project")
    )
    opened = []
    for run in candidates:
        attempt = Attempt.objects.get(pk=run.latest_pk)
        assert run.last_step_at is not None and run.last_seen_at is not None
        threshold = hang_threshold(run, attempt)
        if now - run.last_step_at <= threshold:
            continue
        if not job_alive(
            last_step_at=run.last_step_at,
            last_seen_at=run.last_seen_at,
            now=now,
            threshold=threshold,
        ):
            continue
        key = f"hang:{attempt.pk}:{run.last_step}"
        # Its source: the hang may have joined an incident another signal opened.
        if IncidentSource.objects.filter(run=run, source_key=key).exists():
            continue
        first_silent, hosts = _first_silent(attempt)
        message = (
            f"Hang suspected: step stuck at {run.last_step} for "
            f"{_minutes(now - run.last_step_at)} (threshold {_minutes(threshold)}) "
            f"while the run kept reporting (last report {_seconds(now - run.last_seen_at)} ago)."
        )
        if first_silent:
            message += " Ranks that stopped reporting first: " + ", ".join(
                f"{rank} ({host})" if host else str(rank) for rank, host in first_silent
            )
        opened.append(
            interruption_record(
                run=run,
                source_key=key,
                occurred_at=run.last_step_at,
                detected_at=now,
                attempt=attempt,
                category=HANG_CATEGORY,
                component="Hang suspected",
                planned=False,
                hosts=hosts,
                message=message,
                step=run.last_step,
                ends_attempt=False,
            )
        )
    return opened


def _seconds(span: timedelta) -> str:
    return f"{max(0.0, span.total_seconds()):.0f} s"


def _minutes(span: timedelta) -> str:
    """'1.5 min': a 60-second threshold read as '1 min' beside '2 min' stuck looks wrong."""
    return f"{span.total_seconds() / 60:.1f}".removesuffix(".0") + " min"


def _first_silent(attempt: Attempt) -> tuple[list[tuple[int, str]], list[str]]:
    """The ranks whose last reported step is behind the others', slowest first, with their
    hosts; empty when every rank stopped at the same step (nothing to point at)."""
    last = rank_selectors.ranks_last_reported(attempt_id=attempt.pk)
    if not last or len(set(last.values())) < 2:
        return [], []
    top = max(last.values())
    behind = sorted((step, rank) for rank, step in last.items() if step < top)[:RANKS_NAMED]
    placements = rank_selectors.rank_placements(attempt_id=attempt.pk)
    named = [(rank, placements.get(rank, ("", ""))[0]) for _, rank in behind]
    hosts = sorted({host for _, host in named if host})
    return named, hosts
