"""Server CPU seconds, from /proc: what a measurement cost the machine's servers, which is
steadier than points per wall-clock second when the machine is shared. A process tree's time
is each live process's own user + system time plus what its exited, reaped children used
(cutime + cstime, which the kernel adds to the parent that reaps them: PostgreSQL's
postmaster for a backend that left, gunicorn's master for a recycled worker)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from stack.processes import children_of

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _own_and_reaped_s(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after the parenthesized command name: state is [0]; utime, stime, cutime,
    # cstime are fields 14-17 of stat(5), so [11:15] here.
    fields = stat[stat.rfind(")") + 2 :].split()
    return sum(int(value) for value in fields[11:15]) / TICKS_PER_S


def tree_cpu_s(root: int) -> float:
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += _own_and_reaped_s(pid)
        todo.extend(children_of(pid))
    return total


class CpuMeter:
    """`with CpuMeter(lambda: [pids...]) as meter: ...` then `meter.seconds`: the CPU the
    process trees rooted at those pids used inside the block."""

    def __init__(self, roots: Callable[[], Iterable[int]]) -> None:
        self.roots = roots
        self.seconds = 0.0
        self._start = 0.0

    def _total(self) -> float:
        return sum(tree_cpu_s(pid) for pid in self.roots())

    def __enter__(self) -> CpuMeter:
        self._start = self._total()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = self._total() - self._start
