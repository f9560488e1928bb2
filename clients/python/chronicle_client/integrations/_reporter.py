"""What the framework integrations share: one `Run` per process, created when training starts
(after the launcher forked its workers and the framework knows this process's rank and the
step it resumed from), and the bookkeeping behind the goodput events.

Steps are numbered as both frameworks count optimizer steps: step n is the n-th update, so
the step that starts when `global_step` is n is step n + 1, a checkpoint taken when
`global_step` is n is the checkpoint of step n, and a job resumed from it has
`resumed_from_step` n and starts step n + 1. Metrics are logged at `global_step`.

One rank, the leader (rank 0 unless `end_attempt=` says otherwise), reports what is the same
on every rank: metrics, step start times, checkpoints and the attempt's end. Every rank
announces the attempt with its host, and every rank that sees a crash reports it.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chronicle_client.client import Run, _default_attempt
from chronicle_client.transport import ChronicleError

logger = logging.getLogger("chronicle_client")

# A crash says nothing reliable about its root cause (a CUDA error may be a bad GPU or a bug):
# on-call triage sets it; the server files this under "Unknown, under investigation".
CRASH_CATEGORY = "unknown"
MAX_TEXT = 10_000  # the server's limit for interruption messages and attempt end reasons
MAX_URI = 1_000
# Step start times are sent in events of up to this many steps, or this old, whichever first.
STEP_TIMES_PER_EVENT = 100
STEP_TIMES_MAX_AGE_S = 10.0

Mark = tuple[float, float]  # (time.perf_counter(), time.time()) of one moment


def attempt_number(explicit: int | None, restored: int | None, previous: int | None) -> int:
    """`attempt=`, else CHRONICLE_ATTEMPT, else the highest of: the launcher's restart count
    + 1, one more than the attempt that wrote the checkpoint being resumed, one more than the
    attempt this process already ran. A job restarted by hand (no launcher counting
    restarts) thus still gets a new attempt number from its checkpoint."""
    if explicit is not None:
        return explicit
    if os.environ.get("CHRONICLE_ATTEMPT"):
        return int(os.environ["CHRONICLE_ATTEMPT"])
    candidates = [_default_attempt()]
    candidates += [number + 1 for number in (restored, previous) if number]
    return max(candidates)


def numeric_metrics(values: Mapping[str, Any]) -> dict[str, float]:
    """The numbers among what a framework logged: Python numbers and one-element tensors or
    arrays. Strings, bools and larger tensors are left out."""
    numbers: dict[str, float] = {}
    for name, value in values.items():
        if isinstance(value, bool):
            continue
        if not isinstance(value, int | float):
            item = getattr(value, "item", None)
            if not callable(item):
                continue
            numel = getattr(value, "numel", None)
            count = numel() if callable(numel) else getattr(value, "size", 1)
            if count != 1:
                continue
            value = item()
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
        numbers[str(name)] = float(value)
    return numbers


def path_size(path: str | os.PathLike[str]) -> int | None:
    """Bytes of a checkpoint file, or of every file under a checkpoint directory."""
    target = Path(path)
    try:
        if target.is_file():
            return target.stat().st_size
        if target.is_dir():
            return sum(item.stat().st_size for item in target.rglob("*") if item.is_file())
    except OSError:
        return None
    return None


def now() -> Mark:
    return time.perf_counter(), time.time()


def crash_texts(exc: BaseException) -> tuple[str, str]:
    """(reason, message): `Type: text` for the attempt's end, and the same with the traceback
    for the interruption, cut to the server's limit keeping the innermost frames."""
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    reason = reason[:MAX_TEXT]
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    head = reason[:2_000] + "\n\n"
    if len(head) + len(details) > MAX_TEXT:
        details = "…" + details[-(MAX_TEXT - len(head) - 1) :]
    return reason, head + details


class Reporter:
    """One process's side of a run, driven by a framework's hooks. Every method is cheap
    (appends to the spool) except `close`, which flushes."""

    def __init__(
        self, name: str, run_kwargs: Mapping[str, Any], *, checkpoint_tier: str | None = None
    ) -> None:
        kwargs = dict(run_kwargs)
        # Fail when the callback is made, not steps into training.
        if not (kwargs.get("url") or os.environ.get("CHRONICLE_URL")) or not (
            kwargs.get("token") or os.environ.get("CHRONICLE_TOKEN")
        ):
            raise ValueError("Chronicle needs url= and token= (or CHRONICLE_URL, CHRONICLE_TOKEN)")
        self.name = name
        self.checkpoint_tier = checkpoint_tier
        self._explicit_attempt: int | None = kwargs.pop("attempt", None)
        self._explicit_rank: int | None = kwargs.pop("rank", None)
        self._end_attempt: bool | None = kwargs.pop("end_attempt", None)
        self._user_run_info: dict[str, Any] = dict(kwargs.pop("run_info", None) or {})
        kwargs.pop("start", None)  # the integration announces the attempt itself
        self._run_kwargs = kwargs
        self.run: Run | None = None
        self.attempt: int | None = None
        self.rank = 0
        self.leader = True
        self.attempt_open = False
        self.step = 0  # the last global step the framework reported
        self.mark: Mark | None = None  # the last moment a checkpoint save could start
        self._last_saved_step = 0
        self._last_step_started = -1
        self._first_step = 0
        self._step_starts: list[float] = []

    # --- the attempt ---------------------------------------------------------------------

    def start_attempt(
        self,
        *,
        rank: int,
        resumed_from_step: int | None = None,
        restored_attempt: int | None = None,
        run_info: Mapping[str, Any] | None = None,
    ) -> Run:
        """Open this process's Run and announce the attempt (every rank, with its host)."""
        if self.attempt_open and self.run is not None:
            return self.run
        self.close()  # a Run reopened for logging after an earlier attempt ended
        self.attempt = attempt_number(self._explicit_attempt, restored_attempt, self.attempt)
        self.rank = rank if self._explicit_rank is None else self._explicit_rank
        self.leader = self.rank == 0 if self._end_attempt is None else self._end_attempt
        info = {**(run_info or {}), **self._user_run_info}  # what the user said wins
        self.run = self._open(info)
        self.run.attempt_started(resumed_from_step=resumed_from_step, hosts=[self.run.host])
        if resumed_from_step is not None and self.leader:
            self.run.checkpoint_restored(resumed_from_step)
        self.attempt_open = True
        self.step = resumed_from_step or 0
        self._last_saved_step = resumed_from_step or 0
        self._last_step_started = -1
        self._step_starts = []
        self.mark = None
        return self.run

    def _open(self, run_info: Mapping[str, Any] | None = None) -> Run:
        if self.attempt is None:
            self.attempt = attempt_number(self._explicit_attempt, None, None)
        return Run(
            self.name,
            attempt=self.attempt,
            rank=self.rank,
            run_info=run_info or None,
            start=False,
            end_attempt=False,  # sent by end_attempt() below, once, by the leader
            **self._run_kwargs,
        )

    def ensure_run(self) -> Run:
        """The Run, reopened (without announcing an attempt) for what a framework logs after
        training ended, such as a final evaluation."""
        if self.run is None:
            self.run = self._open(self._user_run_info)
        return self.run

    def end_attempt(self, status: str, reason: str = "") -> None:
        if not self.attempt_open:
            return
        self.attempt_open = False
        self.flush_step_times()
        if self.leader and self.run is not None:
            self.run.attempt_ended(status, reason)

    def crashed(self, exc: BaseException) -> None:
        """Report an exception that ended training: an interruption (every rank that saw one,
        under one id per attempt so a crash seen by 1,024 ranks is one interruption), then
        the attempt's end (the leader), then flush. Never raises."""
        if not self.attempt_open or self.run is None:
            self.close()  # training had ended; something after it failed: just flush
            return
        try:
            killed = isinstance(exc, KeyboardInterrupt | SystemExit)
            reason, message = crash_texts(exc)
            self.flush_step_times()
            self.run.interruption(
                CRASH_CATEGORY,
                message=message,
                step=self.step,
                planned=True if killed else None,  # a person or the job chose to stop
                hosts=[self.run.host],
                lost_steps=max(0, self.step - self._last_saved_step),
                id=f"crash-a{self.attempt}",
            )
            self.end_attempt("killed" if killed else "failed", reason)
        except Exception:  # reporting must never hide the exception that ended training
            logger.exception("chronicle: could not report the crash")
        finally:
            self.attempt_open = False
            self.close()

    def close(self, timeout: float | None = None) -> None:
        """Flush (at most `timeout`, default the Run's flush_timeout_s) and stop the Run. What
        is not delivered by then stays in the spool for the next start or `sync`."""
        run, self.run = self.run, None
        if run is None:
            return
        try:
            run.finish(timeout=timeout)
        except ChronicleError as error:
            logger.error("chronicle: %s", error)

    # --- during training -----------------------------------------------------------------

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        if not self.leader:
            return
        numbers = numeric_metrics(metrics)
        if not numbers:
            return
        try:
            self.ensure_run().log(numbers, step=step)
        except ValueError as error:  # a metric name the server would refuse
            logger.warning("chronicle: metrics at step %s not logged: %s", step, error)

    def step_started(self, step: int) -> None:
        """Record when `step` began (the input of goodput), once per step: with gradient
        accumulation a framework may say so once per micro-batch."""
        if not (self.attempt_open and self.leader) or step <= self._last_step_started:
            return
        moment = round(time.time(), 6)
        if self._step_starts and step != self._first_step + len(self._step_starts):
            self.flush_step_times()  # an event holds consecutive steps only
        if not self._step_starts:
            self._first_step = step
        self._step_starts.append(moment)
        self._last_step_started = step
        if (
            len(self._step_starts) >= STEP_TIMES_PER_EVENT
            or moment - self._step_starts[0] >= STEP_TIMES_MAX_AGE_S
        ):
            self.flush_step_times()

    def flush_step_times(self) -> None:
        if self._step_starts and self.run is not None:
            self.run.event("step_times", first_step=self._first_step, start_times=self._step_starts)
        self._step_starts = []

    def checkpoint_saved(self, step: int, path: str | os.PathLike[str] | None) -> None:
        """A save just ended: report it, timed from `mark` (the framework's last hook before
        the save began), with its size and location."""
        started, self.mark = self.mark, now()  # a second save in a row starts now
        if not (self.attempt_open and self.leader) or self.run is None:
            return
        blocking = round(max(0.0, self.mark[0] - started[0]), 6) if started else None
        uri = os.fspath(path) if path is not None else None
        self.run.event(
            "checkpoint_saved",
            step=step,
            blocking_save_s=blocking,
            status="saved",
            size_bytes=path_size(path) if path is not None else None,
            uri=uri if uri and len(uri) <= MAX_URI else None,
            tier=self.checkpoint_tier,
        )
        self._last_saved_step = step

    def interval(self, label: str, started: Mark, step: int | None = None) -> None:
        """A custom badput period (an evaluation) from `started` until now."""
        if not (self.attempt_open and self.leader) or self.run is None:
            return
        elapsed = max(0.0, time.perf_counter() - started[0])
        self.run.event(
            "interval",
            id=f"{label}-{uuid.uuid4().hex}",
            kind="custom",
            label=label,
            start=round(started[1], 6),
            end=round(started[1] + elapsed, 6),
            step=step,
        )
