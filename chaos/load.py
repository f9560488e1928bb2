"""The chaos run's load: deterministic batches of points and events, and a client that sends
them at a steady pace and retries like a well-behaved training job."""

from __future__ import annotations

import http.client
import json
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

PROJECT_SLUG = "chaos"
METRICS = ("loss", "grad_norm", "learning_rate", "tokens_seen")
# Event times sit in the past: the API refuses times more than a day in the future.
BASE_EPOCH = 1_763_700_000


def point_value(metric_index: int, step: int) -> float:
    """Deterministic values, multiples of 1/1024 below 1000: exact in float8 and in any sum,
    so the checksum compares exactly, whatever order PostgreSQL adds them in."""
    return ((step * 7919 + metric_index * 104_729 + 13) % 1_000_003) / 1024


@dataclass(frozen=True)
class Batch:
    batch_id: str
    body: bytes
    points: int
    value_sum: Decimal
    weighted_sum: Decimal  # sum of value * (step + 1): catches values landing on wrong steps
    incidents: int
    checkpoints: int
    logbook_entries: int


def make_batches(run: str, n_points: int, points_per_batch: int) -> list[Batch]:
    """Batches covering n_points points of len(METRICS) series, with events: a checkpoint
    every batch, an interruption (incident, with a client `id`) every 4th batch and a note
    (logbook entry, without `id`: keyed by the batch's row) every 3rd batch."""
    steps_per_batch = max(1, points_per_batch // len(METRICS))
    total_steps = -(-n_points // len(METRICS))
    batches = []
    for index, first in enumerate(range(0, total_steps, steps_per_batch)):
        steps = range(first, min(first + steps_per_batch, total_steps))
        metrics = []
        value_sum = Decimal(0)
        weighted = Decimal(0)
        for step in steps:
            for m, name in enumerate(METRICS):
                value = point_value(m, step)
                metrics.append({"name": name, "step": step, "value": value})
                value_sum += Decimal(value)
                weighted += Decimal(value) * (step + 1)
        last = steps[-1]
        events: list[dict[str, Any]] = [
            {"type": "checkpoint_saved", "time": BASE_EPOCH + last, "step": last, "attempt": 1},
        ]
        if index % 4 == 0:
            events.append(
                {
                    "type": "interruption",
                    "id": f"{run}-incident-{index}",
                    "time": BASE_EPOCH + last,
                    "attempt": 1,
                    "category": "faulty-gpu",
                    "step": last,
                    "message": f"chaos incident {index}",
                }
            )
        if index % 3 == 0:
            events.append(
                {"type": "note", "time": BASE_EPOCH + last, "title": f"chaos note {index}"}
            )
        body = {
            "batch_id": f"{run}-{index:06d}",
            "run": run,
            "attempt": 1,
            "metrics": metrics,
            "events": events,
        }
        batches.append(
            Batch(
                batch_id=body["batch_id"],
                body=json.dumps(body, separators=(",", ":")).encode(),
                points=len(metrics),
                value_sum=value_sum,
                weighted_sum=weighted,
                incidents=int(index % 4 == 0),
                checkpoints=1,
                logbook_entries=int(index % 3 == 0),
            )
        )
    return batches


@dataclass
class ClientStats:
    accepted: int = 0  # 202
    duplicates: int = 0  # 200: a retry of a batch whose first answer was lost
    failed: list[str] = field(default_factory=list)
    retries: Counter[str] = field(default_factory=Counter)
    last_accept_at: float = 0.0
    # (batch_id, first try, the answered try's start, its 2xx answer, tries) of every batch
    # answered 2xx, monotonic times: the failover run's recovery time and latencies.
    answered: list[tuple[str, float, float, float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LoadClient:
    """Sends batches at a steady pace from a few threads; retries network errors, 429 and 5xx
    with jittered exponential backoff, honouring Retry-After, with the same batch_id and body
    every time, and never retries other 4xx (as docs/ingest.md asks of clients)."""

    def __init__(
        self,
        address: tuple[str, int],
        token: str,
        *,
        threads: int = 4,
        give_up_after_s: float = 240,
        seed: int = 6,
    ) -> None:
        self.address = address
        self.token = token
        self.threads = threads
        self.give_up_after_s = give_up_after_s
        self.rng = random.Random(seed)
        self.stats = ClientStats()

    def run(self, batches: Sequence[Batch], duration_s: float) -> ClientStats:
        work: queue.Queue[tuple[int, Batch]] = queue.Queue()
        for item in enumerate(batches):
            work.put(item)
        start = time.monotonic()
        gap = duration_s / max(1, len(batches))
        workers = [
            threading.Thread(target=self._loop, args=(work, start, gap), daemon=True)
            for _ in range(self.threads)
        ]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        return self.stats

    def _loop(self, work: queue.Queue[tuple[int, Batch]], start: float, gap: float) -> None:
        conn: http.client.HTTPConnection | None = None
        while True:
            try:
                index, batch = work.get_nowait()
            except queue.Empty:
                break
            delay = start + index * gap - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn = self._send(conn, batch)
        if conn is not None:
            conn.close()

    def _send(
        self, conn: http.client.HTTPConnection | None, batch: Batch
    ) -> http.client.HTTPConnection | None:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        first_try = time.monotonic()
        deadline = first_try + self.give_up_after_s
        tries = 0
        while True:
            tries += 1
            retry_after: float | None = None
            try_at = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(*self.address, timeout=30)
                conn.request("POST", "/api/v1/ingest", body=batch.body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                status = response.status
                retry_after_header = response.getheader("Retry-After")
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as exc:
                if conn is not None:
                    conn.close()
                conn = None
                reason = f"network:{type(exc).__name__}"
            else:
                if status in (200, 202):
                    with self.stats.lock:
                        if status == 202:
                            self.stats.accepted += 1
                        else:
                            self.stats.duplicates += 1
                        self.stats.last_accept_at = time.monotonic()
                        self.stats.answered.append(
                            (batch.batch_id, first_try, try_at, self.stats.last_accept_at, tries)
                        )
                    return conn
                if status != 429 and status < 500:
                    with self.stats.lock:
                        self.stats.failed.append(f"{batch.batch_id}: {status} {payload[:200]!r}")
                    return conn
                reason = f"http:{status}"
                if retry_after_header and retry_after_header.isdigit():
                    retry_after = float(retry_after_header)
            with self.stats.lock:
                self.stats.retries[reason] += 1
            if time.monotonic() > deadline:
                with self.stats.lock:
                    self.stats.failed.append(f"{batch.batch_id}: gave up after {tries} tries")
                return conn
            backoff = min(4.0, 0.1 * 2 ** min(tries, 6)) * self.rng.uniform(0.5, 1.5)
            time.sleep(min(10.0, retry_after) if retry_after is not None else backoff)
