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
    describe_gpu,
    field_name_of,
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


def _write_request_class() -> type:
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
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("chronicle_prompb.WriteRequest")
    )


WriteRequest = _write_request_class()


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
    request = WriteRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise RemoteWriteError(400, f"The body is not a remote-write WriteRequest: {exc}.") from exc
    host_names = (*host_labels, *HOST_LABELS)
    uuid_names = (*uuid_labels, *UUID_LABELS)
    future_limit_ms = ((now or datetime.now(UTC)) + MAX_FUTURE_SKEW).timestamp() * 1000
    result = RemoteWrite(rounds=[])
    # Per GPU, its readings at each scrape time (ms) of this request.
    gpus: dict[tuple[str, str], dict[int, GpuReadings]] = {}
    fields_memo: dict[str, str | None] = {}
    for series in request.timeseries:
        result.series += 1
        samples = series.samples
        result.samples += len(samples)
        if result.samples > MAX_SAMPLES:
            raise RemoteWriteError(
                413, f"More than {MAX_SAMPLES} samples in one request; lower "
                "queue_config.max_samples_per_send."
            )  # fmt: skip
        labels = {label.name: label.value for label in series.labels}
        name = labels.get("__name__", "")
        field_name = fields_memo.get(name, _UNSEEN)
        if field_name is _UNSEEN:
            field_name = fields_memo[name] = field_name_of(name)
        if field_name is None:
            result.skipped_samples += len(samples)
            continue
        place = _gpu_of(labels, host_names, uuid_names)
        if isinstance(place, str):
            result.drop(place, len(samples))
            continue
        by_time = gpus.setdefault(place, {})
        for sample in samples:
            value, stamp_ms = sample.value, sample.timestamp
            if not 0 <= stamp_ms <= future_limit_ms:
                result.drop("timestamp out of range")
                continue
            reading = is_reading(value)
            if field_name == XID and reading and not (value.is_integer() and 0 <= value <= MAX_XID):
                result.drop("XID not an XID code")
                continue
            gpu = by_time.get(stamp_ms)
            if gpu is None:
                if len(by_time) >= MAX_ROUNDS:
                    raise RemoteWriteError(
                        400, f"GPU {place[1]} of {place[0]} has samples at more than "
                        f"{MAX_ROUNDS} times in one request; send at most {MAX_ROUNDS} "
                        "scrapes of a series per request."
                    )  # fmt: skip
                gpu = by_time[stamp_ms] = GpuReadings(host=place[0], uuid=place[1])
            describe_gpu(gpu, labels)
            gpu.fields_sent.add(field_name)
            if not reading:
                continue
            if field_name == XID:
                gpu.xid_message = printable(labels.get("err_msg", ""))[:200]
            if any(label in labels for label in LINK_LABELS):
                gpu.values[field_name] = gpu.values.get(field_name, 0.0) + value
            else:
                gpu.values[field_name] = value
            gpu.timestamps[field_name] = stamp_ms / 1000
    # Round k holds each GPU's k-th scrape time: one round unless a GPU came more than once.
    for by_time in gpus.values():
        for position, stamp in enumerate(sorted(by_time)):
            if position == len(result.rounds):
                result.rounds.append([])
            result.rounds[position].append(by_time[stamp])
    return result


_UNSEEN = object()


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
    if any(len(value) > MAX_LABEL_CHARS for value in labels.values()):
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
