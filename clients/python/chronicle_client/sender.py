"""The Sender: turns spooled records into batches and posts them, oldest first, from a Run's
background thread (or from `sync`); and the Stats it counts in.

Batch ids name the spooled range they carry: `<run>-a<attempt>-r<rank>-<session>-<segment>-
<start>-<end>`. A restart regroups unsent records from the acknowledged offset, so a range is
never sent under two ids with two bodies; overlapping ranges are harmless because points are
keyed (run, attempt, name, step) and every event the client makes carries an `id` (or is
idempotent by nature: attempt start/end, checkpoint per step).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chronicle_client import spool as spool_module
from chronicle_client.spool import CONTENT_KINDS, KIND_EVENT, KIND_METRICS, KIND_RUN_INFO, Spool
from chronicle_client.transport import ChronicleError, ServerBugError, Transport

logger = logging.getLogger("chronicle_client")

# The server's limits are 20,000 points and 1,000 events per batch and 8 MiB per body; stay
# well under them so a batch is never refused for its size.
MAX_POINTS_PER_BATCH = 5_000
MAX_EVENTS_PER_BATCH = 500
MAX_BATCH_SPOOL_BYTES = 4 * 1024 * 1024
BATCH_ID_LIMIT = 128

_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=True).encode


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


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
