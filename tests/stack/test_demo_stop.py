"""`make demo` stopped while a Celery pool child is stuck in a task leaves no process behind
(issue 42, finding 10: after a batch that stalled a worker in a regular expression, stopping
the demo left its worker and a pool child running 13 minutes later).

The stuck child is a real one: the demo's worker, started with
DJANGO_SETTINGS_MODULE=tests.stack.stuck_worker_settings, also imports tests.stack.stuck_task,
whose task blocks every signal and runs a regular expression that never ends in _sre's C loop.
The child runs (it is not stopped, so no orphaned process group gets the kernel's SIGHUP and
SIGCONT) and answers no signal but SIGKILL.

What leaves the worker and its stuck child behind is a demo that dies without running its stop
(SIGKILL, a closed terminal's SIGHUP): its worker, sent SIGTERM by the kernel, waits for ever
in a warm shutdown. The second test fails on the code before d75c102 for that reason. A demo
stopped with SIGTERM already left nothing there (its stop SIGKILLed the worker after 20 s, and
Celery asks the kernel to SIGKILL each pool child when its worker dies); the first test keeps
it so."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from celery import Celery

from config.queues import QUEUE_DEFAULT
from config.redis_urls import celery_broker_url
from stack import redis
from stack.processes import children_of, pid_alive, wait_until
from tests.demo_path_support import command_of, demo_started
from tests.stack.stuck_task import STUCK_TASK

ROOT = Path(__file__).resolve().parent.parent.parent
STUCK_SETTINGS = "tests.stack.stuck_worker_settings"
# Generous: a demo stops web, beat and worker (each given DEMO_STOP_TIMEOUT_S) and its servers;
# on a loaded machine that takes longer. The stuck child does not end on its own, so no wait
# is too long.
STOPPED_TIMEOUT_S = 240
# The demo's stop gives the worker's warm shutdown this long (20 s by default) before it
# SIGKILLs its group: the stuck child never lets it end, so any time is spent waiting.
DEMO_STOP_TIMEOUT_S = "3"


def _tree(pid: int) -> list[int]:
    """`pid`'s descendants, from /proc."""
    found = []
    for child in children_of(pid):
        found += [child, *_tree(child)]
    return found


def _gone(pids: list[int], timeout_s: float = STOPPED_TIMEOUT_S) -> list[int]:
    """The pids still running (zombies aside) after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [pid for pid in pids if pid_alive(pid)]


def _kill(pids: list[int]) -> None:
    """SIGKILL to this test's own processes still running, should it fail."""
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _blocks(pid: int, sig: signal.Signals) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.MULTILINE)[1], 16)
    return bool(mask >> (sig - 1) & 1)


def _stick_a_pool_child(redis_url: str, started: Path) -> int:
    """Send the stuck task to the worker on `redis_url`; the pid of the pool child running
    it, once it holds SIGTERM back."""
    app = Celery(broker=celery_broker_url(redis_url))
    try:
        app.send_task(STUCK_TASK, args=[str(started)], queue=QUEUE_DEFAULT)
    finally:
        app.close()
    child = wait_until(
        lambda: int(started.read_text()), timeout_s=180, what="a pool child to take the task"
    )
    wait_until(lambda: _blocks(child, signal.SIGTERM), timeout_s=60, what="SIGTERM blocked")
    return int(child)


def test_make_demo_stopped_while_a_pool_child_is_stuck_in_c_code_leaves_no_process():
    # given `make demo` serving (its own PostgreSQL and Redis), its worker able to run the
    # stuck task
    with demo_started(
        through_make=True,
        DJANGO_SETTINGS_MODULE=STUCK_SETTINGS,
        DEMO_STOP_TIMEOUT_S=DEMO_STOP_TIMEOUT_S,
    ) as demo:
        tree = _tree(demo.process.pid)
        try:
            output = demo.log_path.read_text()
            url = re.search(r"Redis up \(.*, on (\S+)\)$", output, re.MULTILINE)
            assert url, output[-2000:]
            # when a pool child is stuck in C code
            child = _stick_a_pool_child(url[1], demo.var_dir.parent / "stuck-task-started")
            tree = _tree(demo.process.pid)
            assert child in tree, tree

            # and `make demo` is stopped as a process manager or `kill` would (SIGTERM to make)
            demo.process.send_signal(signal.SIGTERM)
            demo.process.wait(timeout=STOPPED_TIMEOUT_S)

            # then nothing of it runs, the stuck child included, and it stopped in order (its
            # PostgreSQL last)
            left = _gone(tree, timeout_s=STOPPED_TIMEOUT_S)
            assert left == [], [command_of(pid) for pid in left]
            assert "Stopped PostgreSQL." in demo.log_path.read_text()
        finally:
            _kill(tree + [pid for parent in tree for pid in _tree(parent)])


_KILLED_DEMO = """
import signal, sys, time
from pathlib import Path
from config.demo import Demo
demo = Demo("127.0.0.1", 1, Path(sys.argv[1]))
demo.env.update(REDIS_URL=sys.argv[2], CELERY_TASK_ALWAYS_EAGER="0")
demo.start_celery()
print(" ".join(str(p.pid) for _, p in demo.processes), flush=True)
time.sleep(600)
"""


def test_a_demo_killed_outright_takes_its_worker_and_a_stuck_pool_child_with_it(root):
    # given the demo's worker and beat (as config.demo starts them), their parent then
    # SIGKILLed (no handler runs: `kill -9` of make demo)
    with redis.start(root / "redis", unix_socket=True) as server:
        env = os.environ | {"DJANGO_SETTINGS_MODULE": STUCK_SETTINGS}
        parent = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_KILLED_DEMO), str(root / "var"), server.url],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        everyone: list[int] = []
        try:
            assert parent.stdout is not None
            worker_pid, beat_pid = map(int, parent.stdout.readline().split())
            everyone = [worker_pid, beat_pid]
            # when a pool child is stuck in C code
            child = _stick_a_pool_child(server.url, root / "stuck-task-started")
            everyone += _tree(worker_pid)
            assert child in everyone, everyone
            # and the demo dies
            parent.kill()
            parent.wait()
            # then its worker, beat and every pool child die too
            left = _gone(everyone)
            assert left == [], left
        finally:
            if parent.poll() is None:
                everyone += _tree(parent.pid)
                parent.kill()
                parent.wait()
            _kill(everyone)
