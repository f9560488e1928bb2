"""Prometheus remote-write 1.0 (a snappy-compressed protobuf `WriteRequest`), turned into the
same per-GPU readings as dcgm-exporter's text (ingest.prometheus). Pure: no ORM, no I/O.

A Prometheus that scrapes every dcgm-exporter forwards their series here; a series is matched
to its GPU by the labels dcgm-exporter sets (`Hostname`, `UUID`, `gpu`, `modelName`), the host
falling back to Prometheus's `instance` (its host part) when the exporter runs with
--no-hostname, or to label names the sender chooses (`?host_label=`, `?uuid_label=`). Only the
DCGM fields of telemetry.dcgm.FIELDS are kept; every other series is counted and dropped
without being looked at further. A GPU seen at several scrape times in one request (a
Prometheus catching up after an outage) yields one round of readings per time, oldest first,
so its health events are compared in order as a pusher's would be.

The protobuf messages are described here (the four fields Chronicle reads, numbered as in
Prometheus's prompb/types.proto and remote.proto) and decoded by the `protobuf` package;
the body is decompressed by `cramjam` (snappy's block format, which remote-write uses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import cramjam
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from ingest.checks import MAX_FUTURE_SKEW
from ingest.prometheus import (
    HOST_LABELS,
    LINK_LABELS,
    MAX_HOST_CHARS,
    MAX_UUID_CHARS,
    MAX_XID,
    UUID_LABELS,
    GpuDescription,
    field_name_of,
    gpu_describe,
    gpu_description,
    printable,
)
from telemetry.dcgm import XID, GpuReadings, is_reading
from telemetry.hardware_names import hardware_name_problem

# A request of Prometheus's defaults (max_samples_per_send 2,000) is ~150 KB uncompressed;
# this leaves room for larger senders (vmagent, Alloy) and refuses a body that would not fit.
MAX_SAMPLES = 200_000
# Scrape times of one GPU in one request: a Prometheus catching up sends a few; each is a
# round of health comparisons, so a series of thousands is refused rather than replayed.
MAX_ROUNDS = 120
MAX_LABEL_CHARS = 4_096

CONTENT_TYPE = "application/x-protobuf"


class RemoteWriteError(Exception):
    """A request that cannot be accepted; `status` is the HTTP answer (400, 413 or 415).
    Prometheus drops a request answered 4xx and retries one answered 5xx."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _message_classes() -> dict[str, type]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="chronicle_prompb.proto", package="chronicle_prompb", syntax="proto3"
    )

    def message(name: str, fields: list[tuple[str, int, int, int, str | None]]) -> None:
        described = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            entry = described.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = type_name

    f = descriptor_pb2.FieldDescriptorProto
    message("Label", [("name", 1, f.TYPE_STRING, f.LABEL_OPTIONAL, None),
                      ("value", 2, f.TYPE_STRING, f.LABEL_OPTIONAL, None)])  # fmt: skip
    message("Sample", [("value", 1, f.TYPE_DOUBLE, f.LABEL_OPTIONAL, None),
                       ("timestamp", 2, f.TYPE_INT64, f.LABEL_OPTIONAL, None)])  # fmt: skip
    message("TimeSeries", [
        ("labels", 1, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".chronicle_prompb.Label"),
        ("samples", 2, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".chronicle_prompb.Sample"),
    ])  # fmt: skip
    message("WriteRequest", [
        ("timeseries", 1, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".chronicle_prompb.TimeSeries"),
    ])  # fmt: skip
    # The same wire format with each Label left as its bytes, for the receiver: reading a
    # Label message's two strings through the protobuf package's Python objects was half a
    # request's CPU, and a request repeats each label on many series, so each distinct
    # label's bytes are decoded once, as a Label (_label_decode).
    message("TimeSeriesLabelsUndecoded", [
        ("labels", 1, f.TYPE_BYTES, f.LABEL_REPEATED, None),
        ("samples", 2, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".chronicle_prompb.Sample"),
    ])  # fmt: skip
    message("WriteRequestLabelsUndecoded", [
        ("timeseries", 1, f.TYPE_MESSAGE, f.LABEL_REPEATED,
         ".chronicle_prompb.TimeSeriesLabelsUndecoded"),
    ])  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        described.name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"chronicle_prompb.{described.name}")
        )
        for described in proto.message_type
    }


_CLASSES = _message_classes()
WriteRequest = _CLASSES["WriteRequest"]
Label = _CLASSES["Label"]
_WriteRequestLabelsUndecoded = _CLASSES["WriteRequestLabelsUndecoded"]


@dataclass
class RemoteWrite:
    """What one request says: rounds of readings (each a list of GPUs, oldest round first)
    and what was dropped, by reason."""

    rounds: list[list[GpuReadings]]
    samples: int = 0
    series: int = 0
    skipped_samples: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + count


def body_decompress(raw: bytes, *, limit: int) -> bytes:
    """The snappy block's content, refused before inflating when its declared length (the
    block's leading varint) is over `limit`."""
    declared = _uvarint(raw)
    if declared is None:
        raise RemoteWriteError(400, "The body is not snappy-compressed (no length header).")
    if declared > limit:
        raise RemoteWriteError(
            413, f"The decompressed body would be {declared} bytes; the limit is {limit} bytes."
        )
    try:
        return bytes(cramjam.snappy.decompress_raw(raw))
    except cramjam.DecompressionError as exc:
        raise RemoteWriteError(400, f"The snappy body is corrupt: {exc}.") from exc


def _uvarint(raw: bytes) -> int | None:
    value = 0
    for position, byte in enumerate(raw[:10]):
        value |= (byte & 0x7F) << (7 * position)
        if byte < 0x80:
            return value
    return None


def write_request_parse(
    body: bytes,
    *,
    host_labels: tuple[str, ...] = (),
    uuid_labels: tuple[str, ...] = (),
    now: datetime | None = None,
) -> RemoteWrite:
    """The request's DCGM readings per GPU and scrape time. `host_labels`/`uuid_labels` are
    tried before dcgm-exporter's own names. Raises RemoteWriteError on a body that is not a
    WriteRequest or is over the limits; series that name no GPU are dropped and counted."""
    request = _WriteRequestLabelsUndecoded()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise RemoteWriteError(400, f"The body is not a remote-write WriteRequest: {exc}.") from exc
    future_limit_ms = ((now or datetime.now(UTC)) + MAX_FUTURE_SKEW).timestamp() * 1000
    result = RemoteWrite(rounds=[])
    reader = _Reader(
        host_names=(*host_labels, *HOST_LABELS), uuid_names=(*uuid_labels, *UUID_LABELS)
    )
    # The series of a request's GPU differ only in their name (and an XID's err_code and
    # err_msg), and a sender sorts labels by name (remote-write 1.0 says it must), so the
    # name sits at the same place in each: a series whose other labels, as sent, are a label
    # set already read, and whose label at that place is a name already read, needs neither
    # decoded again (per series: each label decoded and its label set looked at was 60% of
    # a request's CPU). Anything else is read in full (_Reader.series_read).
    name_at = 0
    samples_seen = 0
    fields_get, targets_get = reader.fields.get, reader.targets.get
    for series in request.timeseries:
        samples = series.samples
        samples_seen += len(samples)
        if samples_seen > MAX_SAMPLES:
            raise RemoteWriteError(
                413, f"More than {MAX_SAMPLES} samples in one request; lower "
                "queue_config.max_samples_per_send."
            )  # fmt: skip
        raw = tuple(series.labels)
        target = None
        if name_at < len(raw):
            field_name = fields_get(raw[name_at], _UNSEEN)
            if field_name is not _UNSEEN:
                target = targets_get(raw[:name_at] + raw[name_at + 1 :])
        if target is None:
            field_name, target, name_at = reader.series_read(raw, name_at)
        if field_name is None:
            result.skipped_samples += len(samples)
            continue
        if isinstance(target, str):
            result.drop(target, len(samples))
            continue
        for sample in samples:
            value, stamp_ms = sample.value, sample.timestamp
            if not 0 <= stamp_ms <= future_limit_ms:
                result.drop("timestamp out of range")
                continue
            reading = is_reading(value)
            if field_name == XID and reading and not (value.is_integer() and 0 <= value <= MAX_XID):
                result.drop("XID not an XID code")
                continue
            gpu = target.gpus.get(stamp_ms) or reader.gpu_at(target, stamp_ms)
            gpu.fields_sent.add(field_name)
            if not reading:
                continue
            if field_name == XID:
                gpu.xid_message = target.xid_message
            if target.per_link:
                gpu.values[field_name] = gpu.values.get(field_name, 0.0) + value
            else:
                gpu.values[field_name] = value
            gpu.timestamps[field_name] = stamp_ms / 1000
    result.series = len(request.timeseries)
    result.samples = samples_seen
    # Round k holds each GPU's k-th scrape time: one round unless a GPU came more than once.
    for by_time in reader.gpus.values():
        for position, stamp in enumerate(sorted(by_time)):
            if position == len(result.rounds):
                result.rounds.append([])
            result.rounds[position].append(by_time[stamp])
    return result


_UNSEEN: Any = object()


@dataclass(eq=False)
class _Target:
    """What a series' labels but its name say: its GPU (host, UUID), what they tell of it, and
    whether the series is one link's (summed into the GPU's value); `gpus`: the GPU's readings
    at each scrape time (ms) that these labels have described."""

    place: tuple[str, str]
    description: GpuDescription
    per_link: bool
    xid_message: str
    gpus: dict[int, GpuReadings] = field(default_factory=dict)


class _Reader:
    """What one request's parse has read: labels by their bytes, the fields of name labels
    and the targets of label sets (both only from series with one name and no label twice,
    so that a hit reads as the series read in full would), and the GPUs."""

    def __init__(self, *, host_names: tuple[str, ...], uuid_names: tuple[str, ...]) -> None:
        self.host_names = host_names
        self.uuid_names = uuid_names
        self.decoded: dict[bytes, tuple[str, str]] = {}
        self.names: dict[str, str | None] = {}
        # A name label's bytes -> its field (None: not kept).
        self.fields: dict[bytes, str | None] = {}
        # The labels but the name, as sent -> their target, or the reason they name no GPU.
        self.targets: dict[tuple[bytes, ...], _Target | str] = {}
        # Per GPU, its readings at each scrape time (ms) of this request.
        self.gpus: dict[tuple[str, str], dict[int, GpuReadings]] = {}

    def series_read(
        self, raw: tuple[bytes, ...], name_at: int
    ) -> tuple[str | None, _Target | str, int]:
        """A series' field and target from its labels decoded, and where its name label was
        (`name_at` when it has none or several)."""
        decoded = self.decoded
        pairs = [decoded.get(label) or self._label_decode(label) for label in raw]
        labels = dict(pairs)
        name = labels.pop("__name__", "")
        field_name = self.names.get(name, _UNSEEN)
        if field_name is _UNSEEN:
            field_name = self.names[name] = field_name_of(name)
        at = [position for position, (label, _) in enumerate(pairs) if label == "__name__"]
        clean = len(at) == 1 and len(labels) == len(pairs) - 1
        rest = raw[: at[0]] + raw[at[0] + 1 :] if clean else ()
        target = self.targets.get(rest) if clean else None
        if target is None:
            target = _target(labels, self.host_names, self.uuid_names)
        if clean:
            self.fields[raw[at[0]]] = field_name
            self.targets[rest] = target
            name_at = at[0]
        return field_name, target, name_at

    def _label_decode(self, raw: bytes) -> tuple[str, str]:
        """A prompb.Label's (name, value), decoded by the protobuf package once per request."""
        pair = self.decoded.get(raw)
        if pair is None:
            try:
                label = Label.FromString(raw)
            except DecodeError as exc:
                raise RemoteWriteError(
                    400, f"The body is not a remote-write WriteRequest: a label: {exc}."
                ) from exc
            pair = self.decoded[raw] = (label.name, label.value)
        return pair

    def gpu_at(self, target: _Target, stamp_ms: int) -> GpuReadings:
        """The readings of the target's GPU at `stamp_ms`, made on first sight, and described
        by the target's labels where no series before them did."""
        by_time = self.gpus.setdefault(target.place, {})
        gpu = by_time.get(stamp_ms)
        if gpu is None:
            if len(by_time) >= MAX_ROUNDS:
                host, uuid = target.place
                raise RemoteWriteError(
                    400, f"GPU {uuid} of {host} has samples at more than {MAX_ROUNDS} times "
                    f"in one request; send at most {MAX_ROUNDS} scrapes of a series per "
                    "request."
                )  # fmt: skip
            gpu = by_time[stamp_ms] = GpuReadings(host=target.place[0], uuid=target.place[1])
        gpu_describe(gpu, target.description)
        target.gpus[stamp_ms] = gpu
        return gpu


def _target(
    labels: Mapping[str, str], host_names: tuple[str, ...], uuid_names: tuple[str, ...]
) -> _Target | str:
    """The target of a label set, or the reason it names no GPU."""
    place = _gpu_of(labels, host_names, uuid_names)
    if isinstance(place, str):
        return place
    return _Target(
        place=place,
        description=gpu_description(labels),
        per_link=any(label in labels for label in LINK_LABELS),
        xid_message=printable(labels.get("err_msg", ""))[:200],
    )


def _gpu_of(
    labels: Mapping[str, str], host_names: tuple[str, ...], uuid_names: tuple[str, ...]
) -> tuple[str, str] | str:
    """(host, UUID) of a series, or the reason it names no GPU."""
    host = _first(labels, host_names) or _instance_host(labels.get("instance", ""))
    uuid = _first(labels, uuid_names)
    if not host:
        return "no host label (Hostname, hostname, instance or host_label)"
    if not uuid:
        return "no UUID label"
    for what, value, limit in (("host", host, MAX_HOST_CHARS), ("UUID", uuid, MAX_UUID_CHARS)):
        if len(value) > limit or hardware_name_problem(value):
            return f"{what} name not storable"
    if max(map(len, labels.values()), default=0) > MAX_LABEL_CHARS:
        return "label value too long"
    return host, uuid


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name, "").strip()
        if value:
            return value
    return ""


def _instance_host(instance: str) -> str:
    """The host part of Prometheus's `instance` (host:port, [v6]:port or a bare host)."""
    instance = instance.strip()
    if instance.startswith("["):
        return instance[1 : instance.find("]")] if "]" in instance else ""
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance
