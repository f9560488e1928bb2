"""Prometheus text exposition from NVIDIA's dcgm-exporter, turned into per-GPU readings. Pure:
no ORM, no I/O.

Lines are parsed one at a time with prometheus_client's own parser so that an error names
its line, and so that sample names stay as sent (the parser renames a counter's samples to
`<name>_total`; dcgm-exporter's do not carry that suffix, Pushgateway clients' do, and both
are accepted). Only the DCGM fields of telemetry.dcgm.FIELDS are kept: a push through a
Pushgateway client also carries the pushing process's own metrics, which are skipped.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

from ingest.checks import MAX_FUTURE_SKEW
from telemetry.dcgm import FIELDS, XID, GpuReadings, is_reading
from telemetry.hardware_names import hardware_name_problem

MAX_SAMPLE_LINES = 20_000
# Device.uuid and Host.name column widths.
MAX_UUID_CHARS = 128
MAX_HOST_CHARS = 255

HOST_LABELS = ("Hostname", "hostname")  # dcgm-exporter <= 4.5.x, then master
UUID_LABELS = ("UUID", "uuid", "gpu_uuid")  # default, old namespace, per-NVLink metrics
MODEL_LABELS = ("modelName", "model_name")
PCI_LABELS = ("pci_bus_id",)
MAX_PCI_CHARS = 32
# Per-link samples of one GPU are summed into the GPU's value.
LINK_LABELS = ("nvlink", "link")
MAX_GPU_INDEX = 32_767  # Device.index_on_host is a small integer
MAX_XID = 2**31 - 1
# Sample timestamps Python can turn into a datetime (epoch seconds, years 1970 to 9999).
MAX_TIMESTAMP_S = 253_402_300_799
# Grouping labels of a Pushgateway path that name the host.
PATH_HOST_LABELS = ("hostname", "Hostname", "host")
# Labels that place the host (added by a Prometheus relabelling, the exporter's
# Kubernetes node labels, or a Pushgateway path's grouping labels): level -> label names.
PLACEMENT_LABELS = {
    "rack": ("rack",),
    "pod": ("pod", "superpod"),
    "cluster": ("cluster",),
    "site": ("site",),
}
MAX_LEVEL_CHARS = 100  # Host.rack / Host.pod, Cluster.name, Site.name
_PLACEMENT_NAMES = frozenset(name for names in PLACEMENT_LABELS.values() for name in names)


class ExpositionError(Exception):
    """A push that cannot be accepted; `status` is the HTTP answer (400 or 413)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class Exposition:
    gpus: list[GpuReadings]
    sample_lines: int
    # Samples of metrics Chronicle does not keep, by metric name.
    skipped: dict[str, int]


def exposition_parse(*, text: str, default_host: str = "") -> Exposition:
    """Readings per (host, GPU UUID). `default_host` (from ?host= or a Pushgateway path's
    grouping labels) names the host of samples without a host label: the exporter's own label
    wins. Raises ExpositionError naming the line."""
    gpus: dict[tuple[str, str], GpuReadings] = {}
    skipped: dict[str, int] = {}
    sample_lines = 0
    # An exporter repeats each GPU's labels on every field's line, and each field's name on
    # every GPU's: parse and check a label text, find its GPU, and map a name to its field
    # once per push (parsing 0.75 -> 0.4 ms a push with the label sets alone).
    memo = _Memo()
    targets: dict[int, _Target] = {}
    future_limit_s = (datetime.now(UTC) + MAX_FUTURE_SKEW).timestamp()
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] == "#":
            continue
        sample_lines += 1
        if sample_lines > MAX_SAMPLE_LINES:
            raise ExpositionError(
                413, f"More than {MAX_SAMPLE_LINES} samples in one push; the limit is "
                f"{MAX_SAMPLE_LINES}. Split the push (e.g. one per host)."
            )  # fmt: skip
        (name, labels, value, timestamp_s), shared = _sample_parse(number, stripped, memo)
        field_name = memo.fields.get(name, _UNSEEN)
        if field_name is _UNSEEN:
            field_name = memo.fields[name] = field_name_of(name)
        if field_name is None:
            skipped[name] = skipped.get(name, 0) + 1
            continue
        # A shared labels dict lives as long as the parse: its id names its label set.
        target = targets.get(id(labels)) if shared else None
        if target is None:
            target = _target(number, name, labels, default_host, gpus)
            if shared:
                targets[id(labels)] = target
        if timestamp_s is not None:
            if not 0 <= timestamp_s <= MAX_TIMESTAMP_S:
                raise ExpositionError(
                    400, f"line {number}: the timestamp is not milliseconds since 1970 in a "
                    "year before 10000."
                )  # fmt: skip
            if timestamp_s > future_limit_s:
                # As JSON ingest: a reading from the future would pass for the latest one.
                raise ExpositionError(
                    400, f"line {number}: the timestamp is more than "
                    f"{MAX_FUTURE_SKEW.days} day in the future."
                )  # fmt: skip
        reading = is_reading(value)
        if field_name == XID and reading and not _is_code(value):
            raise ExpositionError(
                400, f"line {number}: {XID} must be an XID code (an integer from 0 to "
                f"{MAX_XID}), got {value!r}."
            )  # fmt: skip
        gpu = target.gpu
        gpu.fields_sent.add(field_name)
        if not reading:
            continue
        if field_name == XID:
            gpu.xid_message = printable(labels.get("err_msg", ""))[:200]
        if target.per_link and field_name in gpu.values:
            gpu.values[field_name] += value
        else:
            # MIG instances repeat the GPU's device-level fields: the last one stands.
            gpu.values[field_name] = value
        if timestamp_s is not None:
            gpu.timestamps[field_name] = timestamp_s
    return Exposition(gpus=list(gpus.values()), sample_lines=sample_lines, skipped=skipped)


@dataclass(frozen=True)
class _Target:
    """Where the samples of one label set go: their GPU, and whether they are one link's
    (summed into the GPU's value)."""

    gpu: GpuReadings
    per_link: bool


def _target(
    number: int,
    name: str,
    labels: Mapping[str, str],
    default_host: str,
    gpus: dict[tuple[str, str], GpuReadings],
) -> _Target:
    """The GPU a label set names (made on first sight, its names checked), described by the
    labels. Raises ExpositionError naming line `number` (sample `name`) when it names none."""
    host = _first(labels, HOST_LABELS) or default_host.strip()
    uuid = _first(labels, UUID_LABELS)
    if not host:
        raise ExpositionError(
            400, f"line {number}: {name} has no Hostname or hostname label; run "
            "dcgm-exporter without --no-hostname, or name the host in the URL "
            "(?host=<name>, or /hostname/<name> on the Pushgateway path)."
        )  # fmt: skip
    if not uuid:
        raise ExpositionError(400, f"line {number}: {name} has no UUID label.")
    gpu = gpus.get((host, uuid))
    if gpu is None:
        _name_check(number, "host name", host, MAX_HOST_CHARS)
        _name_check(number, "UUID", uuid, MAX_UUID_CHARS)
        gpu = gpus[(host, uuid)] = GpuReadings(host=host, uuid=uuid)
    describe_gpu(gpu, labels)
    return _Target(gpu=gpu, per_link=any(label in labels for label in LINK_LABELS))


# dcgm-exporter's own rendering, `name{label="value",...} value [timestamp_ms]` with plain
# label values, is read without prometheus_client: building its metric family for each line
# was 60% of a push's CPU (bench/results/history/2026-11-25-gpu-health-at-fleet-scale.md).
# The line is cut at its first `{` and last `}` (a value or timestamp has neither), and each
# part checked: the name and the label text once per push (they repeat on every line), the value and
# timestamp by a short pattern. Any other line (escapes, spaces, other number forms,
# duplicate or reserved labels) goes through prometheus_client's parser, which also words
# the errors. A line read here reads as the one pattern of the whole line read it before
# (`name\{(labels)\} value( timestamp)?`; tests/ingest/test_prometheus_parsing.py compares them).
_LABEL = r'[A-Za-z_][A-Za-z0-9_]*="[^"\\\n]*"'
_PLAIN_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_PLAIN_LABEL_TEXT = re.compile(rf"(?:{_LABEL}(?:,{_LABEL})*,?)?")
_PLAIN_VALUE = re.compile(
    r" ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|NaN|Inf))(?: (-?[0-9]+))?"
)
_PLAIN_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')
_UNSEEN = object()


class _Memo:
    """What one push's parse has already worked out, by the text it came from: names that
    are (or are not) plain, label texts (their labels; None when not plain), fields by
    sample name (None: not kept). The label dicts are shared between lines and must not be
    changed."""

    def __init__(self) -> None:
        self.names: dict[str, bool] = {}
        self.label_sets: dict[str, dict[str, str] | None] = {}
        self.fields: dict[str, str | None] = {}


Sample = tuple[str, dict[str, str], float, float | None]


def _sample_parse(number: int, line: str, memo: _Memo) -> tuple[Sample, bool]:
    """The line's sample, and whether its labels dict is the one shared by every line of the
    same label text (kept in `memo` for the whole push)."""
    plain = _plain_sample_parse(line, memo)
    if plain is not None:
        return plain, True
    return _library_sample_parse(number, line), False


def _plain_sample_parse(line: str, memo: _Memo | None = None) -> Sample | None:
    """The sample of a line in the exporter's plain rendering; None for any other line."""
    memo = _Memo() if memo is None else memo
    opening = line.find("{")
    closing = line.rfind("}")
    if opening < 0 or closing < opening:
        return None
    name = line[:opening]
    plain_name = memo.names.get(name)
    if plain_name is None:
        plain_name = memo.names[name] = _PLAIN_NAME.fullmatch(name) is not None
    if not plain_name:
        return None
    number = _PLAIN_VALUE.fullmatch(line, closing + 1)
    if number is None:
        return None
    label_text = line[opening + 1 : closing]
    labels = memo.label_sets.get(label_text, _UNSEEN)
    if labels is _UNSEEN:
        labels = memo.label_sets[label_text] = _plain_labels(label_text)
    if labels is None:
        return None
    value, timestamp = number.groups()
    # float(), not int(): a timestamp of 4,301 digits or past 1e309 becomes a float (inf at
    # worst) that the range check refuses, where int() raises; exact for any real one.
    return name, labels, float(value), float(timestamp) / 1000 if timestamp else None


def _plain_labels(label_text: str) -> dict[str, str] | None:
    if _PLAIN_LABEL_TEXT.fullmatch(label_text) is None:
        return None
    pairs = _PLAIN_LABEL.findall(label_text)
    labels = dict(pairs)
    if len(labels) != len(pairs) or any(key.startswith("__") for key in labels):
        return None
    return labels


def _library_sample_parse(number: int, line: str) -> Sample:
    try:
        families = list(text_string_to_metric_families(line + "\n"))
        samples = [sample for family in families for sample in family.samples]
        if len(samples) != 1:
            raise ExpositionError(
                400, f"line {number}: not a Prometheus text sample: {line[:200]!r}"
            )
        sample = samples[0]
        timestamp = sample.timestamp
        timestamp_s = float(timestamp) if timestamp is not None else None
        return sample.name, dict(sample.labels), float(sample.value), timestamp_s
    # OverflowError: prometheus_client reads "9" * 309 (and timestamps) with int(), which no
    # float holds (a 500, issue 42 finding 8).
    except (ValueError, IndexError, KeyError, OverflowError) as exc:
        raise ExpositionError(
            400, f"line {number}: not a Prometheus text sample ({exc}): {line[:200]!r}"
        ) from exc


def _name_check(number: int, what: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ExpositionError(400, f"line {number}: the {what} is longer than {limit} characters.")
    problem = hardware_name_problem(value)
    if problem:
        raise ExpositionError(400, f"line {number}: the {what}: {problem}")


def _is_code(value: float) -> bool:
    return value.is_integer() and 0 <= value <= MAX_XID


def field_name_of(name: str) -> str | None:
    """The DCGM field a sample name is, if Chronicle keeps it. Pushgateway clients expose a
    counter `X` as `X_total` (and `X_created`, which is skipped)."""
    if name in FIELDS:
        return name
    if name.endswith("_total") and name[: -len("_total")] in FIELDS:
        return name[: -len("_total")]
    return None


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str:
    for name in names:
        value = labels.get(name, "").strip()
        if value:
            return value
    return ""


@dataclass(frozen=True)
class GpuDescription:
    """What a label set says of its GPU beyond its name: index, model, PCI bus id, and where
    its host sits (empty values where the labels say nothing usable)."""

    gpu_index: int | None
    model_name: str
    pci_bus_id: str
    placement: dict[str, str]


def gpu_description(labels: Mapping[str, str]) -> GpuDescription:
    index = labels.get("gpu", "")
    # isdigit() is also true of "²" and other digits int() refuses: ASCII digits only.
    usable = (
        index.isascii()
        and index.isdigit()
        and len(index) <= len(str(MAX_GPU_INDEX))  # int() refuses over 4,300 digits
        and int(index) <= MAX_GPU_INDEX
    )
    return GpuDescription(
        gpu_index=int(index) if usable else None,
        model_name=printable(_first(labels, MODEL_LABELS))[:64],
        pci_bus_id=printable(_first(labels, PCI_LABELS))[:MAX_PCI_CHARS],
        placement=placement_of(labels),
    )


def gpu_describe(gpu: GpuReadings, description: GpuDescription) -> None:
    """Fill in what `gpu` does not know yet from `description`: the first label set that
    names each part wins."""
    if gpu.gpu_index is None:
        gpu.gpu_index = description.gpu_index
    if not gpu.model_name:
        gpu.model_name = description.model_name
    if not gpu.pci_bus_id:
        gpu.pci_bus_id = description.pci_bus_id
    if not gpu.placement and description.placement:
        gpu.placement = dict(description.placement)


def describe_gpu(gpu: GpuReadings, labels: Mapping[str, str]) -> None:
    gpu_describe(gpu, gpu_description(labels))


def placement_of(labels: Mapping[str, str]) -> dict[str, str]:
    """The levels `labels` name (printable, cut to their columns' width)."""
    if _PLACEMENT_NAMES.isdisjoint(labels):
        return {}  # most label sets name none: the common answer at once
    placed = {}
    for level, names in PLACEMENT_LABELS.items():
        value = printable(_first(labels, names))[:MAX_LEVEL_CHARS].strip()
        if value:
            placed[level] = value
    return placed


def printable(text: str) -> str:
    # isprintable() first: the whole text is checked in C, the usual answer.
    return text if text.isprintable() else "".join(c for c in text if c.isprintable())


def grouping_path_parse(path: str) -> dict[str, str]:
    """Labels of a Pushgateway path after /metrics/: `job/<job>{/<label>/<value>}`. A label
    written `<label>@base64` has a URL-safe base64 value (how clients send values with `/`
    or spaces, and `=` for an empty one). Raises ExpositionError (400) on a malformed path."""
    parts = path.strip("/").split("/")
    if len(parts) < 2 or len(parts) % 2 or parts[0] not in ("job", "job@base64"):
        raise ExpositionError(
            400, "The push path must be /metrics/job/<job>{/<label>/<value>}, got "
            f"/metrics/{path[:200]}."
        )  # fmt: skip
    labels: dict[str, str] = {}
    for name, value in zip(parts[::2], parts[1::2], strict=True):
        if name.endswith("@base64"):
            name = name[: -len("@base64")]
            try:
                padded = value + "=" * (-len(value) % 4)
                value = base64.urlsafe_b64decode(padded.encode()).decode()
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ExpositionError(
                    400, f"The push path label {name!r} is not valid base64: {value[:100]!r}."
                ) from exc
        if not name:
            raise ExpositionError(400, "The push path has an empty label name.")
        labels[name] = value
    return labels


def path_host(labels: Mapping[str, str]) -> str:
    """The host a Pushgateway path's grouping labels name, if any."""
    return _first(labels, PATH_HOST_LABELS)
