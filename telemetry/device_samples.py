"""Raw DCGM samples and the summaries that outlive them: their layout and what their writes
share (the SQL and the partitions' upkeep are telemetry.services.device_samples'). The
samples go into telemetry_devicesample, a row per device and moment with the readings as an array in
SUMMARY_FIELDS order, partitioned by day of `sampled_at` and kept for
DEVICE_SAMPLE_RETENTION_DAYS (whole partitions dropped by the beat); every push also adds what
it inserted to its devices' 5-minute summaries (DeviceSampleSummary), kept for as long as the
device is. Health events (DeviceEvent) are another table and are never dropped.

Sizes (measured by `make bench`,
bench/results/history/2026-11-25-gpu-health-at-fleet-scale.md): a row of the 16 fields
dcgm-exporter sends takes about 240 bytes with its key, every 30 s is 2,880 rows per GPU per
day; a summary row is one per GPU per 5 minutes, 288 a day.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from config.prepared import array_literal
from telemetry.dcgm import FIELDS
from telemetry.partitions import PartitionedTable

SAMPLE_TABLE = "telemetry_devicesample"
SUMMARY_TABLE = "telemetry_devicesamplesummary"
SUMMARY_BUCKET_S = 300
# Daily partitions, made two days ahead: a push dated up to a day in the future (what the
# parser accepts) still finds its partition made by the beat.
PARTITIONS = PartitionedTable(
    table=SAMPLE_TABLE, span=timedelta(days=1), ahead=timedelta(days=2), name_format="%Y%m%d"
)
# A summary's arrays hold each field at its position here (telemetry.dcgm.FIELDS is
# append-only: an older row's shorter arrays still line up).
SUMMARY_FIELDS = list(FIELDS)


def readings_array(values: Mapping[str, float]) -> list[float | None]:
    """A device's readings `{field: value}` laid out in SUMMARY_FIELDS order, None where a
    field is missing. Fields Chronicle does not know are left out (the parser keeps none)."""
    return [values.get(name) for name in SUMMARY_FIELDS]


def readings_literal(readings: Sequence[float | None]) -> str:
    """PostgreSQL's text for a float8[]: repr() of a float reads back to the same double."""
    return "{" + ",".join("NULL" if value is None else repr(value) for value in readings) + "}"


def retention() -> timedelta:
    return timedelta(days=settings.DEVICE_SAMPLE_RETENTION_DAYS)


def raw_kept_since(*, now: datetime) -> datetime:
    """The oldest moment whose raw samples are still kept: the start of the oldest partition
    the upkeep keeps. Older history is in the summaries only."""
    return PARTITIONS.kept_since(now=now, window=retention())


def device_samples_params(
    *, rows: Sequence[tuple[int, datetime, Mapping[str, float]]], now: datetime
) -> list[Any]:
    """The parameters of RECORD_CTES for raw samples `(device_id, sampled_at, {field:
    value})`, a row per device and moment.

    A row whose (device, moment) is already stored is skipped whole: a retried push adds
    nothing, and a later push carrying the same moment cannot add fields to it.

    Samples dated before raw_kept_since are left out: their partition is gone or about to
    go, and without their raw row a re-sent push could not be told from a new one (the
    summary would count it twice). Their day's partition must exist
    (telemetry.services.device_samples.device_sample_partitions_ensure, before the
    transaction).

    The last parameter holds, for a row alone in its device's summary bucket among these
    rows (a push's usual case), what it adds to the bucket's counts (1 for each reading it
    has), so that PostgreSQL adds the row itself instead of adding up its fields one by
    one; NULL for rows that share a bucket."""
    cutoff = raw_kept_since(now=now)
    kept = [(device_id, at, readings_array(values)) for device_id, at, values in rows]
    kept = [row for row in kept if row[1] >= cutoff and any(v is not None for v in row[2])]
    buckets = [(device_id, bucket_of(at)) for device_id, at, _ in kept]
    sharing = Counter(buckets)
    return [
        array_literal(device_id for device_id, _, _ in kept),
        array_literal(at for _, at, _ in kept),
        array_literal(readings_literal(readings) for _, _, readings in kept),
        SUMMARY_BUCKET_S,
        "{"
        + ",".join(
            _counts_literal(readings) if sharing[bucket] == 1 else "NULL"
            for bucket, (_, _, readings) in zip(buckets, kept, strict=True)
        )
        + "}",
    ]


def bucket_of(moment: datetime) -> int:
    """The number of `moment`'s summary bucket since the epoch, as PostgreSQL's date_bin
    places it (whole microseconds: exact, where a float's seconds could round over an edge)."""
    return (moment - EPOCH) // timedelta(seconds=SUMMARY_BUCKET_S)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _counts_literal(readings: Sequence[float | None]) -> str:
    """The text of an integer[] with 1 where `readings` has a value and NULL where not, as an
    element of a text[] literal (quoted)."""
    return '"{' + ",".join("NULL" if value is None else "1" for value in readings) + '}"'
