"""The DDL of time-partitioned tables (telemetry.partitions): partitions made ahead of time
and on demand, dropped whole once older than their window, and the expired rows a default
partition caught deleted."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import DatabaseError, connection, transaction

from telemetry.partitions import Partition, PartitionedTable, partitions_list, range_column


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
                column = range_column(spec)
                cursor.execute(
                    f'DELETE FROM "{partition.name}" WHERE {column} < %s', [now - window]
                )
    return created, dropped
