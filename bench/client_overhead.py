"""What the Python client costs the training loop, in-process: `Run.log()` while its sender
cannot reach a server (the worst case: the sender thread is busy retrying), and one
`RankTimer.section()`. Timing figures belong here, not in the tests (a shared 2-core CI makes
a wall-clock limit flaky); the tests check what the client does.

    .venv/bin/python -m bench.client_overhead [--calls 20000]

Prints the median and p99 of `log()` (two metrics a call) and the mean of a section, in µs.
The figure the README quotes for log() is this tool's median."""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLIENT_DIR = Path(__file__).resolve().parent.parent / "clients" / "python"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _NullRun:
    """What a RankTimer needs of a run, recording nothing."""

    rank = 0
    host = "bench"

    def event(self, type_: str, **fields: Any) -> None:
        pass


def log_latency_us(calls: int) -> tuple[float, float]:
    """(p50, p99) of `log()` in µs against an unreachable server."""
    from chronicle_client import Run

    with tempfile.TemporaryDirectory() as spool:
        run = Run(
            "overhead",
            url=f"http://127.0.0.1:{_free_port()}",
            token="t",
            spool_dir=spool,
            retry_base_s=0.02,
            retry_cap_s=0.3,
            flush_interval_s=0.05,
        )
        durations = []
        for step in range(calls):
            started = time.perf_counter_ns()
            run.log({"loss": 1.0 / (step + 1), "lr": 3e-4}, step=step)
            durations.append(time.perf_counter_ns() - started)
        run.finish(timeout=0)
    durations.sort()
    return statistics.median(durations) / 1000, durations[int(len(durations) * 0.99)] / 1000


def section_us(calls: int) -> float:
    """Mean cost of one `with timer.section(...)` in µs."""
    from chronicle_client.ranks import RankTimer

    section = RankTimer(_NullRun(), every=10**9).section  # type: ignore[arg-type]
    started = time.perf_counter()
    for _ in range(calls):
        with section("forward"):
            pass
    return (time.perf_counter() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args(argv)
    if str(CLIENT_DIR) not in sys.path:
        sys.path.insert(0, str(CLIENT_DIR))
    p50, p99 = log_latency_us(args.calls)
    print(f"log(): p50 {p50:.1f} µs, p99 {p99:.1f} µs (2 metrics a call, sender retrying)")
    print(f"section(): {section_us(args.calls):.2f} µs")


if __name__ == "__main__":
    main()
