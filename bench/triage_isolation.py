"""Auto-triage under a hostile batch (issue 42, finding 2): one project sends a batch of four
interruptions whose messages are 10,000 characters of "nfs…" text (the shape that made the old
filesystem rule backtrack for 43 s at 7,200 characters and kept both worker processes busy
for 60 s); another project's ordinary interruption arrives right behind it. The figure is
how long that other project's suggestion takes from its batch's 202 to its row, alone (its
usual time, the median of a few) and behind the hostile batch, printed side by side, with the
hostile batch's own four suggestions' time.

A private stack (PostgreSQL, Redis, gunicorn, a Celery worker of 2 processes, as
`make demo` runs), nothing shared with the machine's other servers. `python -m
bench.triage_isolation` runs this phase alone."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import psycopg

from bench.load import post

PATH = "/api/v1/ingest"
HOSTILE_MESSAGES = 4
HOSTILE_CHARS = 10_000
USUAL_SAMPLES = 5
WAIT_S = 120.0
NORMAL = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
    "OpType=ALLREDUCE) ran for 600013 milliseconds before timing out.\n"
    "NVRM: Xid (PCI:0000:18:00): 79, pid=4242, GPU has fallen off the bus."
)


def hostile_message(index: int) -> str:
    r"""One 'nfs' word of ~10,000 characters (each 'nfs' in it made the old rule's backtracking
    `[-\w]*.{0,60}(?:error…)` try every split of the rest: quadratic), then a line the
    filesystem rule does match, so that each interruption gets its suggestion."""
    tail = f"\nnfs{index}: write error on /ckpt/step_{index}, server timeout"
    return ("nfs" * HOSTILE_CHARS)[: HOSTILE_CHARS - len(tail)] + tail


@dataclass
class TriageIsolation:
    usual_s: float  # the other project's suggestion alone: median of USUAL_SAMPLES
    usual_samples_s: list[float]
    behind_hostile_s: float  # the same, right behind the hostile batch
    hostile_batch_s: float  # the hostile batch's four suggestions, from its 202
    hostile_chars: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _batch(run: str, key: str, messages: list[str]) -> bytes:
    events = [
        {"type": "interruption", "id": f"{key}-{i}", "time": "2026-05-04T12:00:00Z",
         "attempt": 1, "hosts": [f"node{i}"], "message": message}
        for i, message in enumerate(messages)
    ]  # fmt: skip
    return json.dumps({"batch_id": key, "run": run, "attempt": 1, "events": events}).encode()


def _send(address: tuple[str, int], token: str, body: bytes) -> float:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    _conn, status, payload = post(None, address, PATH, body, headers)
    if status != 202:
        raise RuntimeError(f"ingest answered {status}: {payload[:300]!r}")
    return time.monotonic()


def _suggested(db: psycopg.Connection, batch_key: str) -> int:
    # Bench reads the product's tables directly (it is not a product module): how many
    # interruptions of the batch (their source key carries the event id) have a suggestion.
    row = db.execute(
        "SELECT count(*) FROM logbook_triagesuggestion s "
        "JOIN logbook_interruption i ON i.id = s.interruption_id "
        "WHERE strpos(i.source_key, %s) > 0",
        (f"{batch_key}-",),
    ).fetchone()
    return int(row[0]) if row else 0


def _wait(db: psycopg.Connection, batch_key: str, count: int, since: float) -> float:
    """Seconds from `since` until the batch's `count` suggestions are stored."""
    deadline = since + WAIT_S
    while time.monotonic() < deadline:
        if _suggested(db, batch_key) >= count:
            return time.monotonic() - since
        time.sleep(0.02)
    raise RuntimeError(f"the suggestions of batch {batch_key} not stored within {WAIT_S} s")


def measure(app: Any, *, samples: int = USUAL_SAMPLES) -> TriageIsolation:
    address = app.base_url
    token_a = app.create_token("triage-hostile")
    token_b = app.create_token("triage-other")
    with psycopg.connect(app.env()["DATABASE_URL"], autocommit=True) as db:
        usual = []
        for n in range(samples):
            key = f"usual{n}-{uuid.uuid4().hex[:6]}"
            sent = _send(address, token_b, _batch("other-run", key, [NORMAL]))
            usual.append(_wait(db, key, 1, sent))
        hostile_key = f"hostile-{uuid.uuid4().hex[:6]}"
        other_key = f"behind-{uuid.uuid4().hex[:6]}"
        hostile = [hostile_message(i) for i in range(HOSTILE_MESSAGES)]
        hostile_sent = _send(address, token_a, _batch("hostile-run", hostile_key, hostile))
        other_sent = _send(address, token_b, _batch("other-run", other_key, [NORMAL]))
        behind = _wait(db, other_key, 1, other_sent)
        hostile_s = _wait(db, hostile_key, HOSTILE_MESSAGES, hostile_sent)
    return TriageIsolation(
        usual_s=round(statistics.median(usual), 3),
        usual_samples_s=[round(s, 3) for s in usual],
        behind_hostile_s=round(behind, 3),
        hostile_batch_s=round(hostile_s, 3),
        hostile_chars=HOSTILE_CHARS,
    )


def main(argv: list[str] | None = None) -> TriageIsolation:
    from stack import chronicle
    from stack.chronicle import chronicle_stack

    parser = argparse.ArgumentParser(prog="python -m bench.triage_isolation", description=__doc__)
    parser.add_argument("--samples", type=int, default=USUAL_SAMPLES)
    parser.add_argument(
        "--ready-timeout-s",
        type=float,
        default=chronicle.READY_TIMEOUT_S,
        help="how long the stack's servers may take to start (longer on a loaded machine)",
    )
    args = parser.parse_args(argv)
    chronicle.READY_TIMEOUT_S = args.ready_timeout_s
    with chronicle_stack(concurrency=2) as app:
        figure = measure(app, samples=args.samples)
    print(
        f"another project's suggestion: usual {figure.usual_s:.3f} s "
        f"(samples {figure.usual_samples_s}), behind {HOSTILE_MESSAGES} x "
        f"{HOSTILE_CHARS:,}-character 'nfs' messages {figure.behind_hostile_s:.3f} s; "
        f"the hostile batch's own suggestions {figure.hostile_batch_s:.3f} s",
        file=sys.stderr,
    )
    print(json.dumps(figure.as_dict()))
    return figure


if __name__ == "__main__":
    main()
