"""The local spool: append-only, CRC-framed record files written before anything is sent.

Layout of one spool directory (one writing process at a time, held by an flock on `lock`):

    <session>-<segment>.spool   records, appended with one write() each
    <session>-<segment>.ack     how far the server has acknowledged that segment

A record is `MAGIC (2 bytes) | kind (1) | payload length (u32) | CRC-32 of kind+payload (u32)`
followed by the payload. The first record of a segment is a header (kind `h`, JSON: run,
attempt, rank, host, session, segment) so a segment can be sent by anyone holding it, with no
other state; a writer that moves on to a new segment closes the old one with a seal (`z`).

A record is written with one write() to the page cache, so a SIGKILLed process loses nothing
it has written; only a machine crash can lose what was not yet fsynced (every
`fsync_interval_s`, by the client's housekeeping thread). A crash mid-write leaves a torn last
record: its length or CRC does not check, and the reader skips it. Corruption in the middle is
skipped by searching for the next record that checks.

The `.ack` file is append-only too: 12-byte records (offset u64, CRC-32 of it u32); the last
whole one that checks is the acknowledged offset. Segments fully acknowledged and no longer
written are deleted with their ack file.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"\xc4\x7e"
_HEAD = struct.Struct("<2scII")
HEAD_SIZE = _HEAD.size
_ACK = struct.Struct("<QI")
# A record larger than this is corruption, not data (log() refuses dicts anywhere near it).
MAX_RECORD_BYTES = 64 * 1024 * 1024

KIND_HEADER = b"h"
KIND_METRICS = b"m"
KIND_EVENT = b"e"
KIND_RUN_INFO = b"i"
KIND_SEAL = b"z"
CONTENT_KINDS = (KIND_METRICS, KIND_EVENT, KIND_RUN_INFO)

SPOOL_SUFFIX = ".spool"
ACK_SUFFIX = ".ack"


class SpoolBusyError(RuntimeError):
    """Another live process holds this spool directory."""


def frame(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(kind))
    return _HEAD.pack(MAGIC, kind, len(payload), crc) + payload


@dataclass(frozen=True)
class Record:
    offset: int
    end: int
    kind: bytes
    payload: bytes


@dataclass
class ScanResult:
    records: list[Record]
    # Offset just past the last record read (or skipped as corrupt); the next scan starts here.
    end: int
    # A record that does not check, at the end of the file and with nothing valid after it.
    torn: bool = False
    corrupt_bytes: int = 0
    at_eof: bool = False


_OK, _INCOMPLETE, _BAD = 0, 1, 2


def _parse(data: bytes | memoryview, pos: int) -> tuple[int, bytes, int]:
    """(status, kind, total length) of the record at `pos`."""
    if len(data) - pos < HEAD_SIZE:
        return _INCOMPLETE, b"", 0
    magic, kind, length, crc = _HEAD.unpack_from(data, pos)
    if magic != MAGIC or length > MAX_RECORD_BYTES:
        return _BAD, b"", 0
    total = HEAD_SIZE + length
    if len(data) - pos < total:
        return _INCOMPLETE, kind, total
    if zlib.crc32(data[pos + HEAD_SIZE : pos + total], zlib.crc32(kind)) != crc:
        return _BAD, b"", 0
    return _OK, kind, total


def _resync(data: bytes, pos: int) -> int | None:
    """The next position after `pos` holding a whole record that checks."""
    while True:
        pos = data.find(MAGIC, pos + 1)
        if pos < 0:
            return None
        if _parse(data, pos)[0] == _OK:
            return pos


def scan(path: Path, start: int, *, max_bytes: int = 4 * 1024 * 1024, live: bool) -> ScanResult:
    """Records of `path` from offset `start`, reading about `max_bytes`.

    `live` says a writer may still be appending: an incomplete record at the end is then a
    write in progress (wait for it), not a torn one (skip it)."""
    window = max_bytes
    while True:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(start)
            data = file.read(max(0, min(size - start, window)))
        reaches_eof = start + len(data) >= size
        result = ScanResult(records=[], end=start)
        pos = 0
        grow_to = 0
        while pos < len(data):
            status, kind, total = _parse(data, pos)
            if status == _OK:
                payload = data[pos + HEAD_SIZE : pos + total]
                result.records.append(Record(start + pos, start + pos + total, kind, payload))
                pos += total
                continue
            if status == _INCOMPLETE and not reaches_eof:
                if not result.records and total > window:
                    grow_to = total  # one record larger than the window: read it whole
                break
            following = _resync(data, pos)
            if following is not None:
                result.corrupt_bytes += following - pos
                pos = following
                continue
            if not reaches_eof:
                # Garbage up to the end of the window: skip it, keep reading after it.
                result.corrupt_bytes += len(data) - pos
                pos = len(data)
                break
            if not live:
                result.torn = True
            break
        if grow_to:
            window = grow_to
            continue
        result.end = start + pos
        result.at_eof = reaches_eof and (pos == len(data) or result.torn or live)
        return result


def read_ack(path: Path) -> int:
    ack_path = path.with_suffix(ACK_SUFFIX)
    try:
        data = ack_path.read_bytes()
    except FileNotFoundError:
        return 0
    # Walk back from the last whole entry: a torn or corrupt last entry is ignored.
    for index in range(len(data) // _ACK.size - 1, -1, -1):
        offset, crc = _ACK.unpack_from(data, index * _ACK.size)
        if zlib.crc32(struct.pack("<Q", offset)) == crc:
            return int(offset)
    return 0


def read_header(path: Path) -> dict[str, Any] | None:
    result = scan(path, 0, max_bytes=64 * 1024, live=False)
    if result.records and result.records[0].kind == KIND_HEADER:
        header: dict[str, Any] = json.loads(result.records[0].payload)
        return header
    return None


def spool_dirs(root: Path) -> Iterator[Path]:
    """Every spool directory under `root` (itself included), oldest first."""
    found = {path.parent for path in Path(root).rglob(f"*{SPOOL_SUFFIX}")}
    yield from sorted(found)


def new_session() -> str:
    # Sortable by start time, so older sessions' segments are sent first; random so that two
    # processes never mint the same batch ids.
    return f"{time.time_ns() // 1_000_000:013d}-{secrets.token_hex(3)}"


class Spool:
    """A spool directory. The writer side (`open_writer`, `append`) is used by one Run; the
    reader side (`segments`, `ack`, `remove`) by its sender thread or by `sync`."""

    def __init__(
        self,
        directory: Path | str,
        *,
        segment_bytes: int = 16 * 1024 * 1024,
        max_bytes: int = 1024 * 1024 * 1024,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._lock_fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._lock_fd)
            raise SpoolBusyError(f"{self.directory} is in use by another process") from exc
        self._fd: int | None = None
        self._active: Path | None = None
        self._size = 0
        self._header: dict[str, Any] = {}
        self._segment_number = 0
        self.session = ""
        self.dirty = False

    # --- writer ------------------------------------------------------------------------------

    def open_writer(self, header: dict[str, Any]) -> None:
        self.session = new_session()
        self._header = header
        with self._lock:
            self._open_segment()

    def _open_segment(self) -> None:
        self._segment_number += 1
        path = self.directory / f"{self.session}-{self._segment_number:06d}{SPOOL_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        header = {**self._header, "session": self.session, "segment": self._segment_number}
        record = frame(KIND_HEADER, json.dumps(header).encode())
        os.write(fd, record)
        self._fd, self._active, self._size = fd, path, len(record)

    def append(self, kind: bytes, payload: bytes) -> None:
        """Append one record: a single write() under a lock. Raises OSError (disk full)."""
        record = frame(kind, payload)
        with self._lock:
            if self._fd is None:
                raise OSError("the spool is closed")
            if self._size + len(record) > self.segment_bytes:
                self._rotate()
            written = os.write(self._fd, record)
            self._size += written
            self.dirty = True
            if written != len(record):
                # A short write (disk full) leaves a torn record the reader skips; say so.
                raise OSError(f"short write to the spool: {written} of {len(record)} bytes")

    def _rotate(self) -> None:
        assert self._fd is not None
        os.write(self._fd, frame(KIND_SEAL, b""))
        os.close(self._fd)
        self._open_segment()

    def fsync(self) -> None:
        """Flush the active segment to disk; called off the logging thread."""
        with self._lock:
            if self._fd is None or not self.dirty:
                return
            self.dirty = False
            # fsync on a duplicate, outside the lock: fsync can take milliseconds, log() not.
            fd = os.dup(self._fd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def position(self) -> tuple[Path | None, int]:
        with self._lock:
            return self._active, self._size

    def is_live(self, path: Path) -> bool:
        return path == self._active

    def close(self) -> None:
        """Stop writing: delete the active segment if it was all delivered, else seal it for
        the next start or `sync`. Releases the directory."""
        with self._lock:
            if self._fd is not None:
                active = self._active
                assert active is not None
                if read_ack(active) >= self._size:
                    os.close(self._fd)
                    self.remove(active)
                else:
                    os.write(self._fd, frame(KIND_SEAL, b""))
                    os.fsync(self._fd)
                    os.close(self._fd)
                self._fd, self._active = None, None
        self.release()

    def release(self) -> None:
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    # --- reader ------------------------------------------------------------------------------

    def segments(self) -> list[Path]:
        return sorted(self.directory.glob(f"*{SPOOL_SUFFIX}"))

    def ack(self, path: Path, offset: int) -> None:
        with open(path.with_suffix(ACK_SUFFIX), "ab") as file:
            file.write(_ACK.pack(offset, zlib.crc32(struct.pack("<Q", offset))))

    def remove(self, path: Path) -> None:
        for victim in (path, path.with_suffix(ACK_SUFFIX)):
            victim.unlink(missing_ok=True)

    def total_bytes(self) -> int:
        total = 0
        for path in self.segments():
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
        return total

    def pending_before(self, position: tuple[Path | None, int]) -> bool:
        """Whether anything written before `position` is not yet acknowledged."""
        active, offset = position
        for path in self.segments():
            if active is None or path.name < active.name:
                return True
            if path == active:
                return read_ack(path) < offset
        return False
