"""Reads of GPU health from dcgm-exporter: which health counters a host's exporter leaves off,
a host's devices with their newest readings, a device's history of a field (raw samples
inside the retention window, 5-minute summaries before it), and the health events a user may
see."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connections, router
from django.db.models import QuerySet

from telemetry.dcgm import FIELDS, HEALTH_COUNTERS_OFF_BY_DEFAULT
from telemetry.device_samples import SUMMARY_BUCKET_S, SUMMARY_FIELDS, raw_kept_since
from telemetry.models import (
    Attempt,
    Device,
    DeviceEvent,
    DeviceHealthState,
    DeviceSample,
    DeviceSampleSummary,
    Host,
    Run,
)
from telemetry.selectors.access import User, projects_for_user


def dcgm_missing_counters(*, host: Host) -> list[str]:
    """The health counters dcgm-exporter disables by default (ECC, retired pages, NVLink
    errors, throttling) that the newest push of none of the host's GPUs carried, in the
    order of telemetry.dcgm.FIELDS. Empty when no exporter ever pushed for the host: nothing
    to warn about before there is anything at all. One query."""
    pushes = DeviceHealthState.objects.filter(device__host=host).values_list(
        "sent_positions", flat=True
    )
    sent: set[int] = set()
    seen_any = False
    for positions in pushes:
        seen_any = True
        sent.update(positions)
    if not seen_any:
        return []
    names = list(FIELDS)
    sent_names = {names[position] for position in sent if position < len(names)}
    return [name for name in HEALTH_COUNTERS_OFF_BY_DEFAULT if name not in sent_names]


@dataclass(frozen=True)
class DeviceReading:
    name: str
    label: str
    unit: str
    value: float


@dataclass(frozen=True)
class DeviceHealth:
    device: Device
    state: DeviceHealthState
    readings: list[DeviceReading]


def dcgm_device_health(*, host: Host) -> list[DeviceHealth]:
    """The host's GPUs that dcgm-exporter reported, by index, each with its newest readings
    (the known fields but the XID, in telemetry.dcgm.FIELDS order) and last XID. One query."""
    states = (
        DeviceHealthState.objects.filter(device__host=host)
        .select_related("device")
        .order_by("device__index_on_host", "device__uuid")
    )
    healths = []
    for state in states:
        last = state.last_values()
        readings = [
            DeviceReading(name, spec.label, spec.unit, last[name])
            for name, spec in FIELDS.items()
            # The last XID is a code, not a reading: the page gives it its own column.
            if name in last and spec.group != "xid"
        ]
        healths.append(DeviceHealth(device=state.device, state=state, readings=readings))
    return healths


@dataclass(frozen=True)
class HistoryPoint:
    at: datetime  # the sample's time, or a summary bucket's start
    mean: float
    max: float
    samples: int
    bucket_s: int  # 0 for a raw sample


def device_field_history(
    *,
    device: Device,
    field: str,
    since: datetime,
    until: datetime,
    now: datetime | None = None,
) -> list[HistoryPoint]:
    """A device's readings of one DCGM field in [since, until), oldest first: the raw samples
    where they are still kept (raw_kept_since), the 5-minute summaries' mean and maximum
    before that, for the range the raw partitions no longer hold. At most two queries."""
    kept_since = raw_kept_since(now=now or datetime.now(UTC))
    if field not in SUMMARY_FIELDS:
        return []
    # Django's array index transform is 0-based, like SUMMARY_FIELDS.
    i = SUMMARY_FIELDS.index(field)
    points: list[HistoryPoint] = []
    if since < kept_since:
        buckets = (
            DeviceSampleSummary.objects.filter(
                device=device,
                bucket_start__gt=since - timedelta(seconds=SUMMARY_BUCKET_S),
                bucket_start__lt=min(until, kept_since),
            )
            .order_by("bucket_start")
            .values_list("bucket_start", f"sample_counts__{i}", f"value_sums__{i}",
                         f"value_maxes__{i}")
        )  # fmt: skip
        points += [
            HistoryPoint(start, total / count, peak, count, SUMMARY_BUCKET_S)
            for start, count, total, peak in buckets
            if count
        ]
    raw = (
        DeviceSample.objects.filter(
            device=device, sampled_at__gte=max(since, kept_since), sampled_at__lt=until
        )
        .order_by("sampled_at")
        .values_list("sampled_at", f"readings__{i}")
    )
    points += [HistoryPoint(at, value, value, 1, 0) for at, value in raw if value is not None]
    return points


def device_events_for_user(
    *,
    user: User,
    host: Host | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[DeviceEvent]:
    """GPU health events pushed with the ingest tokens of the user's projects, newest first;
    with `host`, that host's only."""
    events = DeviceEvent.objects.filter(project__in=projects_for_user(user=user))
    if host is not None:
        events = events.filter(host=host)
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if until is not None:
        events = events.filter(occurred_at__lt=until)
    return events.select_related("device", "host", "project").order_by("-occurred_at", "-pk")


# The curves the host page draws per GPU, and the energy counter its kWh come from.
CURVE_FIELDS = (
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_GPU_UTIL",
)
ENERGY_FIELD = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def host_gpu_history(
    *,
    host: Host,
    since: datetime,
    until: datetime,
    fields: tuple[str, ...] = (*CURVE_FIELDS, ENERGY_FIELD),
    now: datetime | None = None,
) -> list[tuple[int, datetime, str, float]]:
    """Every GPU of the host's readings of `fields` in [since, until), oldest first, as
    (device id, time, field, value): the raw samples where they are still kept
    (raw_kept_since; DEVICE_SAMPLE_RETENTION_DAYS), each 5-minute summary's mean before that.
    Two queries, whatever the number of GPUs."""
    kept_since = raw_kept_since(now=now or datetime.now(UTC))
    positions = [
        (field, SUMMARY_FIELDS.index(field)) for field in fields if field in SUMMARY_FIELDS
    ]
    devices = Device.objects.filter(host=host).values("pk")
    rows: list[tuple[int, datetime, str, float]] = []
    if since < kept_since and positions:
        columns = [
            column for _, i in positions for column in (f"sample_counts__{i}", f"value_sums__{i}")
        ]
        buckets = (
            DeviceSampleSummary.objects.filter(
                device__in=devices,
                bucket_start__gt=since - timedelta(seconds=SUMMARY_BUCKET_S),
                bucket_start__lt=min(until, kept_since),
            )
            .order_by("bucket_start")
            .values_list("device_id", "bucket_start", *columns)
        )
        for device_id, start, *values in buckets:
            for n, (field, _) in enumerate(positions):
                count, total = values[2 * n], values[2 * n + 1]
                if count:
                    rows.append((device_id, start, field, total / count))
    if positions:
        raw = (
            DeviceSample.objects.filter(
                device__in=devices, sampled_at__gte=max(since, kept_since), sampled_at__lt=until
            )
            .order_by("sampled_at")
            .values_list("device_id", "sampled_at", *[f"readings__{i}" for _, i in positions])
        )
        for device_id, at, *values in raw:
            for (field, _), value in zip(positions, values, strict=True):
                if value is not None:
                    rows.append((device_id, at, field, value))
    return rows


def host_readings_between(
    *,
    project_id: int,
    host_names: Iterable[str],
    fields: Sequence[str],
    since: datetime,
    until: datetime,
) -> dict[str, list[tuple[str, float, dict[str, float]]]]:
    """host name -> its GPUs' raw readings of `fields` in [since, until], oldest first, each
    (device uuid, epoch seconds, {field: value}) with the fields that push carried: what a
    slowdown's DCGM evidence is read from. Only the project's own hosts. One query."""
    positions = [(name, list(FIELDS).index(name)) for name in fields if name in FIELDS]
    names = sorted(set(host_names))
    if not names or not positions:
        return {}
    rows = (
        DeviceSample.objects.filter(
            device__project_id=project_id,
            device__host__name__in=names,
            sampled_at__gte=since,
            sampled_at__lte=until,
        )
        .order_by("sampled_at")
        .values_list("device__host__name", "device__uuid", "sampled_at", "readings")
    )
    found: dict[str, list[tuple[str, float, dict[str, float]]]] = {}
    for host, uuid, at, readings in rows:
        values = {
            name: readings[i]
            for name, i in positions
            if i < len(readings) and readings[i] is not None
        }
        found.setdefault(host, []).append((uuid, at.timestamp(), values))
    return found


# The run page's power and heat chart: at most this many time buckets, whatever the run's
# length (a bucket is a whole number of 5-minute summaries).
POWER_HEAT_MAX_POINTS = 2000
POWER_FIELD = "DCGM_FI_DEV_POWER_USAGE"
TEMP_FIELD = "DCGM_FI_DEV_GPU_TEMP"


@dataclass(frozen=True)
class PowerHeatPoint:
    at: datetime  # the bucket's start
    power_w: float | None  # the GPUs' summed mean power over the bucket
    temp_max_c: float | None  # the hottest reading of any GPU in the bucket


_DEVICE = Device._meta.db_table
_SUMMARY = DeviceSampleSummary._meta.db_table
_ATTEMPT = Attempt._meta.db_table
_ATTEMPT_HOSTS = Attempt.hosts.through._meta.db_table
# Each attempt's window (start to end, or now) over its hosts' GPUs' 5-minute summaries,
# grouped into buckets of a whole number of summaries sized so that the run gives at most
# %(points)s: first each GPU's mean power and hottest temperature per bucket (a GPU pushing
# every 30 s has ten readings a summary; they are averaged, not added), then the GPUs' power
# added up and their temperatures' maximum. A host in two attempts whose windows overlap
# reads its rows twice, which changes neither a mean nor a maximum. Arrays are 1-based.
_POWER_HEAT = (
    "WITH spans AS ("
    "  SELECT id, started_at AS since, coalesce(ended_at, %(now)s) AS until "
    f" FROM {_ATTEMPT} WHERE run_id = %(run)s AND started_at IS NOT NULL), "
    "width AS ("
    "  SELECT min(since) AS origin, greatest(%(bucket)s, ceil(date_part('epoch', "
    "    max(until) - min(since)) / %(points)s / %(bucket)s) * %(bucket)s) AS s FROM spans), "
    "per_gpu AS ("
    "  SELECT floor(date_part('epoch', m.bucket_start - width.origin) / width.s) AS n, "
    "    m.device_id, sum(m.value_sums[%(power)s]) / nullif(sum(m.sample_counts[%(power)s]), 0) "
    "    AS power_w, max(m.value_maxes[%(temp)s]) AS temp_c "
    f" FROM spans JOIN {_ATTEMPT_HOSTS} ah ON ah.attempt_id = spans.id "
    f" JOIN {_DEVICE} d ON d.host_id = ah.host_id "
    f" JOIN {_SUMMARY} m ON m.device_id = d.id "
    "   AND m.bucket_start > spans.since - make_interval(secs => %(bucket)s) "
    "   AND m.bucket_start < spans.until "
    "  CROSS JOIN width GROUP BY 1, 2) "
    "SELECT width.origin + make_interval(secs => n * width.s), sum(power_w), max(temp_c) "
    "FROM per_gpu CROSS JOIN width GROUP BY n, width.origin, width.s "
    "HAVING sum(power_w) IS NOT NULL OR max(temp_c) IS NOT NULL ORDER BY n"
)


def run_power_heat(
    *, run: Run, now: datetime | None = None, max_points: int = POWER_HEAT_MAX_POINTS
) -> list[PowerHeatPoint]:
    """The run's GPUs' summed power (W) and hottest temperature (°C) over time, oldest first:
    for each attempt, the GPUs of its hosts (Attempt.hosts) between its start and its end,
    from the 5-minute summaries (kept as long as the devices; every push adds to them, so
    they hold what the raw samples do, at 5-minute grain). At most `max_points` buckets, each
    a whole number of summaries. Empty when the hosts sent no DCGM readings. One query."""
    params = {
        "now": now or datetime.now(UTC),
        "run": run.pk,
        "bucket": SUMMARY_BUCKET_S,
        "points": max_points,
        "power": SUMMARY_FIELDS.index(POWER_FIELD) + 1,
        "temp": SUMMARY_FIELDS.index(TEMP_FIELD) + 1,
    }
    with connections[router.db_for_read(DeviceSampleSummary)].cursor() as cursor:
        cursor.execute(_POWER_HEAT, params)
        return [PowerHeatPoint(at, power, temp) for at, power, temp in cursor.fetchall()]
