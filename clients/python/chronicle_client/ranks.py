"""Per-rank section timing: where this rank's step time goes (forward, backward, data
loading, collective waits...), sent as `rank_timings` events so the server can draw the
rank x time heat map and find stragglers.

    timer = run.rank_timer(every=10)
    for step in range(first, last):
        with timer.step(step):
            with timer.section("data_loading"):
                batch = next(loader)
            with timer.section("forward"):
                loss = model(batch)

Entering and leaving a section costs about a microsecond (two perf_counter calls and a dict
update); nothing is sent from the training loop. Every `every` steps the window's mean per
step is appended to the run's spool as one event, which the run's sender thread batches and
posts like log()'s points. Times are wall clock on the host: for GPU work, synchronize (or
time with CUDA events and pass the result to add()) or the section measures the launch.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chronicle_client.client import Run


class _Section:
    """A reusable context manager (no generator per use: this is on the training loop)."""

    __slots__ = ("_name", "_started", "_timer")

    def __init__(self, timer: RankTimer, name: str) -> None:
        self._timer = timer
        self._name = name
        self._started = 0.0

    def __enter__(self) -> _Section:
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.add(self._name, time.perf_counter() - self._started)


class _Step(_Section):
    __slots__ = ("_step",)

    def __init__(self, timer: RankTimer, step: int) -> None:
        super().__init__(timer, "step")
        self._step = step

    def __enter__(self) -> _Step:
        self._timer.begin_step(self._step)
        self._started = time.perf_counter()
        return self


class RankTimer:
    """Accumulates this rank's section times; one `rank_timings` event per window of `every`
    steps (aligned to multiples of `every`, so every rank's windows cover the same steps)."""

    def __init__(self, run: Run, *, every: int = 10, device: str | None = None) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.run = run
        self.every = every
        self.device = device
        self._sums: dict[str, float] = {}
        self._window: int | None = None
        self._first_step = 0
        self._last_step = 0
        self._steps = 0
        self._placed = False
        self._sections: dict[str, _Section] = {}

    def section(self, name: str) -> _Section:
        """Time a named section of the current step."""
        found = self._sections.get(name)
        if found is None:
            found = self._sections[name] = _Section(self, name)
        return found

    def step(self, step: int) -> _Step:
        """Time a whole step (the `step` section); sections inside it are counted to it."""
        return _Step(self, step)

    def add(self, name: str, seconds: float) -> None:
        """Count `seconds` to a section of the current step (e.g. from CUDA events)."""
        self._sums[name] = self._sums.get(name, 0.0) + seconds

    def begin_step(self, step: int) -> None:
        """Start counting to `step` (step() does it); a new window sends the previous one."""
        window = step // self.every
        if window != self._window:
            self.flush()
            self._window = window
            self._first_step = step
        self._last_step = step
        self._steps += 1

    def flush(self) -> None:
        """Append the pending window's means per step as one event (called on each new
        window and by Run.finish)."""
        if not self._sums or not self._steps:
            self._sums, self._steps = {}, 0
            return
        steps = self._steps
        fields: dict[str, object] = {
            "first_step": self._first_step,
            "last_step": self._last_step,
            "ranks": [self.run.rank],
            "sections": {name: [total / steps] for name, total in self._sums.items()},
        }
        if not self._placed:
            # The placement once: the server keeps it for the attempt.
            fields["hosts"] = [self.run.host]
            if self.device:
                fields["devices"] = [self.device]
            self._placed = True
        self.run.event("rank_timings", **fields)
        self._sums, self._steps = {}, 0
