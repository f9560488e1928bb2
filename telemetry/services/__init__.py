"""Writes for runs, attempts, topology and metric points. Every function is idempotent on its
natural key, because an ingest batch may be processed more than once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from psycopg.errors import UniqueViolation

from telemetry.models import (
    Attempt,
    Device,
    Host,
    JobInterval,
    Membership,
    MetricPoint,
    MetricSeries,
    Project,
    Run,
    StepStart,
)

# --- Versions: what the cached pages key on -----------------------------------------------------


@dataclass
class _Deferred:
    runs: set[int] = field(default_factory=set)
    # None: every project.
    projects: set[int | None] = field(default_factory=set)


_deferred: ContextVar[_Deferred | None] = ContextVar("version_bumps_deferred", default=None)


def run_data_version_bump(*, run_id: int) -> None:
    """Say that something the run's pages show changed: the figures cached under its previous
    data_version are not read again. Call it in the transaction of the change, so the page
    that reads the new version reads the new data."""
    pending = _deferred.get()
    if pending is not None:
        pending.runs.add(run_id)
        return
    Run.objects.filter(pk=run_id).update(data_version=F("data_version") + 1)


def fleet_version_bump(*, project_id: int | None) -> None:
    """Say that what the fleet pages list for the project's runs changed (an incident, the
    hardware it names). None for every project. In the transaction of the change."""
    pending = _deferred.get()
    if pending is not None:
        pending.projects.add(project_id)
        return
    projects = (
        Project.objects.all() if project_id is None else Project.objects.filter(pk=project_id)
    )
    projects.update(fleet_version=F("fleet_version") + 1)


@contextmanager
def version_bumps_deferred() -> Iterator[None]:
    """An ingest batch calls many services, each of which bumps a version; made there and
    then, the first would lock the run's row for the rest of the batch, while batches of one
    run share it by taking that lock last (see ingest.services.processing._apply). Inside this
    block the bumps are collected, and made once at its end, still in the batch's transaction
    (not at all if the block raises: the transaction is rolled back anyway).
    run_progress_record, the batch's last write, bumps the run's version itself."""
    pending = _Deferred()
    token = _deferred.set(pending)
    try:
        yield
    finally:
        _deferred.reset(token)
    for run_id in sorted(pending.runs):
        run_data_version_bump(run_id=run_id)
    if None in pending.projects:
        fleet_version_bump(project_id=None)
    else:
        for project_id in sorted(p for p in pending.projects if p is not None):
            fleet_version_bump(project_id=project_id)


# --- Runs, attempts, topology, points --------------------------------------------------------


def run_upsert(*, project: Project, name: str, info: dict[str, Any] | None = None) -> Run:
    """The run named `name` in `project`, created on first sight; `info` fields that are
    present overwrite the stored ones (a job may correct its own description). `info` holds
    Run columns a job describes, already checked (the ingest contract's run_info)."""
    info = dict(info or {})
    if "tags" in info:
        info["tags"] = list(dict.fromkeys(info["tags"]))  # a tag once, in the order sent
    run, created = Run.objects.get_or_create(project=project, name=name, defaults=info)
    if not created and info:
        changed = [key for key, value in info.items() if getattr(run, key) != value]
        for key in changed:
            setattr(run, key, info[key])
        if changed:
            run.save(update_fields=changed)
            run_data_version_bump(run_id=run.pk)
    return run


def hosts_ensure(*, project: Project | int, names: Iterable[str]) -> list[Host]:
    """The project's hosts of these names, created on first sight. Only the project's own:
    a name another project uses is a new record here (hardware is not shared)."""
    wanted = sorted(set(names))
    if not wanted:
        return []
    project_id = project if isinstance(project, int) else project.pk
    return _named_ensure(Host, project_id, "name", wanted)


def devices_ensure(*, project: Project | int, uuids: Iterable[str]) -> list[Device]:
    """The project's devices of these UUIDs, created on first sight (see hosts_ensure)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return []
    project_id = project if isinstance(project, int) else project.pk
    return _named_ensure(Device, project_id, "uuid", wanted)


_Hardware = TypeVar("_Hardware", Host, Device)


def _named_ensure(
    model: type[_Hardware], project_id: int, key: str, wanted: list[str]
) -> list[_Hardware]:
    """Read first and insert only what is missing: a fleet's every push names hardware that
    exists already (a DCGM push names 8 GPUs 2,880 times a day)."""
    found = list(model.objects.filter(project_id=project_id, **{f"{key}__in": wanted}))
    if len(found) == len(wanted):
        return found
    have = {getattr(row, key) for row in found}
    model.objects.bulk_create(
        [model(project_id=project_id, **{key: name}) for name in wanted if name not in have],
        ignore_conflicts=True,  # another request may create the same ones meanwhile
    )
    return list(model.objects.filter(project_id=project_id, **{f"{key}__in": wanted}))


def attempt_ensure(
    *,
    run: Run,
    number: int,
    started_at: datetime | None = None,
    resumed_from_step: int | None = None,
    hosts: Sequence[str] = (),
    accelerator_count: int | None = None,
) -> Attempt:
    """Attempt `number` of `run`, created if needed. Start details fill in blanks only, so a
    late or repeated attempt_started event never moves a known start."""
    attempt, created = Attempt.objects.get_or_create(run=run, number=number)
    changed: list[str] = []
    if started_at is not None and (attempt.started_at is None or started_at < attempt.started_at):
        attempt.started_at = started_at
        changed.append("started_at")
    if resumed_from_step is not None and attempt.resumed_from_step != resumed_from_step:
        attempt.resumed_from_step = resumed_from_step
        changed.append("resumed_from_step")
    if accelerator_count and attempt.accelerator_count != accelerator_count:
        # A resized cluster (spares out, fewer nodes): this attempt's own count.
        attempt.accelerator_count = accelerator_count
        changed.append("accelerator_count")
    if changed:
        attempt.save(update_fields=changed)
    if hosts:
        attempt.hosts.add(*hosts_ensure(project=run.project_id, names=hosts))
        # A quarantined host is listed in the fleet of the runs that ran on it.
        fleet_version_bump(project_id=run.project_id)
    if created or changed or hosts:
        run_data_version_bump(run_id=run.pk)
    return attempt


def attempt_config_set(*, attempt: Attempt, config: dict[str, Any]) -> bool:
    """Keep `config` (a batch's run_info.config) as the attempt's own; True if it changed."""
    if attempt.config == config:
        return False
    attempt.config = config
    attempt.save(update_fields=["config"])
    run_data_version_bump(run_id=attempt.run_id)
    return True


def attempt_end(*, attempt: Attempt, status: str, ended_at: datetime, reason: str = "") -> Attempt:
    attempt.status = status
    attempt.ended_at = ended_at
    attempt.end_reason = reason
    attempt.save(update_fields=["status", "ended_at", "end_reason"])
    run_data_version_bump(run_id=attempt.run_id)
    return attempt


def attempt_end_if_running(
    *, attempt: Attempt, status: str, ended_at: datetime, reason: str = ""
) -> bool:
    """End `attempt` only if it is still running, in one conditional UPDATE. An end the job
    sent itself (attempt_ended) wins even when its batch commits while ours is in flight:
    PostgreSQL re-checks the WHERE clause on the row it waited for, so there is no lost
    update between reading "running" and writing "failed"."""
    updated = Attempt.objects.filter(pk=attempt.pk, status=Attempt.Status.RUNNING).update(
        status=status, ended_at=ended_at, end_reason=reason
    )
    attempt.refresh_from_db(fields=["status", "ended_at", "end_reason"])
    if updated:
        run_data_version_bump(run_id=attempt.run_id)
    return bool(updated)


def series_ensure(*, run: Run, attempt: Attempt, names: Iterable[str]) -> dict[str, int]:
    """Series ids by metric name for one attempt, created where missing."""
    wanted = set(names)
    found = dict(
        MetricSeries.objects.filter(run=run, attempt=attempt, name__in=wanted).values_list(
            "name", "id"
        )
    )
    missing = wanted - found.keys()
    if missing:
        MetricSeries.objects.bulk_create(
            [MetricSeries(run=run, attempt=attempt, name=name) for name in sorted(missing)],
            ignore_conflicts=True,
        )
        found.update(
            MetricSeries.objects.filter(run=run, attempt=attempt, name__in=missing).values_list(
                "name", "id"
            )
        )
        run_data_version_bump(run_id=run.pk)
    return found


# Joins the caller's transaction without a savepoint: a failure aborts the whole batch
# anyway, and a savepoint costs two round trips per batch.
@transaction.atomic(savepoint=False)
def metric_points_insert(
    *,
    run: Run,
    attempt: Attempt,
    points: Sequence[tuple[str, int, float, datetime | None]],
    record_progress: bool = True,
    series_ids: dict[str, int] | None = None,
) -> int:
    """Store (name, step, value, wall_time) points of one attempt. A point already stored at
    the same (series, step) is kept as it was (first write wins), so a redelivered batch
    inserts nothing. Returns how many rows were new. With record_progress=False the caller
    moves the run's progress itself (once, last: it locks the run's row). `series_ids`, the
    attempt's series by name for every name of the points, spares series_ensure (a series
    that no longer exists fails the insert with foreign_key_violation)."""
    if not points:
        return 0
    if series_ids is None:
        series_ids = series_ensure(run=run, attempt=attempt, names={p[0] for p in points})
    inserted = _points_insert_postgresql(series_ids, points)
    if record_progress:
        latest = _latest(points)
        run_progress_record(
            run=run, last_step=max(p[1] for p in points), seen_at=latest, data_at=latest
        )
    return inserted


# Per-session staging table for point inserts (temporary: no WAL, invisible to others).
# ON COMMIT DELETE ROWS: PostgreSQL never vacuums a temporary table, so rows deleted from it
# stayed as dead tuples for as long as the connection lived (CONN_MAX_AGE), and every
# batch's DELETE below scanned all of them: 18 MB and 17 ms more per batch after 300
# batches on one connection. Truncated at each commit, the stage stays one batch long.
_POINTS_STAGE = "chronicle_points_stage"
_POINT_COLUMNS = "(series_id, step, value, wall_time)"
_POINT_TYPES = ["int8", "int8", "float8", "timestamptz"]

_PointRow = tuple[int, int, float, datetime | None]


def _points_insert_postgresql(
    series_ids: dict[str, int], points: Sequence[tuple[str, int, float, datetime | None]]
) -> int:
    # A live run's batch holds new steps only, so it is first copied straight into the
    # table: half the database CPU of staging it and inserting with ON CONFLICT (measured
    # on 1,000-point batches: ~3.5 ms against ~7.5 ms of the backend's CPU), since COPY
    # checks the primary key once per row where ON CONFLICT probes it, inserts
    # speculatively and confirms. A point already stored (a replayed step, a retry under a
    # new batch_id, a step twice in the batch, or another request's uncommitted point we
    # waited for) makes the COPY fail on the primary key; the savepoint undoes only the
    # COPY (its statement triggers never fired), and the staged insert below keeps the
    # first write, as before.
    names, steps, values, moments = zip(*points, strict=True)
    rows = list(zip(map(series_ids.__getitem__, names), steps, values, moments, strict=True))
    try:
        with transaction.atomic(), connection.cursor() as wrapper:
            return _points_copy(wrapper.cursor, MetricPoint._meta.db_table, rows)
    except UniqueViolation:
        pass
    return _points_insert_staged(rows)


def _points_copy(cursor: Any, table: str, rows: list[_PointRow]) -> int:
    # psycopg's own cursor: COPY is not in the DB-API. psycopg encodes each row in C.
    with cursor.copy(f"COPY {table} {_POINT_COLUMNS} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(_POINT_TYPES)
        write_row = copy.write_row
        for row in rows:
            write_row(row)
    return len(rows)


def _points_insert_staged(rows: list[_PointRow]) -> int:
    # Binary COPY into a temporary table, then one INSERT ... SELECT with the primary key as
    # the conflict target (duplicates inside the batch are skipped too). About twice as fast
    # as one INSERT over array parameters, which psycopg must render as text literals. The
    # DELETE ... RETURNING empties the stage in the same statement, so a second insert in
    # the same transaction starts clean.
    table = MetricPoint._meta.db_table
    with connection.cursor() as wrapper:
        cursor = wrapper.cursor
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {_POINTS_STAGE} "
            "(series_id bigint, step bigint, value float8, wall_time timestamptz) "
            "ON COMMIT DELETE ROWS"
        )
        _points_copy(cursor, _POINTS_STAGE, rows)
        cursor.execute(
            f"WITH staged AS (DELETE FROM {_POINTS_STAGE} RETURNING *) "
            f"INSERT INTO {table} {_POINT_COLUMNS} "
            "SELECT series_id, step, value, wall_time FROM staged "
            "ON CONFLICT (series_id, step) DO NOTHING"
        )
        return cursor.rowcount


# Series per rebuild statement: bounds the memory of one aggregation, and one transaction
# each so a large rebuild does not hold every series' rows locked at once.
ROLLUP_REBUILD_CHUNK = 200


def metric_rollups_rebuild(*, series_ids: Sequence[int]) -> int:
    """Recompute the rollups of these series from their points (PostgreSQL's function from
    migration 0005). Returns how many rollup rows were written."""
    return _rebuild("telemetry_metricrollup_rebuild", series_ids)


def throughput_sums_rebuild(*, attempt_ids: Sequence[int]) -> int:
    """Recompute these attempts' throughput sums (ThroughputSum) from their points
    (PostgreSQL's function from migration 0012). Returns how many rows were written."""
    return _rebuild("telemetry_throughputsum_rebuild", attempt_ids)


def step_start_chunks_rebuild(*, attempt_ids: Sequence[int]) -> int:
    """Repack these attempts' step starts (StepStartChunk) from the table (PostgreSQL's
    function from migration 0013). Returns how many chunks were written."""
    return _rebuild("telemetry_stepstartchunk_rebuild", attempt_ids)


def _rebuild(function: str, ids: Sequence[int]) -> int:
    written = 0
    for first in range(0, len(ids), ROLLUP_REBUILD_CHUNK):
        chunk = list(ids[first : first + ROLLUP_REBUILD_CHUNK])
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SELECT {function}(%s::bigint[])", [chunk])
            written += cursor.fetchone()[0]
    return written


def _latest(points: Sequence[tuple[str, int, float, datetime | None]]) -> datetime | None:
    times = [p[3] for p in points if p[3] is not None]
    return max(times) if times else None


def run_progress_record(
    *, run: Run, last_step: int, seen_at: datetime | None, data_at: datetime | None = None
) -> None:
    """Move the run's latest step and times forward only (monotonic, so order-independent),
    and its data_version: new points change its pages (the same UPDATE, so an ingest batch
    writes the run's row once). seen_at is when the data arrived, data_at the latest time
    the data itself carries (Run.data_until)."""
    # Written out: every ingest batch runs this UPDATE, and building it from Django
    # expressions (Greatest, Coalesce, Case) cost ~1 ms of the web process's CPU each time,
    # ten times what PostgreSQL spends running it.
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_step = GREATEST(COALESCE(last_step, -1), %(step)s), "
            "data_version = data_version + 1, "
            # Hang detection's clock: moves only with the step (the old row's last_step).
            "last_step_at = CASE WHEN last_step IS NULL OR last_step < %(step)s "
            "THEN %(step_at)s ELSE last_step_at END, "
            "last_seen_at = CASE WHEN %(seen)s::timestamptz IS NULL THEN last_seen_at "
            "ELSE GREATEST(last_seen_at, %(seen)s::timestamptz) END, "
            "data_until = CASE WHEN %(data_at)s::timestamptz IS NULL THEN data_until "
            "ELSE GREATEST(data_until, %(data_at)s::timestamptz) END "
            "WHERE id = %(id)s",
            {
                "step": last_step,
                "step_at": seen_at or timezone.now(),
                "seen": seen_at,
                "data_at": data_at,
                "id": run.pk,
            },
        )
    pending = _deferred.get()
    if pending is not None:
        pending.runs.discard(run.pk)


def run_backfilled(*, run: Run, data_end: datetime) -> None:
    """Mark a run loaded after the fact (the demo, an imported history) as last seen, and last
    advanced, when its data ends, not when the server received it: "last seen" is otherwise
    the receive time, which for a backfill is the load time and would stretch the run's
    elapsed time and observed hours to now."""
    Run.objects.filter(pk=run.pk).update(
        last_seen_at=data_end, last_step_at=data_end, data_until=data_end
    )
    run_data_version_bump(run_id=run.pk)


def step_starts_record(
    *, attempt: Attempt, first_step: int, start_times: Sequence[datetime]
) -> int:
    """Store when steps first_step, first_step + 1, ... of `attempt` began (first write wins).
    Returns how many rows were new."""
    before = StepStart.objects.filter(attempt=attempt).count()
    StepStart.objects.bulk_create(
        [
            StepStart(attempt=attempt, step=first_step + offset, started_at=moment)
            for offset, moment in enumerate(start_times)
        ],
        ignore_conflicts=True,
        batch_size=2000,
    )
    new = StepStart.objects.filter(attempt=attempt).count() - before
    if new:
        run_data_version_bump(run_id=attempt.run_id)
    return new


def interval_record(
    *,
    run: Run,
    attempt: Attempt,
    kind: str,
    started_at: datetime,
    ended_at: datetime,
    source_key: str,
    label: str = "",
    step: int | None = None,
) -> JobInterval:
    interval, created = JobInterval.objects.get_or_create(
        run=run,
        source_key=source_key,
        defaults={
            "attempt": attempt,
            "kind": kind,
            "label": label,
            "started_at": started_at,
            "ended_at": ended_at,
            "step": step,
        },
    )
    if created:
        run_data_version_bump(run_id=run.pk)
    return interval


def accelerators_seed() -> int:
    """Create the shipped catalog rows that are missing (the data migration and tests use
    it); rows admins edited are left alone. Returns how many were created."""
    from telemetry.accelerators import ACCELERATOR_SEEDS
    from telemetry.models import AcceleratorType

    existing = set(AcceleratorType.objects.values_list("name", flat=True))
    missing = [
        AcceleratorType(
            name=seed.name,
            aliases=seed.aliases,
            peak_flops_bf16=seed.peak_flops_bf16,
            source=seed.source,
        )
        for seed in ACCELERATOR_SEEDS
        if seed.name not in existing
    ]
    AcceleratorType.objects.bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def project_ensure(*, slug: str, name: str) -> tuple[Project, bool]:
    """The project with this slug, created with `name` if missing; and whether it was."""
    return Project.objects.get_or_create(slug=slug, defaults={"name": name})


def devices_place_unplaced(*, devices: Sequence[Device], host: Host) -> None:
    """Devices not yet on a host go on `host` (a job that names one host and some GPUs says
    they are on it); a device already placed stays put (dcgm-exporter, which knows, placed
    it). The fleet page shows each device's host."""
    placed = Device.objects.filter(pk__in=[d.pk for d in devices], host=None).update(host=host)
    if placed:
        fleet_version_bump(project_id=host.project_id)


QUARANTINE_FIELDS = ("quarantined_at", "quarantine_reason", "quarantined_by")


@transaction.atomic
def hardware_quarantine(*, row: Host | Device, user: Any, reason: str) -> None:
    """Take a host or device out of service, with who did it and why (required). Already in
    quarantine, it keeps its original time; the reason and author are updated. The caller
    audits the change."""
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": "A reason is required to quarantine hardware."})
    row.quarantined_at = row.quarantined_at or timezone.now()
    row.quarantine_reason = reason
    row.quarantined_by = user if getattr(user, "is_authenticated", False) else None
    row.save(update_fields=list(QUARANTINE_FIELDS))
    fleet_version_bump(project_id=row.project_id)


@transaction.atomic
def hardware_release(*, row: Host | Device) -> None:
    """Return a host or device to service. The caller audits the change."""
    row.quarantined_at = None
    row.quarantine_reason = ""
    row.quarantined_by = None
    row.save(update_fields=list(QUARANTINE_FIELDS))
    fleet_version_bump(project_id=row.project_id)


def attempt_resumed_from(*, attempt: Attempt, step: int) -> None:
    """The step the attempt resumed from, if no event said so before (the first word
    stands: attempt_started's resume step, or the first restore reported)."""
    if attempt.resumed_from_step is None:
        attempt.resumed_from_step = step
        attempt.save(update_fields=["resumed_from_step"])
        run_data_version_bump(run_id=attempt.run_id)


def membership_set(
    *, project: Project, username: str, role: str, may_add: bool = True
) -> Membership:
    """Add the user to the project with `role`, or change their role. Refuses to leave the
    project without an admin. `may_add` False: only members' roles change, and whether a
    non-member user exists is not said (PROJECT_ADMINS_ADD_EXISTING_USERS off)."""
    from django.contrib.auth import get_user_model

    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}."})
    user = get_user_model().objects.filter(username=username).first()
    member = user is not None and Membership.objects.filter(project=project, user=user).exists()
    if not may_add and not member:
        raise ValidationError(
            {
                "username": f"{username!r} is not a member of this project. On this site only "
                "a site administrator adds users to a project."
            }
        )
    if user is None:
        raise ValidationError({"username": f"No user named {username!r}."})
    with transaction.atomic():
        membership, _ = Membership.objects.select_for_update().get_or_create(
            project=project, user=user, defaults={"role": role}
        )
        if membership.role != role:
            _keep_an_admin(project=project, leaving=membership, new_role=role)
            membership.role = role
            membership.save(update_fields=["role"])
    return membership


def membership_remove(*, membership: Membership) -> None:
    with transaction.atomic():
        _keep_an_admin(project=membership.project, leaving=membership, new_role=None)
        membership.delete()


def _keep_an_admin(*, project: Project, leaving: Membership, new_role: str | None) -> None:
    if leaving.role != Membership.Role.ADMIN or new_role == Membership.Role.ADMIN:
        return
    others = (
        Membership.objects.select_for_update()
        .filter(project=project, role=Membership.Role.ADMIN)
        .exclude(pk=leaving.pk)
    )
    if not others.exists():
        raise ValidationError({"role": "A project needs at least one admin."})
