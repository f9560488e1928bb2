"""Run: the training-loop side of the client. log() appends to the spool and returns; a
background thread hands the spool to the Sender (chronicle_client.sender), which batches
and posts it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import operator
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from chronicle_client.ranks import RankTimer
from chronicle_client.sender import MAX_POINTS_PER_BATCH, Sender, Stats, _encode, _slug
from chronicle_client.spool import (
    KIND_EVENT,
    KIND_METRICS,
    KIND_RUN_INFO,
    Spool,
    SpoolBusyError,
)
from chronicle_client.transport import (
    ChronicleError,
    GaveUpError,
    RetryPolicy,
    Transport,
)

logger = logging.getLogger("chronicle_client")

MAX_METRICS_PER_LOG = 10_000
MAX_NAME_LENGTH = 200


def _default_attempt() -> int:
    """CHRONICLE_ATTEMPT, else the launcher's restart count + 1 (torchrun, Slurm), else 1."""
    if os.environ.get("CHRONICLE_ATTEMPT"):
        return int(os.environ["CHRONICLE_ATTEMPT"])
    for name in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name]) + 1
    return 1


def _default_rank() -> int:
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


class _Checkpoint:
    """What a `with run.checkpoint(step):` block may fill in about the save."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.size_bytes: int | None = None
        self.uri: str | None = None
        self.checksum: str | None = None
        self.tier: str | None = None
        self.async_save_s: float | None = None


class Run:
    """One attempt of a run, seen from one rank. See README.md for the whole story."""

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        token: str | None = None,
        attempt: int | None = None,
        rank: int | None = None,
        host: str | None = None,
        run_info: Mapping[str, Any] | None = None,
        resumed_from_step: int | None = None,
        start: bool = True,
        end_attempt: bool | None = None,
        spool_dir: str | Path | None = None,
        max_spool_bytes: int = 1024 * 1024 * 1024,
        segment_bytes: int = 16 * 1024 * 1024,
        flush_interval_s: float = 1.0,
        flush_timeout_s: float = 30.0,
        fsync_interval_s: float | None = 0.1,
        gzip: bool = True,
        timeout_s: float = 10.0,
        retry_base_s: float = 1.0,
        retry_cap_s: float = 60.0,
        max_points_per_batch: int = MAX_POINTS_PER_BATCH,
    ) -> None:
        url = url or os.environ.get("CHRONICLE_URL")
        token = token or os.environ.get("CHRONICLE_TOKEN")
        if not url or not token:
            raise ValueError("Run needs url= and token= (or CHRONICLE_URL and CHRONICLE_TOKEN)")
        self.name = name
        self.attempt = attempt if attempt is not None else _default_attempt()
        self.rank = rank if rank is not None else _default_rank()
        self.host = host or socket.gethostname()
        # Only one rank may say how the attempt ended, or the last rank to finish would win.
        self.end_attempt = self.rank == 0 if end_attempt is None else end_attempt
        self.flush_interval_s = flush_interval_s
        self.flush_timeout_s = flush_timeout_s
        self.fsync_interval_s = fsync_interval_s
        self.stats = Stats()
        root = Path(
            spool_dir
            or os.environ.get("CHRONICLE_SPOOL_DIR")
            or Path.home() / ".cache" / "chronicle" / "spool"
        )
        self.spool = self._open_spool(root / _slug(name), segment_bytes, max_spool_bytes)
        self.spool.open_writer(
            {"run": name, "attempt": self.attempt, "rank": self.rank, "host": self.host}
        )
        transport = Transport(
            url,
            token,
            gzip=gzip,
            timeout_s=timeout_s,
            policy=RetryPolicy(base_s=retry_base_s, cap_s=retry_cap_s),
        )
        self._sender = Sender(self.spool, transport, self.stats, max_points=max_points_per_batch)
        self._transport = transport
        self._names: set[str] = set()
        self._next_step = 0
        self._event_ids = 0
        self._heartbeats = 0
        self._heartbeat_due = False
        self._rank_timers: list[RankTimer] = []
        self._finished = False
        # How this attempt ended when the job reported its own interruption: finish()'s
        # default, so "interruption, then finish()" does not file the attempt as completed.
        self._interrupted_status: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._progress = threading.Condition()
        if run_info:
            self._append(KIND_RUN_INFO, _encode(dict(run_info)).encode(), events=0)
        self._threads = [
            threading.Thread(target=self._send_loop, name="chronicle-sender", daemon=True),
            threading.Thread(target=self._housekeeping_loop, name="chronicle-spool", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        atexit.register(self._at_exit)
        if start:
            hosts = [self.host]
            self.attempt_started(resumed_from_step=resumed_from_step, hosts=hosts)

    def _open_spool(self, directory: Path, segment_bytes: int, max_bytes: int) -> Spool:
        rank_dir = directory / f"r{self.rank}"
        try:
            return Spool(rank_dir, segment_bytes=segment_bytes, max_bytes=max_bytes)
        except SpoolBusyError:
            # Another live process has this rank's spool (two jobs with one name, or a
            # restart while the old process still lingers): spool beside it.
            fallback = directory / f"r{self.rank}.{os.getpid()}"
            logger.warning("%s is busy; spooling to %s", rank_dir, fallback)
            return Spool(fallback, segment_bytes=segment_bytes, max_bytes=max_bytes)

    # --- the training loop's side ---------------------------------------------------------

    def log(
        self, metrics: Mapping[str, Any], step: int | None = None, *, time: float | None = None
    ) -> None:
        """Record metric values at `step` (default: one past the last step logged). Returns
        once the values are in the spool file: a few microseconds, no network."""
        if step is None:
            step = self._next_step
        elif type(step) is not int:
            step = operator.index(step)  # numpy integers pass, floats do not
        if step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        self._next_step = step + 1
        names = self._names
        values = {}
        for name, value in metrics.items():
            if name not in names:
                self._check_name(name)
            values[name] = float(value)
        if len(values) > MAX_METRICS_PER_LOG:
            raise ValueError(f"at most {MAX_METRICS_PER_LOG} metrics per log() call")
        when = round(_now() if time is None else time, 3)
        self._append(KIND_METRICS, _encode([step, when, values]).encode(), points=len(values))

    def _check_name(self, name: Any) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a metric name must be a non-empty string, got {name!r}")
        if len(name) > MAX_NAME_LENGTH or any(ord(char) < 32 for char in name):
            raise ValueError(
                f"metric name {name[:50]!r}...: at most {MAX_NAME_LENGTH} characters, "
                "no control characters"
            )
        self._names.add(name)

    def _append(self, kind: bytes, payload: bytes, *, points: int = 0, events: int = 1) -> None:
        if self._finished:
            raise RuntimeError(f"run {self.name!r} is finished; start a new Run to log more")
        if kind != KIND_METRICS:
            points = 0
        try:
            self.spool.append(kind, payload)
        except OSError as exc:
            # Never crash the training loop for the spool's sake: count and warn.
            self.stats.points_dropped += points
            self.stats.events_dropped += events if kind == KIND_EVENT else 0
            self.stats.last_problem = f"spool write failed: {exc}"
            logger.error("chronicle spool write failed (%s); data dropped and counted", exc)
            return
        if kind == KIND_METRICS:
            self.stats.points_logged += points
        elif kind == KIND_EVENT:
            self.stats.events_logged += 1

    def event(self, type_: str, **fields: Any) -> None:
        """Any event of the ingest contract (docs/ingest.md), sent as given plus the time and
        this attempt. Fields left as None are omitted."""
        document: dict[str, Any] = {"type": type_}
        when = fields.pop("time", None)
        if when is None and type_ not in ("step_times", "interval"):
            when = round(_now(), 3)  # those two carry their own times
        if when is not None:
            document["time"] = when
        document.update({key: value for key, value in fields.items() if value is not None})
        document.setdefault("attempt", self.attempt)
        self._append(KIND_EVENT, _encode(document).encode())

    def _event_id(self, kind: str) -> str:
        # Events with an id are stored once however many batches carry them.
        self._event_ids += 1
        return f"{self.spool.session}-r{self.rank}-{kind}-{self._event_ids}"

    def attempt_started(
        self, *, resumed_from_step: int | None = None, hosts: list[str] | None = None
    ) -> None:
        """Every rank may send it: the server keeps one attempt and adds each rank's host."""
        self.event("attempt_started", resumed_from_step=resumed_from_step, hosts=hosts)

    def attempt_ended(self, status: str = "completed", reason: str = "") -> None:
        self.event("attempt_ended", status=status, reason=reason or None)

    @contextlib.contextmanager
    def checkpoint(
        self, step: int, *, tier: str | None = None, uri: str | None = None
    ) -> Iterator[_Checkpoint]:
        """Time the blocking part of a checkpoint save:

            with run.checkpoint(step) as ckpt:
                torch.save(state, path)
                ckpt.size_bytes = os.path.getsize(path)

        Sends checkpoint_saved with blocking_save_s; status failed if the block raises."""
        info = _Checkpoint(step)
        info.tier, info.uri = tier, uri
        started = time.perf_counter()
        status = "saved"
        try:
            yield info
        except BaseException:
            status = "failed"
            raise
        finally:
            self.event(
                "checkpoint_saved",
                step=step,
                blocking_save_s=round(time.perf_counter() - started, 6),
                status=status,
                size_bytes=info.size_bytes,
                uri=info.uri,
                checksum=info.checksum,
                tier=info.tier,
                async_save_s=info.async_save_s,
            )

    def checkpoint_restored(self, step: int, *, restore_s: float | None = None) -> None:
        self.event("checkpoint_restored", step=step, restore_s=restore_s)

    def interruption(
        self,
        category: str,
        *,
        message: str = "",
        step: int | None = None,
        planned: bool | None = None,
        hosts: list[str] | None = None,
        devices: list[str] | None = None,
        component: str | None = None,
        lost_steps: int | None = None,
        attempt: int | None = None,
        id: str | None = None,
    ) -> None:
        """What interrupted an attempt (taxonomy slug or name, e.g. `faulty-gpu`): this one,
        or with `attempt=` an earlier one, as a restarted job reports why it restarted. This
        attempt's own makes finish()'s default status failed (killed when planned)."""
        if attempt is None or attempt == self.attempt:
            self._interrupted_status = "killed" if planned else "failed"
        self.event(
            "interruption",
            attempt=attempt,
            id=id or self._event_id("interruption"),
            category=category,
            message=message or None,
            step=step,
            planned=planned,
            hosts=hosts,
            devices=devices,
            component=component,
            lost_steps=lost_steps,
        )

    def note(
        self, title: str, body: str = "", *, kind: str = "note", step: int | None = None
    ) -> None:
        """A logbook entry, marked automatic."""
        self.event(
            "note", id=self._event_id("note"), title=title, body=body or None, kind=kind, step=step
        )

    def rank_timer(self, *, every: int = 10, device: str | None = None) -> RankTimer:
        """A per-rank section timer (chronicle_client.ranks): `with timer.step(step):` and
        `with timer.section("forward"):`, one `rank_timings` event per `every` steps."""
        timer = RankTimer(self, every=every, device=device)
        self._rank_timers.append(timer)
        return timer

    def heartbeat(self) -> None:
        """Say the job is alive: a `heartbeat` event sent by the sender thread, not spooled (a
        late liveness signal means nothing). It moves the run's last-seen time, which is what
        the server's stalled-run check watches."""
        self._heartbeat_due = True
        self._wake.set()

    # --- delivery ------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything logged so far is acknowledged, at most `timeout` seconds
        (default flush_timeout_s). Raises the first ChronicleError the server answered."""
        timeout = self.flush_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        position = self.spool.position()
        self._wake.set()
        delivered = False
        with self._progress:
            while True:
                delivered = not self.spool.pending_before(position)
                if delivered or self._sender.fatal or time.monotonic() >= deadline:
                    break
                self._progress.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        self._raise_errors()
        return delivered

    def finish(
        self, status: str | None = None, reason: str = "", *, timeout: float | None = None
    ) -> bool:
        """End the attempt (on the rank that reports it), flush within `timeout`, stop. What
        is not delivered by then stays in the spool for the next start or `sync`. `status`
        defaults to completed, or failed (killed when planned) once this run reported an
        interruption of its own attempt."""
        status = status or self._interrupted_status or "completed"
        if self._finished:
            return True
        for timer in self._rank_timers:
            timer.flush()
        if self.end_attempt:
            self.attempt_ended(status, reason)
        try:
            return self.flush(timeout)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=self._transport.timeout_s + 1)
        self.spool.close()
        atexit.unregister(self._at_exit)

    def _at_exit(self) -> None:
        # The interpreter is exiting without finish(): deliver what we can, bounded in time.
        try:
            self.flush(self.flush_timeout_s)
        except ChronicleError:
            pass
        finally:
            self._shutdown()

    def _raise_errors(self) -> None:
        if self.stats.errors:
            error = self.stats.errors[0]
            if self._sender.fatal is None:
                self.stats.errors.pop(0)  # raise each refusal once
            raise error

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            self.finish()
        elif isinstance(exc, KeyboardInterrupt):
            self.finish("killed", "KeyboardInterrupt")
        else:
            self.finish("failed", f"{type(exc).__name__}: {exc}"[:10_000])

    def _send_loop(self) -> None:
        while not self._stop.is_set():
            if self._heartbeat_due:
                self._send_heartbeat()
            try:
                progressed = self._sender.send_next(stop=self._stop)
            except GaveUpError:
                return
            except ChronicleError:
                return  # fatal (token refused): the spool keeps everything for `sync`
            except Exception:  # never let the thread die silently on a bug or a disk error
                logger.exception("chronicle sender failed; retrying")
                progressed = False
                self._stop.wait(self.flush_interval_s)
            with self._progress:
                self._progress.notify_all()
            if progressed:
                continue
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()

    def _send_heartbeat(self) -> None:
        self._heartbeat_due = False
        self._heartbeats += 1
        batch_id = (
            f"{_slug(self.name)[:40]}-a{self.attempt}-r{self.rank}-{self.spool.session}"
            f"-hb{self._heartbeats}"
        )
        event = {"type": "heartbeat", "time": time.time(), "rank": self.rank}
        body = _encode(
            {"batch_id": batch_id, "run": self.name, "attempt": self.attempt, "events": [event]}
        )
        try:
            self._transport.post(body.encode())
        except Exception as exc:  # best effort by design
            self.stats.last_problem = f"heartbeat failed: {exc!r}"

    def _housekeeping_loop(self) -> None:
        interval = self.fsync_interval_s or 0.5
        while not self._stop.wait(interval):
            try:
                if self.fsync_interval_s:
                    self.spool.fsync()
                if self.spool.total_bytes() > self.spool.max_bytes:
                    dropped = self.stats.points_dropped
                    self._sender.drop_oldest()
                    if self.stats.points_dropped > dropped:
                        self.note(
                            "Chronicle client dropped data: spool full",
                            f"Rank {self.rank} on {self.host} dropped "
                            f"{self.stats.points_dropped} points so far: the spool passed "
                            f"{self.spool.max_bytes} bytes while the server was unreachable.",
                            kind="note",
                        )
            except Exception:
                logger.exception("chronicle spool housekeeping failed")


def _now() -> float:
    return time.time()
