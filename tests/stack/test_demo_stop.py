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
in a warm shutdown. The test here fails on the code before d75c102 for that reason. A demo
stopped with SIGTERM already left nothing there (its stop SIGKILLs the worker's group after
DEMO_STOP_TIMEOUT_S, and Celery asks the kernel to SIGKILL each pool child when its worker
dies); the last test of tests/test_demo_path.py keeps it so, on the `make demo` its other tests
share (a demo of its own here cost a minute of starting and loading)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from stack import redis
from tests.demo_path_support import (
    STUCK_SETTINGS,
    kill_left,
    process_tree,
    stick_a_pool_child,
    still_running,
)

ROOT = Path(__file__).resolve().parent.parent.parent


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
            child = stick_a_pool_child(server.url, root / "stuck-task-started")
            everyone += process_tree(worker_pid)
            assert child in everyone, everyone
            # and the demo dies
            parent.kill()
            parent.wait()
            # then its worker, beat and every pool child die too
            left = still_running(everyone)
            assert left == [], left
        finally:
            if parent.poll() is None:
                everyone += process_tree(parent.pid)
                parent.kill()
                parent.wait()
            kill_left(everyone)
