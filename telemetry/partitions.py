"""Tables range-partitioned by time and kept for a window: partitions are made ahead of time
(and on demand, before a write that needs one), and expire by DROP TABLE of a whole
partition, never by a DELETE of millions of rows. Used by the raw rank timings (hourly,
telemetry.services.rank_timings) and the raw DCGM samples (daily, telemetry.device_samples).
Here: what a partitioned table is, and the reads of its catalog; the DDL that makes and
drops partitions is telemetry.services.partitions'.

A partition's range is read from the catalog, not parsed from its name, so a partition of any
span (the DCGM table from before partitioning, attached whole by migration 0015) expires like
the others once all of it is older than the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection


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


def range_column(spec: PartitionedTable) -> str:
    """The column the table is partitioned on."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname FROM pg_partitioned_table t JOIN pg_attribute a"
            " ON a.attrelid = t.partrelid AND a.attnum = t.partattrs[0]"
            " WHERE t.partrelid = %s::regclass",
            [spec.table],
        )
        return cursor.fetchone()[0]
