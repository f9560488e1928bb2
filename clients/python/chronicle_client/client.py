"""Run: the training-loop side (log() appends to the spool and returns), and the Sender that
turns spooled records into batches and posts them from a background thread (or from `sync`).

Batch ids name the spooled range they carry: `<run>-a<attempt>-r<rank>-<session>-<segment>-
<start>-<end>`. A restart regroups unsent records from the acknowledged offset, so a range is
never sent under two ids with two bodies; overlapping ranges are harmless because points are
keyed (run, attempt, name, step) and every event the client makes carries an `id` (or is
idempotent by nature: attempt start/end, checkpoint per step).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import operator
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chronicle_client import spool as spool_module
from chronicle_client.ranks import RankTimer
from chronicle_client.spool import (
    CONTENT_KINDS,
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
    ServerBugError,
    Transport,
)

logger = logging.getLogger("chronicle_client")

# The server's limits are 20,000 points and 1,000 events per batch and 8 MiB per body; stay
# well under them so a batch is never refused for its size.
MAX_POINTS_PER_BATCH = 5_000
MAX_EVENTS_PER_BATCH = 500
MAX_BATCH_SPOOL_BYTES = 4 * 1024 * 1024
MAX_METRICS_PER_LOG = 10_000
MAX_NAME_LENGTH = 200
BATCH_ID_LIMIT = 128

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=True).encode


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


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


@dataclass
class Stats:
    """Counters of one client (a Run's, or a `sync`'s). Everything dropped is counted here."""

    points_logged: int = 0
    events_logged: int = 0
    batches_sent: int = 0
    points_sent: int = 0
    events_sent: int = 0
    duplicates: int = 0
    conflicts: int = 0
    retries: int = 0
    # Refused by the server (400 and the like): set aside in <spool>/rejected/, not resent.
    batches_rejected: int = 0
    points_rejected: int = 0
    # Answered 500 again and again (a server bug): set aside in <spool>/dead-letter/ so the
    # batches after it still go (each file is the exact body, to POST again once fixed).
    batches_dead_lettered: int = 0
    points_dead_lettered: int = 0
    # Lost on the client: spool over its size bound, disk errors, torn or corrupt records.
    points_dropped: int = 0
    events_dropped: int = 0
    torn_records: int = 0
    corrupt_bytes: int = 0
    last_problem: str = ""
    errors: list[ChronicleError] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "errors"}
        data["errors"] = [str(error) for error in self.errors]
        return data


class Sender:
    """Sends a spool's records, oldest first, one batch at a time."""

    def __init__(
        self,
        spool: Spool,
        transport: Transport,
        stats: Stats,
        *,
        max_points: int = MAX_POINTS_PER_BATCH,
        max_events: int = MAX_EVENTS_PER_BATCH,
    ) -> None:
        self.spool = spool
        self.transport = transport
        self.stats = stats
        self.max_points = max_points
        self.max_events = max_events
        self.fatal: ChronicleError | None = None
        self._headers: dict[Path, dict[str, Any] | None] = {}

    def send_next(
        self, *, stop: threading.Event | None = None, deadline: float | None = None
    ) -> bool:
        """Send (or settle) the next pending range. False when there is nothing to do now.
        Raises GaveUpError when stopped or past the deadline while retrying."""
        for path in self.spool.segments():
            try:
                if self._settle_segment(path, stop=stop, deadline=deadline):
                    return True
            except FileNotFoundError:
                continue  # removed under us (spool bound): look again
        return False

    def _settle_segment(
        self, path: Path, *, stop: threading.Event | None, deadline: float | None
    ) -> bool:
        live = self.spool.is_live(path)
        acked = spool_module.read_ack(path)
        result = spool_module.scan(path, acked, max_bytes=MAX_BATCH_SPOOL_BYTES, live=live)
        taken, points, events = [], 0, 0
        for record in result.records:
            if record.kind == KIND_METRICS:
                count = record.payload.count(b'":') or 1  # metric names end with '":'
                if taken and points + count > self.max_points:
                    break
                points += count
            elif record.kind == KIND_EVENT:
                if taken and events + 1 > self.max_events:
                    break
                events += 1
            taken.append(record)
        end = taken[-1].end if taken else acked
        if len(taken) == len(result.records):
            end = result.end
            self.stats.corrupt_bytes += result.corrupt_bytes
        content = [record for record in taken if record.kind in CONTENT_KINDS]
        if not content:
            if end > acked:
                self.spool.ack(path, end)
                return True
            if result.at_eof and not live:
                if result.torn:
                    self.stats.torn_records += 1
                    logger.warning("skipped a torn last record in %s", path.name)
                self.spool.remove(path)
                self._headers.pop(path, None)
                return True
            return False
        header = self._header(path)
        if header is None:  # a segment whose header was lost: nothing names its run
            self.stats.corrupt_bytes += end - acked
            self.spool.ack(path, end)
            return True
        batch_id = _batch_id(header, acked, end)
        body, n_points, n_events = _batch_body(header, batch_id, content)
        self._post(path, batch_id, body, n_points, n_events, stop=stop, deadline=deadline)
        self.spool.ack(path, end)
        return True

    def _post(
        self,
        path: Path,
        batch_id: str,
        body: bytes,
        n_points: int,
        n_events: int,
        *,
        stop: threading.Event | None,
        deadline: float | None,
    ) -> None:
        def count_retry(problem: str) -> None:
            self.stats.retries += 1
            self.stats.last_problem = problem

        try:
            answer = self.transport.send(
                body, batch_id=batch_id, stop=stop, deadline=deadline, on_retry=count_retry
            )
        except ServerBugError as error:
            self._set_aside("dead-letter", batch_id, body, error)
            self.stats.batches_dead_lettered += 1
            self.stats.points_dead_lettered += n_points
            return
        except ChronicleError as error:
            if error.status == 409:
                # Only this range ever carries this id: the server holds these records from
                # an earlier send (encoded differently, e.g. by an older client). Delivered.
                self.stats.conflicts += 1
                return
            if error.status in (401, 403):
                # The token is wrong for every batch: stop, keep the spool for `sync`.
                self.fatal = error
                self.stats.errors.append(error)
                raise
            self._set_aside("rejected", batch_id, body, error)
            self.stats.batches_rejected += 1
            self.stats.points_rejected += n_points
            return
        self.stats.batches_sent += 1
        self.stats.points_sent += n_points
        self.stats.events_sent += n_events
        if answer.payload.get("duplicate"):
            self.stats.duplicates += 1

    def _set_aside(self, folder: str, batch_id: str, body: bytes, error: ChronicleError) -> None:
        """Keep a batch that is not sent again in <spool>/<folder>/<batch_id>.json."""
        directory = self.spool.directory / folder
        directory.mkdir(exist_ok=True)
        (directory / f"{batch_id}.json").write_bytes(body)
        self.stats.errors.append(error)
        self.stats.last_problem = f"{error}; kept in {directory}"
        logger.error("%s; the batch is kept in %s", error, directory)

    def _header(self, path: Path) -> dict[str, Any] | None:
        if path not in self._headers:
            self._headers[path] = spool_module.read_header(path)
        return self._headers[path]

    def drop_oldest(self) -> None:
        """Keep the spool under its bound: delete the oldest segments not being written,
        counting what they held that was never delivered."""
        segments = self.spool.segments()
        total = self.spool.total_bytes()
        for path in segments:
            if total <= self.spool.max_bytes or self.spool.is_live(path):
                return
            try:
                size = path.stat().st_size
                result = spool_module.scan(
                    path, spool_module.read_ack(path), max_bytes=size + 1, live=False
                )
            except FileNotFoundError:
                continue
            for record in result.records:
                if record.kind == KIND_METRICS:
                    self.stats.points_dropped += len(json.loads(record.payload)[2])
                elif record.kind == KIND_EVENT:
                    self.stats.events_dropped += 1
            self.spool.remove(path)
            total -= size
            self.stats.last_problem = f"spool over {self.spool.max_bytes} bytes: dropped oldest"
            logger.error(
                "chronicle spool over its bound (%s bytes): dropped %s; %s points dropped so far",
                self.spool.max_bytes,
                path.name,
                self.stats.points_dropped,
            )


def _batch_id(header: dict[str, Any], start: int, end: int) -> str:
    tail = f"-a{header['attempt']}-r{header['rank']}-{header['session']}-{header['segment']}"
    tail += f"-{start}-{end}"
    return _slug(header["run"])[: BATCH_ID_LIMIT - len(tail)] + tail


def _batch_body(
    header: dict[str, Any], batch_id: str, records: list[spool_module.Record]
) -> tuple[bytes, int, int]:
    # Points go as columns (one object per metric name): smaller, and several times cheaper
    # for the server to parse than one object per point.
    series: dict[str, dict[str, list[Any]]] = {}
    points = 0
    events: list[dict[str, Any]] = []
    document: dict[str, Any] = {
        "batch_id": batch_id,
        "run": header["run"],
        "attempt": header["attempt"],
    }
    # Spools written by older clients may lack these.
    if isinstance(header.get("rank"), int):
        document["rank"] = header["rank"]
    if header.get("host"):
        document["host"] = header["host"]
    for record in records:
        if record.kind == KIND_METRICS:
            step, when, values = json.loads(record.payload)
            for name, value in values.items():
                column = series.get(name)
                if column is None:
                    column = series[name] = {"steps": [], "values": [], "times": []}
                column["steps"].append(step)
                column["values"].append(value)
                column["times"].append(when)
                points += 1
        elif record.kind == KIND_EVENT:
            events.append(json.loads(record.payload))
        elif record.kind == KIND_RUN_INFO:
            document["run_info"] = json.loads(record.payload)
    if series:
        document["series"] = [{"name": name, **columns} for name, columns in series.items()]
    if events:
        document["events"] = events
    return _encode(document).encode(), points, len(events)


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
        or with `attempt=` an earlier one, as a restarted job reports why it restarted."""
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
        self, status: str = "completed", reason: str = "", *, timeout: float | None = None
    ) -> bool:
        """End the attempt (on the rank that reports it), flush within `timeout`, stop. What
        is not delivered by then stays in the spool for the next start or `sync`."""
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
            self.finish("completed")
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
