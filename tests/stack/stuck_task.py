"""A Celery task that never returns from C code and answers no signal but SIGKILL: what a
pool child running a catastrophic regular expression (issue 42, finding 10) is to whoever
tries to stop it. Imported by the worker only through tests.stack.stuck_worker_settings."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from celery import shared_task

STUCK_TASK = "tests.stack.stuck_in_c"


@shared_task(name=STUCK_TASK, ignore_result=True)
def stuck_in_c(started_path: str) -> None:
    # Which pool child took the task, for the test to watch.
    Path(started_path).write_text(str(os.getpid()))
    # Every signal held back: a Python handler (Celery's soft time limit on SIGUSR1, one on
    # SIGTERM) would run between two steps of the match and end it, and a default action
    # would kill the child; a call that never returns to the interpreter allows neither.
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    # Nested repetition that cannot match: 2**64 ways to try, in _sre's C loop.
    re.fullmatch(r"(\w+\s?)+", "a" * 64 + "!")
