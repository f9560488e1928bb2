"""The straggler ledger: ranks whose scores stay low become records naming their hardware;
a later attempt that moves the rank off that host resolves them."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from logbook.models import StragglerRecord
from telemetry import rank_timings
from telemetry import services as telemetry_services
from telemetry.models import Attempt
from telemetry.selectors import ranks as rank_selectors
from telemetry.straggler_scores import individual_scores, relative_scores, stragglers

# Windows of history the individual score's "own best so far" looks back over (a day of
# 10-minute buckets): the whole attempt would mean reading every bucket on every pass.
INDIVIDUAL_HISTORY_WINDOWS = 144
# Above this share of ranks, low individual scores are the job slowing down, not stragglers.
JOB_WIDE_SHARE = 0.5


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
        for rank in set(slow_relative) | set(slow_individual):
            entry = found.setdefault(
                rank,
                {"sections": [], "relative": 1.0, "individual": None, "first": window_times[0]},
            )
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
                "windows": settings.RANK_STRAGGLER_WINDOWS,
                "first_window_at": entry["first"],
                "last_window_at": entry["last"],
            },
        )
        if not created and entry["last"] > record.last_window_at:
            # The same straggler, still slow: extend it rather than open another.
            record.windows += 1
            record.last_window_at = entry["last"]
            record.relative_score = min(record.relative_score, entry["relative"])
            record.sections = sorted(set(record.sections) | set(entry["sections"]))
            record.save(update_fields=["windows", "last_window_at", "relative_score", "sections"])
        records.append(record)
    telemetry_services.run_data_version_bump(run_id=attempt.run_id)
    telemetry_services.fleet_version_bump(project_id=attempt.run.project_id)
    return records


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
    pending = rank_timings.attempts_to_roll_up()
    for attempt_id, since in pending:
        rank_timings.rank_timings_rollup(attempt_id=attempt_id, since=since)
        stragglers_detect(attempt_id=attempt_id)
        stragglers_resolve(attempt_id=attempt_id)
        # `now` was read before the rollup: rows that arrived during it are taken next time.
        rank_timings.rolled_up_mark(attempt_id=attempt_id, at=now)
    return len(pending)
