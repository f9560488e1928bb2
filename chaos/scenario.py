"""The fault run behind `make chaos`: send points while the planned faults are injected, wait
for the backlog to drain, verify, and report."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from chaos.faults import Fault, Injector
from chaos.load import PROJECT_SLUG, ClientStats, LoadClient, make_batches
from chaos.verify import Expected, Stored, backlog, problems_of, stored_counts
from stack.chronicle import Chronicle, chronicle_stack
from stack.postgres import PostgresServer
from stack.processes import log


@dataclass
class Report:
    run: str
    expected: Expected
    stored: Stored
    client: ClientStats
    faults: list[Fault]
    send_s: float
    drain_after_last_fault_s: float | None
    drain_after_last_accept_s: float | None
    drain_limit_s: float
    problems: list[str]

    @property
    def lost(self) -> int:
        return max(0, self.expected.points - self.stored.distinct_points)

    @property
    def duplicated(self) -> int:
        # The (series, step) primary key makes a second copy impossible; a point stored that
        # was never sent (or on the wrong key) would show here as an excess.
        return (self.stored.points - self.stored.distinct_points) + max(
            0, self.stored.distinct_points - self.expected.points
        )

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "passed": self.passed,
            "points_sent": self.expected.points,
            "points_stored": self.stored.points,
            "points_lost": self.lost,
            "points_duplicated": self.duplicated,
            "checksum_sent": str(self.expected.value_sum),
            "checksum_stored": str(self.stored.value_sum),
            "batches_sent": self.expected.batches,
            "batch_status": self.stored.batch_status,
            "max_process_attempts": self.stored.max_process_attempts,
            "incidents": [self.expected.incidents, self.stored.incidents],
            "checkpoints": [self.expected.checkpoints, self.stored.checkpoints],
            "logbook_entries": [self.expected.logbook_entries, self.stored.logbook_entries],
            "client_accepted_202": self.client.accepted,
            "client_duplicate_200": self.client.duplicates,
            "client_retries": dict(self.client.retries),
            "client_failed": self.client.failed,
            "faults": dict(Counter(f.kind for f in self.faults)),
            "fault_log": [f"{f.kind}: {f.detail}" for f in self.faults],
            "send_s": round(self.send_s, 1),
            "drain_after_last_fault_s": _round(self.drain_after_last_fault_s),
            "drain_after_last_accept_s": _round(self.drain_after_last_accept_s),
            "drain_limit_s": self.drain_limit_s,
            "problems": self.problems,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def scenario_plan(quick: bool) -> tuple[float, list[tuple[float, str]]]:
    """(send duration, [(offset in the send window, fault)]): every kind at least once; the
    full run kills pool children and the worker main several times."""
    if quick:
        return 24.0, [
            (3.0, "pool_child"),
            (6.0, "web_worker"),
            (8.0, "worker_main"),
            (12.0, "redis"),
            (16.0, "postgres"),
            (20.0, "pool_child"),
        ]
    return 120.0, [
        (8.0, "pool_child"),
        (15.0, "web_worker"),
        (22.0, "worker_main"),
        (32.0, "pool_child"),
        (42.0, "redis"),
        (55.0, "pool_child"),
        (65.0, "worker_main"),
        (75.0, "postgres"),
        (88.0, "pool_child"),
        (98.0, "worker_main"),
        (108.0, "pool_child"),
    ]


def run_scenario(
    *,
    points: int,
    quick: bool,
    points_per_batch: int = 400,
    drain_limit_s: float = 120.0,
    sweep_every_s: float | None = None,
    app: Chronicle | None = None,
) -> Report:
    """Send `points` points while injecting the planned faults; wait for the backlog to drain
    and verify. The full run uses real celery beat (its 30 s schedule) as the sweeper; the
    quick run publishes the same sweep task every `sweep_every_s` so it fits in ~90 s.
    `app`: an already running stack (its worker must have concurrency 2), else a new one."""
    if sweep_every_s is None:
        sweep_every_s = 5.0 if quick else 0.0
    duration_s, plan = scenario_plan(quick)
    run = f"chaos-{time.strftime('%Y%m%d-%H%M%S')}"
    batches = make_batches(run, points, points_per_batch)
    expected = Expected.of(batches)
    with contextlib.ExitStack() as exit_stack:
        if app is None:
            app = exit_stack.enter_context(
                chronicle_stack(concurrency=2, web_workers=2, beat=not sweep_every_s)
            )
        token = app.create_token(PROJECT_SLUG)
        injector = Injector(app, concurrency=2)
        client = LoadClient(app.base_url, token, threads=4)
        stop = threading.Event()
        fault_errors: list[str] = []

        def faults() -> None:
            actions = {
                "pool_child": injector.kill_pool_child,
                "worker_main": injector.kill_worker_main,
                "web_worker": injector.kill_web_worker,
                "redis": injector.restart_redis_wiped,
                "postgres": injector.restart_postgres,
            }
            for offset, kind in plan:
                delay = start + offset - time.monotonic()
                if delay > 0 and stop.wait(delay):
                    return
                try:
                    actions[kind]()
                except Exception as exc:
                    fault_errors.append(f"{kind}: {exc!r}")
                    log(f"fault {kind} failed: {exc!r}")

        def sweeper() -> None:
            while not stop.wait(sweep_every_s):
                app.sweep_now()

        log(f"sending {expected.points} points in {len(batches)} batches over {duration_s:.0f}s")
        start = time.monotonic()
        fault_thread = threading.Thread(target=faults, daemon=True)
        fault_thread.start()
        sweep_thread = threading.Thread(target=sweeper, daemon=True) if sweep_every_s else None
        if sweep_thread:
            sweep_thread.start()
        try:
            stats = client.run(batches, duration_s)
            send_s = time.monotonic() - start
            fault_thread.join()
            log(f"client done in {send_s:.1f}s: {stats.accepted} accepted, retries {stats.retries}")
            last_fault = max((f.at for f in injector.faults), default=start)
            drained_at = _wait_drained(app.pg, run, len(batches), last_fault + drain_limit_s)
        finally:
            stop.set()
            fault_thread.join(timeout=60)
            if sweep_thread:
                sweep_thread.join(timeout=10)
        stored = stored_counts(app.pg, run)
    problems = problems_of(expected, stored)
    problems += [f"client: {failure}" for failure in stats.failed]
    problems += [f"fault injection failed: {error}" for error in fault_errors]
    missing = {"pool_child_sigkill", "worker_main_sigkill", "web_worker_sigkill"}
    missing |= {"redis_restart_wiped", "postgres_restart"}
    missing -= set(injector.by_kind())
    problems += [f"fault never injected: {kind}" for kind in sorted(missing)]
    if drained_at is None:
        problems.append(f"backlog not drained within {drain_limit_s:.0f}s of the last fault")
    return Report(
        run=run,
        expected=expected,
        stored=stored,
        client=stats,
        faults=injector.faults,
        send_s=send_s,
        drain_after_last_fault_s=None if drained_at is None else drained_at - last_fault,
        drain_after_last_accept_s=None
        if drained_at is None
        else drained_at - (stats.last_accept_at or start),
        drain_limit_s=drain_limit_s,
        problems=problems,
    )


def _wait_drained(pg: PostgresServer, run: str, batches: int, deadline: float) -> float | None:
    """When every sent batch is accepted and none is pending; None after the deadline."""
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.Error):
            total, pending = backlog(pg, run)
            if total >= batches and pending == 0:
                return time.monotonic()
        time.sleep(0.25)
    return None


def summary_table(report: Report) -> str:
    d = report.as_dict()
    faults = d["faults"]
    status = d["batch_status"]
    retries = ", ".join(f"{k} {v}" for k, v in sorted(d["client_retries"].items())) or "none"
    rows = [
        ("points sent", f"{d['points_sent']:,}"),
        ("points stored", f"{d['points_stored']:,}"),
        ("points lost", f"{d['points_lost']:,}"),
        ("points duplicated", f"{d['points_duplicated']:,}"),
        ("value checksum", "match" if d["checksum_sent"] == d["checksum_stored"] else
         f"MISMATCH sent {d['checksum_sent']} stored {d['checksum_stored']}"),
        ("batches sent / done", f"{d['batches_sent']} / {status.get('done', 0)} "
         f"(pending {status.get('pending', 0)}, dead {status.get('dead', 0)}, "
         f"max processing attempts {d['max_process_attempts']})"),
        ("incidents sent / stored", "{} / {}".format(*d["incidents"])),
        ("checkpoints sent / stored", "{} / {}".format(*d["checkpoints"])),
        ("logbook entries sent / stored", "{} / {}".format(*d["logbook_entries"])),
        ("client answers", f"{d['client_accepted_202']} x 202, "
         f"{d['client_duplicate_200']} x 200 duplicate; retries: {retries}"),
        *[(f"faults: {kind}", str(count)) for kind, count in sorted(faults.items())],
        ("send window", f"{d['send_s']} s"),
        ("backlog drain after last fault", f"{d['drain_after_last_fault_s']} s "
         f"(limit {d['drain_limit_s']:.0f} s)"),
        ("backlog drain after last accept", f"{d['drain_after_last_accept_s']} s"),
        ("verdict", "PASS" if report.passed else "FAIL"),
    ]  # fmt: skip
    width = max(len(label) for label, _ in rows)
    lines = [f"Chronicle chaos run {report.run}", "-" * (width + 40)]
    lines += [f"{label.ljust(width)}  {value}" for label, value in rows]
    lines += [f"  problem: {problem}" for problem in report.problems]
    return "\n".join(lines)
