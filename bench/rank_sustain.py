"""`make bench`'s ranks phase: a 16,384-rank job reporting one step every 6 s, four sections
gathered on rank 0, sent over HTTP for ten minutes to the bench's gunicorn, Celery worker
and beat (whose rank-timings refresh rolls the steps up every 30 s).

It keeps up when neither backlog grows: batches accepted but not yet stored, and steps stored
but not yet rolled up into distributions (the refresh runs every 30 s, so up to 5 steps and
one refresh's work behind is the steady state). Both are sampled after every step; the phase
compares the last third's worst with the middle third's, then times the drain after the
last step.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from bench.load import percentile, send_all
from chaos.verify import backlog
from stack.chronicle import DB_NAME, Chronicle

SECTIONS = {"step": 1.0, "forward": 0.33, "backward": 0.58, "data_loading": 0.02}
STEP_S = 6.0


def _body(run: str, step: int, ranks: int, rng: np.random.Generator, moment: float) -> bytes:
    base = rng.normal(STEP_S, 0.05, ranks)
    base[ranks // 3] *= 1.2  # a planted straggler, as in the tests
    event: dict[str, Any] = {
        "type": "rank_timings",
        "time": moment,
        "first_step": step,
        "ranks": list(range(ranks)),
        "sections": {name: np.round(base * share, 4).tolist() for name, share in SECTIONS.items()},
    }
    if step == 0:
        event["hosts"] = [f"h{rank // 8:05d}" for rank in range(ranks)]
    return json.dumps(
        {"batch_id": f"{run}-{step}", "run": run, "attempt": 1, "events": [event]}
    ).encode()


def _rollup_lag(app: Chronicle, run: str) -> int:
    """Steps sent (stored raw) that have no distribution row yet."""
    [(sent, rolled)] = app.pg.rows(
        "SELECT (SELECT count(DISTINCT first_step) FROM telemetry_ranktiming_raw r"
        "  JOIN telemetry_attempt a ON a.id = r.attempt_id JOIN telemetry_run u ON u.id = a.run_id"
        "  WHERE u.name = %s),"
        " (SELECT count(DISTINCT step) FROM telemetry_rankstepstats s"
        "  JOIN telemetry_attempt a ON a.id = s.attempt_id JOIN telemetry_run u ON u.id = a.run_id"
        "  WHERE u.name = %s)",
        [run, run],
        database=DB_NAME,
    )
    return int(sent) - int(rolled)


def measure(
    app: Chronicle, token: str, *, ranks: int = 16_384, seconds: float = 600, stamp: str = ""
) -> dict[str, Any]:
    if app.beat is None:
        app.start_beat()
    run = f"bench-ranks-{stamp or int(time.time())}"
    rng = np.random.default_rng(16)
    steps = int(seconds // STEP_S)
    latencies: list[float] = []
    pending_seen: list[int] = []
    lag_seen: list[int] = []
    failures: list[str] = []
    began = time.monotonic()
    for step in range(steps):
        due = began + step * STEP_S
        time.sleep(max(0.0, due - time.monotonic()))
        body = _body(run, step, ranks, rng, time.time())
        sent = send_all(
            app.base_url, "/api/v1/ingest", [body], clients=1,
            headers={"Authorization": f"Bearer {token}"},
        )  # fmt: skip
        latencies.extend(sent.latencies_s)
        failures.extend(sent.failures)
        pending_seen.append(backlog(app.pg, run)[1])
        lag_seen.append(_rollup_lag(app, run))
    sending_s = time.monotonic() - began
    drained_after_s = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if backlog(app.pg, run)[1] == 0 and _rollup_lag(app, run) == 0:
            drained_after_s = time.monotonic() - began - sending_s
            break
        time.sleep(1.0)
    # Thirds: the first holds the warm-up (the beat's first pass comes after 30 s); keeping up
    # means the last third is no further behind than the middle one.
    third = len(pending_seen) // 3
    middle, last = slice(third, 2 * third), slice(2 * third, None)
    keeps_up = (
        not failures
        and drained_after_s is not None
        and max(pending_seen[last], default=0) <= max(2, max(pending_seen[middle], default=0))
        and max(lag_seen[last], default=0) <= max(lag_seen[middle], default=0) + 2
    )
    return {
        "ranks": ranks,
        "sections": len(SECTIONS),
        "steps": steps,
        "seconds": round(sending_s, 1),
        "body_bytes": len(body) if steps else 0,
        "post_p50_s": percentile(latencies, 50),
        "post_p95_s": percentile(latencies, 95),
        "pending_batches_max": [max(pending_seen[middle], default=0),
                                max(pending_seen[last], default=0)],
        "rollup_lag_steps_max": [max(lag_seen[middle], default=0), max(lag_seen[last], default=0)],
        "drained_after_s": drained_after_s,
        "keeps_up": keeps_up,
        "failures": failures[:5],
    }  # fmt: skip
