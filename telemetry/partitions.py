"""Tables range-partitioned by time and kept for a window: partitions are made ahead of time
(and on demand, before a write that needs one), and expire by DROP TABLE of a whole
partition, never by a DELETE of millions of rows. Used by the raw rank timings (hourly,
telemetry.services.rank_timings) and the raw DCGM samples (daily, telemetry.device_samples).

A partition's range is read from the catalog, not parsed from its name, so a partition of any
span (the DCGM table from before partitioning, attached whole by migration 0015) expires like
the others once all of it is older than the window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import DatabaseError, connection, transaction


@dataclass(frozen=True)
class PartitionedTable:
    table: str
    span: timedelta  # one partition's range
    ahead: timedelta  # how far past now the upkeep makes partitions
    # strftime of a partition's start, after "<table>_p": names sort by time.
    name_format: str

    def span_start(self, moment: datetime) -> datetime:
        span_s = int(self.span.total_seconds())
        return datetime.fromtimestamp(int(moment.timestamp()) // span_s * span_s, tz=UTC)

    def partition_name(self, start: datetime) -> str:
        return f"{self.table}_p{start.astimezone(UTC).strftime(self.name_format)}"

    def kept_since(self, *, now: datetime, window: timedelta) -> datetime:
        """The start of the oldest span the upkeep keeps at `now`: rows older than this are in
        (or would go to) a partition it drops."""
        return self.span_start(now - window)


@dataclass(frozen=True)
class Partition:
    name: str
    lower: datetime | None  # None: MINVALUE, or the default partition
    upper: datetime | None  # None: MAXVALUE, or the default partition
    is_default: bool

    def covers(self, moment: datetime) -> bool:
        if self.is_default:
            return False
        return (self.lower is None or self.lower <= moment) and (
            self.upper is None or moment < self.upper
        )


def partitions_list(spec: PartitionedTable) -> list[Partition]:
    """The table's partitions with their ranges, oldest first. One query."""
    with connection.cursor() as cursor:
        # Bounds are cast by PostgreSQL from the text it prints them in, whatever the
        # session's DateStyle; MINVALUE/MAXVALUE and DEFAULT come back NULL.
        cursor.execute(
            "SELECT c.relname, b.bound = 'DEFAULT',"
            " CASE WHEN m[1] LIKE '''%%' THEN btrim(m[1], '''')::timestamptz END,"
            " CASE WHEN m[2] LIKE '''%%' THEN btrim(m[2], '''')::timestamptz END"
            " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,"
            " LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS bound) b,"
            " LATERAL (SELECT regexp_match(b.bound, 'FROM \\((.*)\\) TO \\((.*)\\)') AS m) r"
            " WHERE i.inhparent = %s::regclass",
            [spec.table],
        )
        rows = cursor.fetchall()
    found = [Partition(name, lower, upper, is_default) for name, is_default, lower, upper in rows]
    return sorted(found, key=lambda p: (p.lower or datetime.min.replace(tzinfo=UTC), p.name))


def partitions_ensure(
    spec: PartitionedTable, *, moments: Iterable[datetime], existing: list[Partition] | None = None
) -> list[str]:
    """Make the partitions that rows dated `moments` need, unless a partition already covers
    them. Returns the names created. Call outside the transaction that writes the rows: the
    DDL locks the parent table until its transaction ends.

    Two processes may race to make the same partition: the loser's CREATE fails, which is
    fine, the partition is there. If a default partition already holds rows of that range the
    CREATE fails too, and those rows stay in the default (expired row by row; see
    partitions_maintain)."""
    partitions = partitions_list(spec) if existing is None else existing
    starts = sorted({spec.span_start(moment) for moment in moments})
    created: list[str] = []
    for start in starts:
        if any(p.covers(start) for p in partitions):
            continue
        name = spec.partition_name(start)
        end = start + spec.span
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                # Literal bounds: DDL takes no bind parameters (they are our own datetimes).
                cursor.execute(
                    f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF {spec.table}'
                    f" FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
                )
        except DatabaseError:
            continue
        created.append(name)
        partitions.append(Partition(name, start, end, is_default=False))
    return created


def partitions_maintain(
    spec: PartitionedTable, *, window: timedelta, now: datetime | None = None
) -> tuple[list[str], list[str]]:
    """Make the partitions from the current span to `spec.ahead`, drop those wholly older
    than `window`, and delete the expired rows a default partition (if any) caught. Returns
    (created, dropped) partition names. Idempotent."""
    now = now or datetime.now(UTC)
    existing = partitions_list(spec)
    wanted = []
    start = spec.span_start(now)
    while start <= now + spec.ahead:
        wanted.append(start)
        start += spec.span
    created = partitions_ensure(spec, moments=wanted, existing=existing)
    dropped = []
    with connection.cursor() as cursor:
        for partition in existing:
            if partition.upper is not None and partition.upper <= now - window:
                cursor.execute(f'DROP TABLE "{partition.name}"')
                dropped.append(partition.name)
            elif partition.is_default:
                column = _range_column(spec)
                cursor.execute(
                    f'DELETE FROM "{partition.name}" WHERE {column} < %s', [now - window]
                )
    return created, dropped


def _range_column(spec: PartitionedTable) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_partitioned_table t JOIN pg_attribute a"
            " ON a.attrelid = t.partrelid AND a.attnum = t.partattrs[0]"
            " WHERE t.partrelid = %s::regclass",
            [spec.table],
        )
        return cursor.fetchone()[0]
