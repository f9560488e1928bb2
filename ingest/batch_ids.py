"""A web process's memory of what a batch written at once resolves: (project, run name,
attempt number) → the run, the attempt and the attempt's series ids by metric name.

A live run sends the same run, attempt and metric names batch after batch, and looking them
up again (run, attempt and series reads, and the series cap check: four statements) cost ~3 ms
of the web process's CPU per 1,000-point batch, a third of its share (measured 8.0-8.5 ms a
batch before, 4.9-5.3 ms after); PostgreSQL's share was within the noise.

What a lookup also does still happens when it matters: a batch with run_info updates the run
as before (ingest.services.processing._apply reads the run afresh then); a batch that names
a metric not remembered for its attempt looks the run, attempt and series up (creating what
is missing, with the version bumps and the cap check) as before; only what a committed transaction
resolved is remembered (transaction.on_commit).

A remembered row deleted since (admin, retention) cannot make a batch write orphans: a
remembered batch writes only points of remembered series, and the points' series check
(telemetry migration 0019) refuses a missing series with foreign_key_violation at once (a run
or attempt deleted takes its series with it); ingest.services.batch_accept then forgets the
project's entries and writes the batch once more with fresh lookups.

The run's own fields that the SDC check reads (deterministic_metrics, sdc_tolerance) may be
changed elsewhere (the admin, another process's run_info): an entry is used for at most TTL_S
seconds, so such a change reaches every process's checks within that long, as a revoked
token stops working everywhere within INGEST_TOKEN_CACHE_S.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from time import monotonic

from telemetry.models import Attempt, Run

# Seconds an entry is used after its run and attempt were read (see above).
TTL_S = 5.0
# (project, run, attempt) triples remembered, least recently used dropped first: a web
# process serves a few live attempts at a time, and an entry is a few hundred bytes.
MAX_ENTRIES = 1024

_Key = tuple[int, str, int]


@dataclass(frozen=True)
class BatchIds:
    run: Run
    attempt: Attempt
    series: dict[str, int]
    expires_at: float


_lock = threading.Lock()  # a threaded server's requests share the entries
_entries: OrderedDict[_Key, BatchIds] = OrderedDict()


def batch_ids_get(*, project_id: int, run_name: str, number: int) -> BatchIds | None:
    key = (project_id, run_name, number)
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= monotonic():
            del _entries[key]
            return None
        _entries.move_to_end(key)
        return entry


def batch_ids_remember(
    *,
    project_id: int,
    run: Run,
    attempt: Attempt,
    series: dict[str, int],
    renewed: BatchIds | None,
) -> None:
    """Remember what a committed batch resolved. `renewed` is the entry the batch used, if
    any: its attempt was not read again, so its expiry stays. Series ids remembered for the
    same run and attempt are kept beside the batch's (a run's batches may name different
    metrics: evaluation every few hundred steps)."""
    key = (project_id, run.name, attempt.number)
    with _lock:
        current = _entries.get(key)
        same = current is not None and (current.run.pk, current.attempt.pk) == (run.pk, attempt.pk)
        if renewed is None:
            expires_at = monotonic() + TTL_S
        elif same and current is not None:
            expires_at = current.expires_at
        else:
            return  # forgotten, expired or replaced since the batch read it
        if same and current is not None:
            series = {**current.series, **series}
        _entries[key] = BatchIds(run=run, attempt=attempt, series=series, expires_at=expires_at)
        _entries.move_to_end(key)
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)


def batch_ids_forget(*, project_id: int | None = None) -> None:
    """Forget the project's entries (every project's with None)."""
    with _lock:
        if project_id is None:
            _entries.clear()
            return
        for key in [key for key in _entries if key[0] == project_id]:
            del _entries[key]
