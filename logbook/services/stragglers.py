"""The straggler ledger: ranks whose scores stay low become records naming their hardware;
a later attempt that moves the rank off that host resolves them."""

from __future__ import annotations

import math
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from logbook.models import StragglerRecord
from logbook.services import autotriage
from telemetry import services as telemetry_services
from telemetry.models import Attempt
from telemetry.selectors import ranks as rank_selectors
from telemetry.services import rank_timings
from telemetry.straggler_scores import (
    fastest_time,
    individual_scores,
    relative_scores,
    stragglers,
    streak_start,
)

# Windows of history the individual score's "own best so far" looks back over (a day of
# 10-minute buckets): the whole attempt would mean reading every bucket on every pass.
INDIVIDUAL_HISTORY_WINDOWS = 144
# Above this share of ranks, low individual scores are the job slowing down, not stragglers.
JOB_WIDE_SHARE = 0.5

# pg_try_advisory_lock key of the periodic rank-timings pass (any fixed 64-bit number).
RANK_PASS_LOCK = 0x52414E4B50415353  # 'RANKPASS'


@transaction.atomic
def stragglers_detect(*, attempt_id: int) -> list[StragglerRecord]:
    """Score every rank of the attempt in each of its last RANK_STRAGGLER_WINDOWS buckets, per
    section, and record (or extend) a straggler for each rank below the threshold in all of
    them by either score. Idempotent: one record per (attempt, rank), updated in place."""
    attempt = Attempt.objects.select_related("run").get(pk=attempt_id)
    needed = settings.RANK_STRAGGLER_WINDOWS
    threshold = settings.RANK_STRAGGLER_THRESHOLD
    found: dict[int, dict] = {}
    for section in rank_selectors.rank_timing_sections_for_attempt(attempt_id=attempt_id):
        if section in settings.RANK_SCORE_EXCLUDE:
            continue
        history = rank_selectors.rank_windows(
            attempt_id=attempt_id, section=section, count=INDIVIDUAL_HISTORY_WINDOWS + needed
        )
        if len(history) < needed:
            continue
        best: dict[int, float] = {}
        relative_windows, individual_windows = [], []
        for index, (_, means) in enumerate(history):
            for rank, value in means.items():
                if value > 0:
                    best[rank] = min(best.get(rank, value), value)
            if index >= len(history) - needed:
                relative_windows.append(relative_scores(means))
                individual_windows.append(individual_scores(means, best))
        slow_relative = stragglers(relative_windows, threshold=threshold, windows_needed=needed)
        slow_individual = stragglers(individual_windows, threshold=threshold, windows_needed=needed)
        if len(slow_individual) > len(history[-1][1]) * JOB_WIDE_SHARE:
            # Most ranks slower than their own best at once: the job slowed (data, network,
            # a checkpoint), not a rank. The relative score is what points at one.
            slow_individual = {}
        window_times = [start for start, _ in history[-needed:]]
        fastest: list[float | None] = []  # computed once, for the first rank that needs it
        for rank in set(slow_relative) | set(slow_individual):
            first, windows = window_times[0], needed
            if rank in slow_relative:
                # Where the slowness began, not where the last `needed` windows begin: a
                # pass that sees hours of a rank's timings at once (a backfill, a late
                # worker, the demo) would otherwise date a straggler to its last half hour.
                fastest = fastest or _fastest(history)
                start = streak_start(_relative_history(history, fastest, rank), threshold=threshold)
                first, windows = history[start][0], len(history) - start
            entry = found.setdefault(
                rank,
                {"sections": [], "relative": 1.0, "individual": None, "first": first,
                 "windows": windows},
            )  # fmt: skip
            entry["first"] = min(entry["first"], first)
            entry["windows"] = max(entry["windows"], windows)
            entry["sections"].append(section)
            entry["relative"] = min(
                entry["relative"], min(window[rank] for window in relative_windows)
            )
            if rank in slow_individual:
                low = slow_individual[rank]
                entry["individual"] = (
                    low if entry["individual"] is None else min(entry["individual"], low)
                )
            entry["last"] = window_times[-1]
    if not found:
        return []
    placements = rank_selectors.rank_placements(attempt_id=attempt_id)
    records = []
    for rank, entry in sorted(found.items()):
        host_name, device_uuid = placements.get(rank, ("", ""))
        project_id = attempt.run.project_id
        host = (
            telemetry_services.hosts_ensure(project=project_id, names=[host_name])[0]
            if host_name
            else None
        )
        device = (
            telemetry_services.devices_ensure(project=project_id, uuids=[device_uuid])[0]
            if device_uuid
            else None
        )
        record, created = StragglerRecord.objects.get_or_create(
            attempt=attempt,
            rank=rank,
            defaults={
                "run": attempt.run,
                "host": host,
                "device": device,
                "sections": sorted(entry["sections"]),
                "relative_score": entry["relative"],
                "individual_score": entry["individual"],
                "windows": entry["windows"],
                "first_window_at": entry["first"],
                "last_window_at": entry["last"],
            },
        )
        if not created and entry["last"] > record.last_window_at:
            # The same straggler, still slow: extend it rather than open another.
            record.windows = max(record.windows + 1, entry["windows"])
            record.first_window_at = min(record.first_window_at, entry["first"])
            record.last_window_at = entry["last"]
            record.relative_score = min(record.relative_score, entry["relative"])
            record.sections = sorted(set(record.sections) | set(entry["sections"]))
            record.save(
                update_fields=[
                    "windows", "first_window_at", "last_window_at", "relative_score", "sections"
                ]
            )  # fmt: skip
        records.append(record)
    if records:
        # A slow rank names the culprit of the attempt's open interruptions.
        autotriage.run_evidence_arrived(
            run_id=attempt.run_id, since=min(record.first_window_at for record in records)
        )
    telemetry_services.run_data_version_bump(run_id=attempt.run_id)
    telemetry_services.fleet_version_bump(project_id=attempt.run.project_id)
    return records


def _fastest(history: list[tuple[datetime, dict[int, float]]]) -> list[float | None]:
    """Each window's fastest time, None for a window without one."""
    return [fastest_time(means) for _, means in history]


def _relative_history(
    history: list[tuple[datetime, dict[int, float]]], fastest: list[float | None], rank: int
) -> list[float | None]:
    """The rank's relative score in each window of `history` (None where it has no time)."""
    scores: list[float | None] = []
    for (_, means), best in zip(history, fastest, strict=True):
        t = means.get(rank)
        ok = best is not None and t is not None and t > 0 and math.isfinite(t)
        scores.append(best / t if ok else None)
    return scores


@transaction.atomic
def stragglers_resolve(*, attempt_id: int, now: datetime | None = None) -> int:
    """Resolve the run's open records of earlier attempts whose rank this attempt runs on
    other hardware (another host, or another device when devices are known). Returns how
    many were resolved."""
    attempt = Attempt.objects.get(pk=attempt_id)
    placements = rank_selectors.rank_placements(attempt_id=attempt_id)
    if not placements:
        return 0
    open_records = StragglerRecord.objects.filter(
        run_id=attempt.run_id,
        status=StragglerRecord.Status.OPEN,
        attempt__number__lt=attempt.number,
    ).select_related("host", "device")
    resolved = 0
    for record in open_records:
        if record.rank not in placements:
            continue
        host_name, device_uuid = placements[record.rank]
        same_host = record.host is not None and host_name == record.host.name
        same_device = record.device is not None and device_uuid == record.device.uuid
        moved = not same_host if record.device is None or not device_uuid else not same_device
        if moved:
            record.status = StragglerRecord.Status.RESOLVED
            record.resolved_at = now or timezone.now()
            record.resolved_by_attempt = attempt
            record.save(update_fields=["status", "resolved_at", "resolved_by_attempt"])
            resolved += 1
    if resolved:
        telemetry_services.run_data_version_bump(run_id=attempt.run_id)
        telemetry_services.fleet_version_bump(project_id=attempt.run.project_id)
    return resolved


def rank_timings_refresh(*, now: datetime | None = None) -> int:
    """The periodic pass: for every attempt with rank timings received since its last pass,
    roll them up (telemetry), then update its straggler records and resolve the run's older
    ones, and mark where it left off. Returns how many attempts it visited."""
    now = now or timezone.now()
    # One pass at a time: the beat sends one every 30 s, and a long one (a backfill, a
    # fresh demo's first hours of timings) must not be joined by the next, which would
    # redo its work and hold a second worker process; with two, nothing else (new batches,
    # hang checks) ran until both ended. A pass that finds one running leaves it the work.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [RANK_PASS_LOCK])
        if not cursor.fetchone()[0]:
            return 0
    try:
        pending = rank_timings.attempts_to_roll_up()
        for attempt_id, since in pending:
            rank_timings.rank_timings_rollup(attempt_id=attempt_id, since=since)
            stragglers_detect(attempt_id=attempt_id)
            stragglers_resolve(attempt_id=attempt_id)
            # `now` was read before the rollup: rows that arrived during it are taken next
            # time.
            rank_timings.rolled_up_mark(attempt_id=attempt_id, at=now)
        return len(pending)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [RANK_PASS_LOCK])
