"""Pages read from a real streaming replica (stack.postgres.start_replica) when
DATABASE_REPLICA_URL is set; writes, and the reads of a browser that has just written, stay
on the primary (config/replica.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack import postgres

ROOT = Path(__file__).resolve().parent.parent.parent

# Runs in its own process: DATABASES is read once, at settings import.
SCRIPT = textwrap.dedent(
    """
    import json, time
    import django
    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client

    from datetime import UTC, datetime, timedelta
    from telemetry.models import Membership, Project
    from telemetry.services import attempt_ensure, metric_points_insert, run_upsert

    user = get_user_model().objects.create_user("reader", password="x" * 12)
    project = Project.objects.create(slug="p", name="P")
    Membership.objects.create(project=project, user=user, role="viewer")
    run = run_upsert(project=project, name="r", info={"parameter_count": 10**9,
                                                     "tokens_per_step": 4096})
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    attempt = attempt_ensure(run=run, number=1, started_at=t0)
    metric_points_insert(run=run, attempt=attempt, points=[
        (name, step, value, t0 + timedelta(seconds=step))
        for step in range(1, 50) for name, value in (("loss", 3.0), ("step_time_s", 1.0))])
    client = Client()
    client.force_login(user)

    def replayed():
        # The replica has replayed the login's session row.
        with connections["replica"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM django_session")
            return cursor.fetchone()[0] > 0
    deadline = time.monotonic() + 20
    while not replayed() and time.monotonic() < deadline:
        time.sleep(0.1)

    def queries(method, path):
        counts = {"default": 0, "replica": 0}
        def counter(alias):
            def wrapper(execute, sql, params, many, context):
                counts[alias] += 1
                return execute(sql, params, many, context)
            return wrapper
        with connections["default"].execute_wrapper(counter("default")), \\
                connections["replica"].execute_wrapper(counter("replica")):
            response = getattr(client, method)(path)
        return {"status": response.status_code, "cookies": sorted(response.cookies), **counts}

    with connections["replica"].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        in_recovery = cursor.fetchone()[0]
    print(json.dumps({
        "replica_in_recovery": in_recovery,
        "page": queries("get", "/"),
        # A page whose selectors read with raw SQL (telemetry.selectors.packed, for the MFU page).
        "mfu": queries("get", f"/runs/{run.pk}/mfu/"),
        # Any unsafe method marks the browser as having written (the view's answer aside).
        "write": queries("post", "/"),
        "after_write": queries("get", "/"),
    }))
    """
)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="chronicle-replica-test-"))
    path.chmod(0o755)  # PostgreSQL runs as another account when we are root
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _django(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_page_reads_go_to_the_replica_and_writes_to_the_primary(root):
    # given a primary with Chronicle's schema and a streaming replica of it
    with postgres.start(root / "primary", port=0) as primary:
        primary.create_database("chronicle")
        with postgres.start_replica(primary, root / "replica") as replica:
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings_test",
                "DATABASE_URL": primary.url_for("chronicle"),
                "DATABASE_REPLICA_URL": replica.url_for("chronicle"),
            }
            _django(["manage.py", "migrate", "--noinput", "-v", "0"], env)

            # when a logged-in browser opens a page, posts, and opens the page again
            result = json.loads(_django(["-c", SCRIPT], env).strip().splitlines()[-1])

    # then the page was read on the replica alone, and the write and the page right after
    # it on the primary alone
    assert result["replica_in_recovery"] is True
    assert result["page"]["status"] == 200
    assert result["page"]["replica"] > 0 and result["page"]["default"] == 0
    assert result["mfu"]["status"] == 200
    assert result["mfu"]["replica"] > 0 and result["mfu"]["default"] == 0, result["mfu"]
    assert (
        result["write"]["replica"] == 0 and "chronicle_read_primary" in result["write"]["cookies"]
    )
    assert result["after_write"]["default"] > 0 and result["after_write"]["replica"] == 0
