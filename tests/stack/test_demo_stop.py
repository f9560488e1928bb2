"""`make demo` stopped while a Celery pool child is stuck in a task leaves no process behind
(issue 42, finding 10: after a batch that stalled a worker in a regular expression, stopping
the demo left its worker and a pool child running 13 minutes later).

A stuck child is made with SIGSTOP: deaf to every signal but SIGKILL, as a child looping in C
code is to every signal Python handles (its handler runs only when the C call returns). The
demo's Celery processes are config.demo.Demo's own, on a Redis of their own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from config.demo import Demo
from stack import free_port, redis
from stack.processes import children_of, pid_alive, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent


def _gone(pids: list[int], timeout_s: float = 30) -> list[int]:
    """The pids still running (zombies aside) after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if pid_alive(pid)]


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pool(worker_pid: int) -> list[int]:
    return wait_until(
        lambda: len(children_of(worker_pid)) >= 2 and children_of(worker_pid),
        timeout_s=180,
        what="the Celery worker's two pool children",
    )


def test_stopping_the_demo_with_a_pool_child_stuck_leaves_no_process(root):
    # given the demo's worker and beat, started as `make demo` starts them
    with redis.start(root / "redis", unix_socket=True) as server:
        demo = Demo("127.0.0.1", free_port(), root / "var")
        demo.env.update(REDIS_URL=server.url, CELERY_TASK_ALWAYS_EAGER="0")
        demo.stop_timeout_s = 5
        try:
            demo.start_celery()
            processes = dict(demo.processes)
            children = _pool(processes["worker"].pid)
            # when a pool child is stuck in a task, and the demo is stopped (what its SIGTERM
            # handler does: config.demo.serve)
            os.kill(children[0], signal.SIGSTOP)
            everyone = [process.pid for process in processes.values()] + children
        finally:
            demo.stop()

        # then nothing of it runs: the stuck child was not left behind by its worker
        left = _gone(everyone)
        _kill(left)  # this test's own processes, should it fail
        assert left == []


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
    # given the demo's processes, started by a process that is then SIGKILLed (no handler
    # runs: `kill -9` of make demo)
    with redis.start(root / "redis", unix_socket=True) as server:
        env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
        parent = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_KILLED_DEMO), str(root / "var"), server.url],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert parent.stdout is not None
            worker_pid, beat_pid = map(int, parent.stdout.readline().split())
            children = _pool(worker_pid)
            os.kill(children[0], signal.SIGSTOP)  # stuck in a task
            # when the demo dies
            parent.kill()
            parent.wait()
            # then its worker, beat and every pool child die too
            left = _gone([worker_pid, beat_pid, *children])
            _kill(left)
            assert left == []
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()
