"""The remote-write phase's load generator builds requests the receiver reads as meant: every
host's 160 series, its 8 GPUs, the 4 skipped fields counted, and host names substituted."""

from __future__ import annotations

from bench.remote_write import HOSTS_PER_REQUEST, SERIES_PER_HOST, request_body
from ingest.remote_write import body_decompress, write_request_parse


def test_a_bench_request_is_twelve_hosts_of_dcgm_series():
    body = request_body(first_host=95, hosts=100, round_no=3, stamp_ms=1_764_000_000_000)
    parsed = write_request_parse(body_decompress(body, limit=10**8))
    assert parsed.series == parsed.samples == HOSTS_PER_REQUEST * SERIES_PER_HOST
    (gpus,) = parsed.rounds
    # hosts 95..99 then 0..6: the fleet wraps
    hosts = sorted({gpu.host for gpu in gpus})
    assert hosts == sorted(f"gpu-node-{h:05d}" for h in [*range(95, 100), *range(7)])
    assert len(gpus) == HOSTS_PER_REQUEST * 8 and parsed.dropped == {}
    assert parsed.skipped_samples == HOSTS_PER_REQUEST * 8 * 4
    assert {gpu.timestamps["DCGM_FI_DEV_GPU_TEMP"] for gpu in gpus} == {1_764_000_000.0}
    assert all(len(gpu.values) == 16 for gpu in gpus)
