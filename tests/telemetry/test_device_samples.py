"""Raw DCGM samples in daily partitions kept for DEVICE_SAMPLE_RETENTION_DAYS, the 5-minute
summaries that outlive them, and health events, which are never dropped. Pushed through the
real API (dcgm-exporter text with sample timestamps) into real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from telemetry import device_samples
from telemetry.device_samples import PARTITIONS, SUMMARY_BUCKET_S, SUMMARY_FIELDS
from telemetry.models import Device, DeviceEvent, DeviceSample, DeviceSampleSummary
from telemetry.selectors.dcgm import device_field_history
from telemetry.services import device_samples as sample_writes
from telemetry.tasks import device_sample_partitions_maintain_task

URL = "/api/v1/ingest/prometheus"
GPU = "GPU-0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
XID = "DCGM_FI_DEV_XID_ERRORS"


def exposition(values: dict[str, float], at: datetime, *, uuid: str = GPU) -> str:
    """One GPU's readings as dcgm-exporter text, every sample stamped `at`."""
    stamp = int(at.timestamp() * 1000)
    return "\n".join(
        f'{name}{{gpu="0",UUID="{uuid}",Hostname="node-c03"}} {value} {stamp}'
        for name, value in values.items()
    )


@pytest.fixture
def push(client: Any, ingest_token: str) -> Callable[[str], Any]:
    def post(text: str) -> Any:
        response = client.post(
            URL, data=text.encode(), content_type="text/plain",
            HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
        )  # fmt: skip
        assert response.status_code == 200, response.content
        return response

    return post


def partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'telemetry_devicesample'::regclass"
        )
        return {row[0] for row in cursor.fetchall()}


def day_partition(moment: datetime) -> str:
    return PARTITIONS.partition_name(PARTITIONS.span_start(moment))


@pytest.mark.django_db
def test_a_push_for_a_new_day_makes_its_partition(push):
    # given no partition for the day two days ago (the beat only makes days ahead)
    two_days_ago = timezone.now() - timedelta(days=2)
    name = day_partition(two_days_ago)
    assert name not in partitions()

    # when a push carries readings stamped that day
    push(exposition({TEMP: 61.0, POWER: 500.0}, two_days_ago))

    # then the day's partition was made, and holds the readings
    assert name in partitions()
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT readings[%s], readings[%s] FROM "{name}"',
            [SUMMARY_FIELDS.index(TEMP) + 1, SUMMARY_FIELDS.index(POWER) + 1],
        )
        assert cursor.fetchall() == [(61.0, 500.0)]


@pytest.mark.django_db
def test_the_catalog_is_read_once_per_day_not_on_every_push(push):
    # given a first push today, which looks up (and makes) today's partition
    now = timezone.now()
    with CaptureQueriesContext(connection) as first:
        push(exposition({TEMP: 61.0}, now))
    # when the same GPU pushes again
    with CaptureQueriesContext(connection) as second:
        push(exposition({TEMP: 62.0}, now + timedelta(seconds=1)))

    # then only the first push read the partitions from the catalog
    def catalog(queries: CaptureQueriesContext) -> int:
        return sum("pg_inherits" in query["sql"] for query in queries.captured_queries)

    assert (catalog(first), catalog(second)) == (1, 0)
    assert DeviceSample.objects.count() == 2


@pytest.mark.django_db
def test_retention_drops_old_partitions_whole_and_keeps_recent_samples(push, settings):
    # given readings from five days ago and from now, kept for the default seven days
    now = timezone.now()
    old = now - timedelta(days=5)
    push(exposition({TEMP: 70.0}, old))
    push(exposition({TEMP: 72.0}, now))
    assert DeviceSample.objects.count() == 2

    # when the window shrinks to three days and the beat's task runs
    settings.DEVICE_SAMPLE_RETENTION_DAYS = 3
    as_if_committed()
    device_sample_partitions_maintain_task()

    # then the old day's partition table is gone, today's and the next days' are there
    remaining = partitions()
    assert day_partition(old) not in remaining
    assert to_regclass(day_partition(old)) is None
    assert {day_partition(now + timedelta(days=d)) for d in range(3)} <= remaining
    # and only the recent sample is left raw, while both buckets' summaries stay
    assert [row.readings_by_field() for row in DeviceSample.objects.all()] == [{TEMP: 72.0}]
    assert DeviceSampleSummary.objects.count() == 2
    # and running it again changes nothing
    assert sample_writes.device_sample_partitions_maintain() == ([], [])


def as_if_committed() -> None:
    """Run the deferred foreign-key checks of the test's pushes now, as their commits would
    have: PostgreSQL refuses to drop a table with checks pending in the transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def to_regclass(name: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)::text", [name])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_the_table_from_before_partitioning_expires_whole(settings):
    # given a partition from MINVALUE, as migration 0012 attaches the old table
    now = datetime(2026, 6, 20, 12, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE telemetry_devicesample_before PARTITION OF telemetry_devicesample"
            " FOR VALUES FROM (MINVALUE) TO ('2026-06-12T00:00:00+00:00')"
        )

    # when the upkeep runs a day before, then on the day all of it leaves the window
    _, kept = sample_writes.device_sample_partitions_maintain(now=now - timedelta(days=2))
    _, dropped = sample_writes.device_sample_partitions_maintain(now=now - timedelta(days=1))

    # then it is dropped only once its upper bound is older than the seven-day window
    assert kept == []
    assert dropped == ["telemetry_devicesample_before"]


@pytest.mark.django_db
def test_summaries_are_the_mean_and_max_of_the_raw_samples(push):
    # given pushes every 30 s over two 5-minute buckets, power missing from some
    start = PARTITIONS.span_start(timezone.now()) + timedelta(seconds=SUMMARY_BUCKET_S * 2)
    if start > timezone.now() - timedelta(minutes=10):
        start -= timedelta(days=1)  # just after midnight: yesterday's buckets
    for n in range(20):
        values = {TEMP: 60.0 + (n * 7) % 11, XID: 0.0}
        if n % 3:
            values[POWER] = 400.0 + n * 13.5
        push(exposition(values, start + timedelta(seconds=30 * n)))
    # and one push sent twice (a retry): counted once
    push(exposition({TEMP: 60.0, XID: 0.0}, start))

    # then each summary is the mean, max and count of its bucket's raw samples, per field
    device = Device.objects.get(uuid=GPU)
    summaries = DeviceSampleSummary.objects.filter(device=device).order_by("bucket_start")
    assert [s.bucket_start for s in summaries] == [
        start,
        start + timedelta(seconds=SUMMARY_BUCKET_S),
    ]
    for summary in summaries:
        end = summary.bucket_start + timedelta(seconds=SUMMARY_BUCKET_S)
        for i in range(len(SUMMARY_FIELDS)):
            rows = DeviceSample.objects.filter(
                device=device, sampled_at__gte=summary.bucket_start, sampled_at__lt=end
            )
            raw = [row.readings[i] for row in rows if row.readings[i] is not None]
            if not raw:
                assert summary.sample_counts[i] is None and summary.value_maxes[i] is None
                continue
            assert summary.sample_counts[i] == len(raw)
            assert summary.value_sums[i] / summary.sample_counts[i] == pytest.approx(
                sum(raw) / len(raw)
            )
            assert summary.value_maxes[i] == max(raw)
    assert summaries[0].sample_counts[SUMMARY_FIELDS.index(TEMP)] == 10
    assert summaries[0].sample_counts[SUMMARY_FIELDS.index(POWER)] == 6


@pytest.mark.django_db
def test_rows_sharing_a_bucket_in_one_push_are_added_up_field_by_field(push):
    # given one push where two hosts name the same GPU 30 s apart in one bucket (both rows
    # are stored, and add up in the bucket), and another GPU alone in its bucket
    ago = int((timezone.now() - timedelta(minutes=10)).timestamp())
    at = datetime.fromtimestamp(ago // SUMMARY_BUCKET_S * SUMMARY_BUCKET_S, tz=UTC)
    other = "GPU-99999999-4b5c-4d6e-8f70-8192a3b4c5d6"
    text = "\n".join([
        exposition({TEMP: 61.0, POWER: 300.0}, at),
        exposition({TEMP: 65.0}, at + timedelta(seconds=30)).replace("node-c03", "node-c04"),
        exposition({TEMP: 70.0, POWER: 500.0}, at, uuid=other),
    ])  # fmt: skip

    # when it is pushed twice (a retry)
    push(text)
    push(text)

    # then the shared bucket counts both rows of each field, the lone one its own row
    def summary(uuid: str) -> dict[str, tuple[int, float, float]]:
        (row,) = DeviceSampleSummary.objects.filter(device__uuid=uuid)
        return {
            field: (row.sample_counts[i], row.value_sums[i], row.value_maxes[i])
            for field in (TEMP, POWER)
            for i in [SUMMARY_FIELDS.index(field)]
        }

    assert DeviceSample.objects.filter(device__uuid=GPU).count() == 2
    assert summary(GPU) == {TEMP: (2, 126.0, 65.0), POWER: (1, 300.0, 300.0)}
    assert summary(other) == {TEMP: (1, 70.0, 70.0), POWER: (1, 500.0, 500.0)}


@pytest.mark.django_db
def test_history_reads_summaries_before_the_window_and_raw_samples_in_it(push, settings):
    # given readings four days ago and now; then the window shrinks to two days
    now = timezone.now()
    old = PARTITIONS.span_start(now - timedelta(days=4)) + timedelta(hours=6)
    push(exposition({TEMP: 60.0}, old))
    push(exposition({TEMP: 66.0}, old + timedelta(seconds=30)))
    push(exposition({TEMP: 75.0}, now))
    settings.DEVICE_SAMPLE_RETENTION_DAYS = 2
    as_if_committed()
    sample_writes.device_sample_partitions_maintain(now=now)

    # when the device's history since five days ago is read
    device = Device.objects.get(uuid=GPU)
    history = device_field_history(
        device=device, field=TEMP, since=now - timedelta(days=5), until=now + timedelta(1), now=now
    )

    # then the old range comes from its summary (mean, max), today's from the raw sample
    assert [(p.at, p.mean, p.max, p.samples, p.bucket_s) for p in history] == [
        (old, 63.0, 66.0, 2, SUMMARY_BUCKET_S),
        (now.replace(microsecond=now.microsecond // 1000 * 1000), 75.0, 75.0, 1, 0),
    ]


@pytest.mark.django_db
def test_health_events_survive_retention(push, settings):
    # given an XID four days ago on a GPU that was healthy before it
    old = timezone.now() - timedelta(days=4)
    push(exposition({XID: 0.0, TEMP: 60.0}, old))
    push(exposition({XID: 79.0, TEMP: 61.0}, old + timedelta(seconds=30)))
    event = DeviceEvent.objects.get(device__uuid=GPU)
    assert event.xid == 79

    # when the raw samples of that day are dropped
    settings.DEVICE_SAMPLE_RETENTION_DAYS = 2
    as_if_committed()
    device_sample_partitions_maintain_task()

    # then the samples are gone, the event and the GPU's summary and state are not
    assert day_partition(old) not in partitions()
    assert not DeviceSample.objects.exists()
    assert DeviceEvent.objects.filter(pk=event.pk, xid=79, kind="xid").exists()
    assert DeviceSampleSummary.objects.filter(device=event.device).exists()
    assert event.device.health_state.last_xid == 79


@pytest.mark.django_db
def test_readings_older_than_the_window_are_not_stored(push, settings):
    # given a three-day window
    settings.DEVICE_SAMPLE_RETENTION_DAYS = 3
    old = timezone.now() - timedelta(days=5)

    # when a push carries readings from before it
    response = push(exposition({TEMP: 60.0}, old))

    # then the push is accepted but neither raw rows, a summary nor a partition are made:
    # the partition would be dropped at once, and without the raw row a retry would count
    # twice in the summary
    assert response.json()["samples"] == 1
    assert not DeviceSample.objects.exists()
    assert not DeviceSampleSummary.objects.exists()
    assert day_partition(old) not in partitions()


@pytest.mark.django_db
def test_a_row_per_moment_exact_values_and_a_retry_adds_nothing(push):
    # given one push whose exporter stamped power 30 s after temperature, with a value that
    # needs all 17 digits of a double
    ago = int((timezone.now() - timedelta(minutes=10)).timestamp())
    at = datetime.fromtimestamp(ago // SUMMARY_BUCKET_S * SUMMARY_BUCKET_S, tz=UTC)  # one bucket
    power = 612.4570000000001
    text = (
        exposition({TEMP: 61.0, XID: 0.0}, at)
        + "\n"
        + exposition({POWER: power}, at + timedelta(seconds=30))
    )

    # when it is pushed, then pushed again (a retry)
    first = push(text).json()
    push(text)

    # then the GPU has a row per moment, each field at its position, NULL elsewhere
    device = Device.objects.get(uuid=GPU)
    rows = [
        (row.sampled_at, row.readings_by_field())
        for row in DeviceSample.objects.filter(device=device).order_by("sampled_at")
    ]
    assert rows == [(at, {TEMP: 61.0, XID: 0.0}), (at + timedelta(seconds=30), {POWER: power})]
    assert first["samples"] == 3
    # and the retry added nothing to the summary (one reading per field)
    (summary,) = DeviceSampleSummary.objects.filter(device=device)
    assert [summary.sample_counts[SUMMARY_FIELDS.index(f)] for f in (TEMP, XID, POWER)] == [
        1,
        1,
        1,
    ]
    assert summary.sample_counts[SUMMARY_FIELDS.index("DCGM_FI_DEV_SM_CLOCK")] is None
    # and a field's history reads only the rows that carry it, bit for bit
    history = device_field_history(
        device=device, field=POWER, since=at - timedelta(hours=1), until=at + timedelta(hours=1)
    )
    assert [(p.at, p.mean) for p in history] == [(at + timedelta(seconds=30), power)]


def test_readings_are_laid_out_by_field_position_as_postgresql_array_text():
    # given readings of two fields, one needing all 17 digits, and a field Chronicle lacks
    readings = device_samples.readings_array({POWER: 0.1 + 0.2, TEMP: 61.0, "DCGM_FI_X": 1.0})

    # then each sits at its field's position, None elsewhere, the unknown one left out
    assert len(readings) == len(SUMMARY_FIELDS)
    assert readings[SUMMARY_FIELDS.index(POWER)] == 0.1 + 0.2
    assert sum(value is not None for value in readings) == 2
    # and the array text reads back to the same doubles
    text = device_samples.readings_literal(readings)
    items = text.strip("{}").split(",")
    assert [None if item == "NULL" else float(item) for item in items] == readings
