"""`make chaos-failover` (python -m chaos.failover [--points 100000]): the database machine
dies mid-stream and the synchronous standby takes over.

Chronicle (gunicorn, a Celery worker and beat) runs on a pg_auto_failover formation
(stack.autofailover: a monitor, a primary and a synchronous standby on loopback ports) through
one multi-host DATABASE_URL with target_session_attrs=read-write. The chaos run's client
streams the points (chaos.load: 400-point batches with events, retried with the same
batch_id on a network error, 429 or 5xx). A third of the way in, the primary's machine dies:
its keeper, postmaster and backends SIGKILLed together and its data directory moved away, so
nothing restarts it. The monitor promotes the standby; nothing of Chronicle is restarted.

PASS needs every point stored exactly once (the chaos run's checks: counts, checksums, events,
every batch done), every batch answered 2xx present in the database after the promotion,
the same web, worker and beat processes alive at the end as at the start, and the primary
really gone (the promoted node is the other one). The figures: seconds from the kill to the
standby taking writes and to the first batch answered 2xx after it, batches retried, and the
p50/p95 of a batch's latency (first try to 2xx, retries included) for batches sent in the
failover window and overall.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from chaos.load import PROJECT_SLUG, ClientStats, LoadClient, make_batches
from chaos.scenario import _wait_drained
from chaos.verify import Expected, problems_of, stored_counts
from stack import autofailover, redis
from stack.autofailover import Formation
from stack.chronicle import DB_NAME, Chronicle
from stack.postgres import PostgresServer
from stack.processes import ROOT, log

PORTS = (55432, 55433, 55434)  # monitor, node1, node2: never the machine's 5432
SEND_S = 90.0
KILL_AT_S = 30.0
DRAIN_LIMIT_S = 300.0  # the worker drains 250 batches slowly on a loaded 2-core machine


class FailoverChronicle(Chronicle):
    """Chronicle's processes with DATABASE_URL naming both nodes of the formation."""

    def __init__(self, root: Path, formation: Formation, rd: redis.RedisServer) -> None:
        # Chronicle and the verify helpers read `pg` through url_for(), connect() and rows()
        # only, which the formation answers for whichever node takes writes.
        super().__init__(root, cast(PostgresServer, formation), rd)
        self.formation = formation


@dataclass
class Figures:
    points_sent: int = 0
    problems: list[str] = field(default_factory=list)
    promoted_after_s: float | None = None
    first_2xx_after_s: float | None = None
    batches_retried: int = 0
    retries: dict[str, int] = field(default_factory=dict)
    p50_window_s: float | None = None
    p95_window_s: float | None = None
    p95_all_s: float | None = None
    max_s: float | None = None
    window_batches: int = 0
    synchronous_standby_names: str = ""
    killed: str = ""
    drain_after_kill_s: float | None = None
    stored: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.problems

    def verdict(self) -> str:
        head = "PASS" if self.passed else "FAIL"
        line = (
            f"chaos-failover: {head}: {self.stored.get('points', 0):,} / {self.points_sent:,} "
            f"points stored, {self.stored.get('duplicated', 0)} duplicated; standby took "
            f"writes {_s(self.promoted_after_s)} after the primary's machine died, Chronicle "
            f"answered 2xx again {_s(self.first_2xx_after_s)} after; {self.batches_retried} "
            f"batches retried; latency of the {self.window_batches} batches in the failover "
            f"window p50 {_s(self.p50_window_s)} p95 "
            f"{_s(self.p95_window_s)} (all batches p95 {_s(self.p95_all_s)})"
        )
        if self.problems:
            line += f"; problems: {'; '.join(self.problems[:5])}"
        return line


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} s"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def latency_figures(stats: ClientStats, killed_at: float, recovered_at: float) -> dict[str, Any]:
    """A batch's latency is its first try to its 2xx (retries and waits included). "In the
    failover window": the batches that were in flight at the kill or first sent before
    the recovery."""
    window = [
        answered - first
        for _, first, _, answered, _ in stats.answered
        if first <= recovered_at and answered >= killed_at
    ]
    every = [answered - first for _, first, _, answered, _ in stats.answered]
    return {
        "p50_window_s": percentile(window, 0.50),
        "p95_window_s": percentile(window, 0.95),
        "p95_all_s": percentile(every, 0.95),
        "max_s": max(every) if every else None,
        "window_batches": len(window),
    }


def recovered_at(stats: ClientStats, killed_at: float) -> float | None:
    """When the first request sent after the kill was answered 2xx: Chronicle writing again
    (an answer to a request sent before the kill can arrive after it)."""
    answers = [answered for _, _, try_at, answered, _ in stats.answered if try_at > killed_at]
    return min(answers) if answers else None


def acknowledged_missing(formation: Formation, stats: ClientStats) -> list[str]:
    """Batches the client was answered 2xx for that the (promoted) database does not have."""
    ids = [answer[0] for answer in stats.answered]
    rows = formation.rows(
        "SELECT batch_id FROM ingest_ingestbatch WHERE batch_id = ANY(%s)", [ids], database=DB_NAME
    )
    return sorted(set(ids) - {row[0] for row in rows})


def run_failover(*, points: int, root: Path, send_s: float = SEND_S) -> Figures:
    figures = Figures()
    run = f"failover-{time.strftime('%Y%m%d-%H%M%S')}"
    batches = make_batches(run, points, 400)
    expected = Expected.of(batches)
    figures.points_sent = expected.points
    kill_at = min(KILL_AT_S, send_s / 3)
    with (
        autofailover.start(
            root / "formation", ports=PORTS, monitor_settings=autofailover.DRILL_MONITOR_SETTINGS
        ) as formation,
        redis.start(root / "redis") as rd,
    ):
        figures.synchronous_standby_names = formation.synchronous_standby_names()
        (root / "staticfiles").mkdir(exist_ok=True)  # the stack's STATIC_ROOT
        app = FailoverChronicle(root, formation, rd)
        try:
            app.migrate()
            app.start_web(workers=2)
            app.start_worker(concurrency=2)
            app.start_beat()
            processes = {"web": app.web, "worker": app.worker, "beat": app.beat}
            pids = {name: proc.pid for name, proc in processes.items() if proc}
            token = app.create_token(PROJECT_SLUG)
            client = LoadClient(app.base_url, token, threads=4)
            primary = formation.primary()
            standby = next(node for node in formation.nodes if node is not primary)
            fault: dict[str, float] = {}
            fault_errors: list[str] = []

            def kill() -> None:
                time.sleep(kill_at)
                try:
                    killed, fault["at"] = formation.kill_machine(primary)
                    log(f"killed {primary.name}'s machine: pids {killed}")
                    formation.wait_primary(standby)
                    fault["promoted_after"] = time.monotonic() - fault["at"]
                    log(f"{standby.name} takes writes {fault['promoted_after']:.1f} s later")
                except Exception as exc:
                    fault_errors.append(repr(exc))

            log(
                f"streaming {expected.points:,} points in {len(batches)} batches "
                f"over {send_s:.0f} s"
            )
            thread = threading.Thread(target=kill, daemon=True)
            start = time.monotonic()
            thread.start()
            stats = client.run(batches, send_s)
            thread.join()
            killed_at = fault.get("at", start)
            drained = _wait_drained(
                cast(PostgresServer, formation), run, len(batches), killed_at + DRAIN_LIMIT_S
            )
            figures.killed = f"{primary.name} (port {primary.port})"
            figures.problems += [f"fault: {error}" for error in fault_errors]
            figures.promoted_after_s = fault.get("promoted_after")
            first_2xx = recovered_at(stats, killed_at)
            figures.first_2xx_after_s = None if first_2xx is None else first_2xx - killed_at
            figures.batches_retried = sum(1 for *_, tries in stats.answered if tries > 1)
            figures.retries = dict(stats.retries)
            for key, value in latency_figures(stats, killed_at, first_2xx or killed_at).items():
                setattr(figures, key, value)
            figures.drain_after_kill_s = None if drained is None else drained - killed_at
            stored = stored_counts(cast(PostgresServer, formation), run)
            duplicated = (stored.points - stored.distinct_points) + max(
                0, stored.distinct_points - expected.points
            )
            figures.stored = {
                "points": stored.distinct_points,
                "duplicated": duplicated,
                "batch_status": stored.batch_status,
                "max_process_attempts": stored.max_process_attempts,
            }
            figures.problems += problems_of(expected, stored)
            figures.problems += [f"client: {failure}" for failure in stats.failed[:5]]
            missing = acknowledged_missing(formation, stats)
            figures.problems += [f"acknowledged but not stored: {b}" for b in missing[:5]]
            if drained is None:
                figures.problems.append(f"backlog not drained {DRAIN_LIMIT_S:.0f} s after the kill")
            if formation.writable_port() != standby.port:
                figures.problems.append("the standby is not the node taking writes")
            for name, proc in processes.items():
                if proc is None or not proc.alive() or proc.pid != pids[name]:
                    figures.problems.append(f"{name} did not survive the failover by itself")
            if app.worker_starts != 1:
                figures.problems.append("the worker was restarted")
        finally:
            app.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.failover", description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=SEND_S, help="the send window")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="chronicle-failover-"))
    root.chmod(0o755)
    figures = run_failover(points=args.points, root=root, send_s=args.seconds)
    out = ROOT / "var" / f"chaos-failover-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({**figures.__dict__, "passed": figures.passed}, indent=2) + "\n")
    with contextlib.suppress(OSError):
        if figures.passed:
            shutil.rmtree(root)
        else:
            log(f"logs kept in {root}")
    print(f"written to {out.relative_to(ROOT)}")
    print(figures.verdict())
    return 0 if figures.passed else 1


if __name__ == "__main__":
    sys.exit(main())
