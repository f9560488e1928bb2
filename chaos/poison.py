"""The poison batch: a batch that crashes its worker every time it is processed must end dead
after a bounded number of attempts, and nothing may process it again."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from decimal import Decimal

from chaos.faults import backend_client_pids
from chaos.load import METRICS, PROJECT_SLUG, Batch, LoadClient, make_batches
from chaos.verify import Expected, Stored, backlog, batch_row, stored_counts
from stack.chronicle import DB_NAME, Chronicle
from stack.processes import kill_pid, log, process_owning_port, wait_until


@dataclass
class PoisonReport:
    batch_id: str
    status: str
    process_attempts: int
    last_error: str
    kills: list[int]
    orphans_terminated: int
    attempts_after_quiet: int
    dead_logged: bool
    admin_lists_it: bool
    neighbours_expected: Expected
    neighbours_stored: Stored
    elapsed_s: float


def poison_scenario(
    app: Chronicle, *, timeout_s: float = 90, quiet_s: float = 8, sweep_every_s: float = 5
) -> PoisonReport:
    """A batch that crashes its worker every time it is processed.

    The harness holds a row lock on the poison run, so processing that batch blocks at its
    first write to the run; the harness finds the waiting session (pg_blocking_pids), maps its
    client port to the pool child that owns the socket and SIGKILLs that child: every delivery
    of the batch dies mid-task, as a batch that triggers an OOM or a segfault would. Batches of
    other runs are processed meanwhile. The batch must end dead after a bounded number of
    attempts, and then nothing may process it again."""
    poison_run = f"poison-{time.strftime('%H%M%S')}"
    neighbour_run = f"neighbours-{time.strftime('%H%M%S')}"
    token = app.create_token(PROJECT_SLUG)
    client = LoadClient(app.base_url, token, threads=1)
    setup = make_batches(poison_run, len(METRICS), len(METRICS))  # creates the run row
    client.run(setup, 0)
    wait_until(lambda: backlog(app.pg, poison_run) == (1, 0), timeout_s=30, what="the setup batch")
    # No attempt number: the batch goes to the workers (a metric batch naming its attempt
    # would be written in the request, and this scenario is about worker crashes).
    poison_body = {
        "batch_id": f"{poison_run}-poison",
        "run": poison_run,
        "metrics": [{"name": "loss", "step": step, "value": 1.0} for step in range(1, 200)],
    }
    poison = Batch(
        batch_id=poison_body["batch_id"],
        body=json.dumps(poison_body).encode(),
        points=199,
        value_sum=Decimal(199),
        weighted_sum=Decimal(0),
        incidents=0,
        checkpoints=0,
        logbook_entries=0,
    )
    neighbours = make_batches(neighbour_run, 2_000, 200)
    kills: list[int] = []
    handled: dict[int, float] = {}  # backend pid -> when its client was killed
    orphans_terminated = 0
    start = time.monotonic()
    with app.pg.connect(DB_NAME) as lock_conn:
        lock_conn.autocommit = False
        lock_pid = lock_conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        lock_conn.execute(
            "SELECT id FROM telemetry_run WHERE name = %s FOR UPDATE", [poison_run]
        ).fetchone()
        sender = threading.Thread(target=lambda: client.run([poison, *neighbours], 5), daemon=True)
        sender.start()
        deadline = start + timeout_s
        next_sweep = start + sweep_every_s
        status = "pending"
        while time.monotonic() < deadline:
            if time.monotonic() > next_sweep:
                app.sweep_now()
                next_sweep += sweep_every_s
            status = batch_row(app.pg, poison.batch_id)[0]
            if status == "dead":
                break
            app_kids = app.pool_children()
            for backend, port in backend_client_pids(app.pg, lock_pid):
                if backend in handled:
                    # PostgreSQL notices a vanished client within client_connection_check_
                    # interval; if it has not, end the session as the kernel's RST would.
                    if time.monotonic() - handled[backend] > 5:
                        with app.pg.connect(DB_NAME) as admin:
                            admin.execute("SELECT pg_terminate_backend(%s)", [backend])
                        orphans_terminated += 1
                        handled[backend] = float("inf")
                    continue
                owner = process_owning_port(port, app_kids)
                if owner is not None:
                    kill_pid(owner)
                    kills.append(owner)
                    handled[backend] = time.monotonic()
                    log(f"poison: SIGKILL pool child {owner} (session {backend})")
            time.sleep(0.05)
        sender.join(timeout=30)
        # Quiet period: sweeps keep running; a dead batch must not be attempted again.
        attempts_at_dead = batch_row(app.pg, poison.batch_id)[1]
        quiet_end = time.monotonic() + quiet_s
        while time.monotonic() < quiet_end:
            if time.monotonic() > next_sweep:
                app.sweep_now()
                next_sweep += sweep_every_s
            for backend, port in backend_client_pids(app.pg, lock_pid):
                if backend not in handled:
                    owner = process_owning_port(port, app.pool_children())
                    if owner is not None:
                        kill_pid(owner)
                        kills.append(owner)
                        handled[backend] = time.monotonic()
            time.sleep(0.5)
        lock_conn.rollback()
    elapsed = time.monotonic() - start
    status, attempts, last_error = batch_row(app.pg, poison.batch_id)
    wait_until(
        lambda: backlog(app.pg, neighbour_run)[1] == 0, timeout_s=30, what="neighbours drained"
    )
    worker_logs = "".join(p.read_text(errors="replace") for p in app.root.glob("worker-*.log"))
    return PoisonReport(
        batch_id=poison.batch_id,
        status=status,
        process_attempts=attempts,
        last_error=last_error,
        kills=kills,
        orphans_terminated=orphans_terminated,
        attempts_after_quiet=attempts - attempts_at_dead,
        dead_logged="parked as dead" in worker_logs,
        admin_lists_it=admin_lists_dead(app, poison.batch_id),
        neighbours_expected=Expected.of(neighbours),
        neighbours_stored=stored_counts(app.pg, neighbour_run),
        elapsed_s=elapsed,
    )


_ADMIN_CHECK = """
from django.contrib.auth import get_user_model
from django.test import Client
user, _ = get_user_model().objects.get_or_create(
    username="chaos-admin", defaults={"is_staff": True, "is_superuser": True})
client = Client()
client.force_login(user)
page = client.get("/admin/ingest/ingestbatch/", {"status__exact": "dead"})
print(page.status_code, BATCH_ID in page.content.decode())
"""


def admin_lists_dead(app: Chronicle, batch_id: str) -> bool:
    """Whether the admin's Ingest batches list, filtered to status=dead, shows the batch
    (rendered through Django's test client against the harness database)."""
    code = _ADMIN_CHECK.replace("BATCH_ID", repr(batch_id))
    # DEBUG=1 only for this render: production static storage wants a collectstatic manifest.
    out = app.manage("shell", "-c", code, DEBUG="1")
    return out.strip().splitlines()[-1] == "200 True"
