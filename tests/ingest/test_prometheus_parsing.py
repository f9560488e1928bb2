"""dcgm-exporter text as /api/v1/ingest/prometheus reads it, without a database: parsing and
field mapping (both host label spellings), the plain line reader against prometheus_client,
bad lines named, the grouping path, and the rules that turn counters into health events."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import prometheus
from ingest.prometheus import ExpositionError, exposition_parse, grouping_path_parse
from telemetry import dcgm
from telemetry.dcgm import FIELDS, events_detect
from tests.ingest.dcgm_exposition import A01_GPU0, A01_GPU1, B07_GPU0, DBE, FIXTURE, UNMAPPED, XID

# --- Parsing and mapping (pure) ----------------------------------------------------------------


def test_fixture_maps_every_field_on_both_host_label_spellings():
    # when the fixture (one host labelled Hostname, one hostname) is parsed
    parsed = exposition_parse(text=FIXTURE)

    # then each of the four GPUs carries every mapped field, on the right host
    by_uuid = {gpu.uuid: gpu for gpu in parsed.gpus}
    assert {(gpu.host, gpu.gpu_index) for gpu in parsed.gpus} == {
        ("node-a01", 0), ("node-a01", 1), ("node-b07", 0), ("node-b07", 1),
    }  # fmt: skip
    for gpu in parsed.gpus:
        assert gpu.fields_sent == set(FIELDS)
        assert set(gpu.values) == set(FIELDS)
        assert gpu.model_name == "NVIDIA H100 80GB HBM3"
    # values as written in the fixture
    assert by_uuid[A01_GPU0].values["DCGM_FI_DEV_POWER_USAGE"] == 612.457
    assert by_uuid[A01_GPU1].values["DCGM_FI_DEV_SM_CLOCK"] == 1755
    assert by_uuid[B07_GPU0].values["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] == 3
    assert by_uuid[B07_GPU0].values["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] == 1
    assert by_uuid[A01_GPU1].values["DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"] == 14
    assert by_uuid[A01_GPU0].xid_message == "No Error"
    # and the five unmapped families (4 samples each) are counted as skipped
    assert parsed.skipped == {name: 4 for name in UNMAPPED}
    assert parsed.sample_lines == (len(FIELDS) + len(UNMAPPED)) * 4


EDGE_LINES = [
    'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-x",Hostname="n1",} 1410 1763700000000',
    'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-x"} -1.5e3 -5',
    "DCGM_FI_DEV_SM_CLOCK{} NaN",
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"} +Inf',
    'DCGM_FI_DEV_MEMORY_TEMP{UUID="GPU-x"} 9223372036854775794',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x",UUID="GPU-y"} 1',  # duplicate label: refused
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"Hostname="n1"} 1',  # no comma: refused
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-\\"x"} 1',  # escaped quote: the library reads it
    'DCGM_FI_DEV_SM_CLOCK{__name__="x",UUID="GPU-x"} 1',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"} 1_000',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"} 0x10',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"} 12 1.5',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x",err_msg="a} 3"} 4',  # a brace and a value in a label
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-{x}"} 5 6',
    'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x"} 7 }',
]


def test_the_plain_line_reader_agrees_with_prometheus_client():
    # given every sample line of the fixture and some edge cases
    lines = [line for line in FIXTURE.split("\n") if line and not line.startswith("#")]

    # then each line the fast reader takes gives what prometheus_client's parser gives, and
    # the lines it leaves (or refuses) go to the library, which refuses the bad ones
    for line in lines + EDGE_LINES:
        plain = prometheus._plain_sample_parse(line)
        try:
            library = prometheus._library_sample_parse(1, line)
        except ExpositionError:
            assert plain is None, line
            continue
        assert plain is None or repr(plain) == repr(library), line  # repr: NaN == NaN
    # and the exporter's own rendering never needs the library
    assert all(prometheus._plain_sample_parse(line) for line in lines)
    assert prometheus._plain_sample_parse(EDGE_LINES[0]) == (
        "DCGM_FI_DEV_SM_CLOCK", {"gpu": "0", "UUID": "GPU-x", "Hostname": "n1"}, 1410.0,
        1763700000.0,
    )  # fmt: skip


# The plain-line reader before it cut lines at their braces: one pattern for the whole line.
_WHOLE_LINE_LABEL = r'[A-Za-z_][A-Za-z0-9_]*="[^"\\\n]*"'
_WHOLE_LINE = re.compile(
    rf"([A-Za-z_:][A-Za-z0-9_:]*)\{{((?:{_WHOLE_LINE_LABEL}(?:,{_WHOLE_LINE_LABEL})*,?)?)\}}"
    r" ([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|NaN|Inf))(?: (-?[0-9]+))?"
)


def _whole_line_read(line: str) -> tuple[Any, ...] | None:
    plain = _WHOLE_LINE.fullmatch(line)
    if plain is None:
        return None
    name, label_text, value, timestamp = plain.groups()
    pairs = re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"', label_text)
    labels = dict(pairs)
    if len(labels) != len(pairs) or any(key.startswith("__") for key in labels):
        return None
    return name, labels, float(value), float(timestamp) / 1000 if timestamp else None


_PIECES = st.sampled_from([
    "DCGM_FI_DEV_SM_CLOCK", "a:b", "9x", "{", "}", "} ", '"', "\\", ",", "=", " ", "_",
    'UUID="GPU-x"', 'gpu="0"', 'err_msg="a}b"', 'x="{"', 'x="} 1"', "__name__", "1", "-2.5e3",
    "NaN", "+Inf", " 17", " 1763700000000", "0x10", "1_0", "\n", "\t",
])  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=12))
def test_the_plain_line_reader_reads_as_the_whole_line_pattern(pieces: list[str]) -> None:
    # given any line, most of them shaped like a sample (a name, braces, labels, a value)
    line = "".join(pieces)
    for candidate in (line, f"DCGM_FI_DEV_SM_CLOCK{{{line}}} 1", f'M{{UUID="{line}"}} 2 3'):
        # then the reader that cuts it at its braces reads it as the one pattern did
        assert repr(prometheus._plain_sample_parse(candidate)) == repr(
            _whole_line_read(candidate)
        ), candidate


FLIT = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"


def test_pushgateway_counter_names_and_per_link_samples():
    # given a Pushgateway client's rendering (X_total and X_created for a counter X), a blank
    # DCGM sentinel, NaN, and a per-link NVLink counter
    text = "\n".join([
        '# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter',
        'DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total{UUID="GPU-x",hostname="n1"} 7.0',
        'DCGM_FI_DEV_PCIE_REPLAY_COUNTER_created{UUID="GPU-x",hostname="n1"} 1.76e9',
        'DCGM_FI_DEV_MEMORY_TEMP{UUID="GPU-x",hostname="n1"} 9223372036854775794',
        'DCGM_FI_DEV_GPU_TEMP{UUID="GPU-x",hostname="n1"} NaN',
        f'{FLIT}{{gpu_uuid="GPU-x",hostname="n1",nvlink="0"}} 2',
        f'{FLIT}{{gpu_uuid="GPU-x",hostname="n1",nvlink="1"}} 3',
        'DCGM_FI_DEV_SM_CLOCK{UUID="GPU-x",hostname="n1"} 1410 1763700000000',
    ])  # fmt: skip

    # when parsed
    (gpu,) = exposition_parse(text=text).gpus

    # then the counter is read under its DCGM name, blanks are sent but not readings, links sum
    assert gpu.values == {
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 7.0,
        FLIT: 5.0,
        "DCGM_FI_DEV_SM_CLOCK": 1410.0,
    }
    assert {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP"} <= gpu.fields_sent
    assert gpu.timestamps == {"DCGM_FI_DEV_SM_CLOCK": 1_763_700_000.0}


# Two to three days ahead, whole days: a test id that names it is the same in every process
# that collects it (pytest-xdist requires the same ids in each).
IN_TWO_DAYS_MS = int((datetime.now(UTC).timestamp() + 3 * 86_400) // 86_400 * 86_400 * 1000)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('DCGM_FI_DEV_GPU_TEMP{UUID="G",Hostname="h"} 60\nDCGM_FI_DEV_GPU_TEMP{UUID="G" 61\n',
         "line 2: not a Prometheus text sample"),
        ('# HELP x\n\nDCGM_FI_DEV_GPU_TEMP{UUID="G"} 60\n', "line 3: DCGM_FI_DEV_GPU_TEMP has no "
         "Hostname or hostname label"),
        ('DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h"} 60\n', "line 1: DCGM_FI_DEV_GPU_TEMP has no "
         "UUID label"),
        ('DCGM_FI_DEV_GPU_TEMP{UUID="G",Hostname="a/b"} 60\n', "line 1: the host name: 'a/b' is "
         "not a host or device name"),
        ('DCGM_FI_DEV_XID_ERRORS{UUID="G",Hostname="h"} 79.5\n', "line 1: DCGM_FI_DEV_XID_ERRORS "
         "must be an XID code"),
        (f'DCGM_FI_DEV_GPU_TEMP{{UUID="G",Hostname="h"}} 60 {IN_TWO_DAYS_MS}\n',
         "line 1: the timestamp is more than 1 day in the future"),
    ],
)  # fmt: skip
def test_bad_lines_are_named(text, message):
    with pytest.raises(ExpositionError) as caught:
        exposition_parse(text=text)
    assert caught.value.status == 400
    assert caught.value.detail.startswith(message), caught.value.detail


def test_default_host_only_where_the_exporter_names_none():
    text = 'DCGM_FI_DEV_GPU_TEMP{UUID="G1"} 60\nDCGM_FI_DEV_GPU_TEMP{UUID="G2",hostname="b"} 61\n'
    parsed = exposition_parse(text=text, default_host="a")
    assert {(gpu.uuid, gpu.host) for gpu in parsed.gpus} == {("G1", "a"), ("G2", "b")}


def test_grouping_path_as_prometheus_client_builds_it():
    # job "dcgm", a host label, and a value with a slash (sent as base64 by the client)
    assert grouping_path_parse("job/dcgm/hostname/node-c03/rack@base64/cm93L2E=") == {
        "job": "dcgm",
        "hostname": "node-c03",
        "rack": "row/a",
    }
    assert grouping_path_parse("job/dcgm/team@base64/=") == {"job": "dcgm", "team": ""}
    for bad in ("job", "instance/x", "job/dcgm/hostname"):
        with pytest.raises(ExpositionError):
            grouping_path_parse(bad)


# --- Event rules (pure) ------------------------------------------------------------------------


def kinds(previous: dict[str, float] | None, current: dict[str, float]) -> list[str]:
    return [event.kind for event in events_detect(previous=previous, current=current)]


def test_xid_events_only_on_a_change_to_a_new_non_zero_code():
    assert kinds({XID: 0}, {XID: 79}) == ["xid"]
    assert kinds({XID: 79}, {XID: 79}) == []  # a last-value gauge repeats
    assert kinds({XID: 79}, {XID: 0}) == []
    assert kinds({XID: 79}, {XID: 48}) == ["xid"]
    (first,) = events_detect(previous=None, current={XID: 13})
    assert first.first_sight and first.xid == 13
    assert "Graphics Engine Exception" in first.message


def test_counters_raise_events_on_increase_only():
    assert kinds({DBE: 0}, {DBE: 2}) == ["ecc_uncorrectable"]
    assert kinds({DBE: 2}, {DBE: 2}) == []
    assert kinds({DBE: 5}, {DBE: 0}) == []  # reset by a reboot: a new baseline
    assert kinds(None, {DBE: 5}) == []  # first sight: the count may be years old
    rows = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    assert kinds({rows: 1}, {rows: 2}) == ["row_remap"]
    failure = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    assert kinds({failure: 0}, {failure: 1}) == ["row_remap_failure"]
    assert kinds({failure: 1}, {failure: 1}) == []
    (event,) = events_detect(
        previous={DBE: 0, "DCGM_FI_DEV_RETIRED_DBE": 1},
        current={DBE: 2, "DCGM_FI_DEV_RETIRED_DBE": 2},
    )
    assert "+2" in event.message and "+1" in event.message


def test_thermal_events_on_crossing_the_limit_or_more_throttling():
    temp, memory, violation = dcgm.GPU_TEMP, dcgm.MEMORY_TEMP, dcgm.THERMAL_VIOLATION
    limit = dcgm.GPU_TEMP_LIMIT_C
    assert kinds({temp: limit - 1}, {temp: limit}) == ["thermal"]
    assert kinds({temp: limit + 2}, {temp: limit + 4}) == []  # still hot: no repeat
    assert kinds({memory: 80}, {memory: dcgm.MEMORY_TEMP_LIMIT_C}) == ["thermal"]
    (event,) = events_detect(previous={violation: 1_000_000}, current={violation: 3_500_000})
    assert "2.5 s" in event.message  # (3.5e6 - 1e6) µs
