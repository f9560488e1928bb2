"""The demo ingest stream: deterministic, valid against the batch contract, and rich enough
(attempts, interruptions, wasted progress, NaN) to exercise every page. No database."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from demo.batches import demo_batches
from ingest import contract

# What the demo may send is what the ingest contract accepts: its batch keys and event fields.
BATCH_KEYS = set(contract.BATCH_FIELDS) | set(contract.BATCH_SECTIONS)
EVENT_FIELDS: dict[str, set[str]] = {
    kind: set(event.fields) for kind, event in contract.EVENTS.items()
}
TIME_FIELDS = ("time", "detected_at", "recovered_at")
LATEST = datetime(2026, 11, 21, tzinfo=UTC)


@pytest.fixture(scope="module")
def batches() -> list[dict[str, Any]]:
    return demo_batches()


def _events(batches: list[dict[str, Any]], kind: str | None = None) -> list[dict[str, Any]]:
    return [e for b in batches for e in b["events"] if kind is None or e["type"] == kind]


def _parse(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def test_same_seed_same_output_and_other_seed_differs() -> None:
    # json.dumps because NaN != NaN would make a plain == fail on identical output.
    first = json.dumps(demo_batches(seed=3))
    assert first == json.dumps(demo_batches(seed=3))
    assert first != json.dumps(demo_batches(seed=4))


def test_is_plain_json(batches: list[dict[str, Any]]) -> None:
    assert json.loads(json.dumps(batches))  # no numpy scalars, datetimes or tuples


def test_batch_envelope(batches: list[dict[str, Any]]) -> None:
    ids = [b["batch_id"] for b in batches]
    assert len(ids) == len(set(ids))
    assert "run_info" in batches[0]
    assert batches[0]["run_info"]["accelerator_count"] == 1024
    for b in batches:
        assert set(b) <= BATCH_KEYS
        assert b["run"] == "demo-70b-pretrain"
        assert isinstance(b["attempt"], int) and b["attempt"] >= 1
        assert len(b["metrics"]) <= 20_000


def test_metric_points(batches: list[dict[str, Any]]) -> None:
    points = [m for b in batches for m in b["metrics"]]
    assert 10_000 <= len(points) <= 200_000
    for m in points:
        assert type(m["step"]) is int and m["step"] >= 0
        assert type(m["value"]) is float
    assert {m["name"] for m in points} >= {"loss", "grad_norm", "lr", "tokens_per_s"}


def test_events_use_only_contract_types_and_fields(batches: list[dict[str, Any]]) -> None:
    for e in _events(batches):
        assert e["type"] in EVENT_FIELDS, e
        assert set(e) - {"type", "time"} <= EVENT_FIELDS[e["type"]], e
        assert "time" in e
    assert all("title" in e for e in _events(batches, "note"))
    assert all(isinstance(e["step"], int) for e in _events(batches, "checkpoint_saved"))


def test_all_times_are_rfc3339_and_before_cutoff(batches: list[dict[str, Any]]) -> None:
    times = [_parse(m["time"]) for b in batches for m in b["metrics"]]
    times += [_parse(e[f]) for e in _events(batches) for f in TIME_FIELDS if f in e]
    assert min(times) >= datetime(2026, 11, 1, tzinfo=UTC)
    assert max(times) <= LATEST


def test_attempts_and_endings(batches: list[dict[str, Any]]) -> None:
    started = [e["attempt"] for e in _events(batches, "attempt_started")]
    assert len(started) >= 5 and started == list(range(1, len(started) + 1))
    ended = {e["attempt"]: e["status"] for e in _events(batches, "attempt_ended")}
    assert set(ended) == set(started[:-1])  # the last attempt is still running
    assert "killed" in ended.values() and "failed" in ended.values()


def test_interruption_categories(batches: list[dict[str, Any]]) -> None:
    interruptions = _events(batches, "interruption")
    assert len({e["category"] for e in interruptions}) >= 5
    assert any(e["planned"] for e in interruptions)
    assert {"faulty-gpu", "loss-divergence"} <= {e["category"] for e in interruptions}
    for e in interruptions:
        assert _parse(e["time"]) <= _parse(e["detected_at"]) <= _parse(e["recovered_at"])


def test_resumes_from_an_earlier_attempts_checkpoint(batches: list[dict[str, Any]]) -> None:
    saved: dict[int, int] = {}  # step -> attempt that saved it
    for b in batches:
        for e in b["events"]:
            if e["type"] == "checkpoint_saved":
                assert e["step"] not in saved  # the store keys checkpoints by (run, step)
                saved[e["step"]] = b["attempt"]
    resumes = [e for e in _events(batches, "attempt_started") if "resumed_from_step" in e]
    assert len(resumes) >= 4
    for e in resumes:
        assert saved[e["resumed_from_step"]] < e["attempt"]


def test_lost_steps_match_last_checkpoint(batches: list[dict[str, Any]]) -> None:
    resumed = {
        e["attempt"]: e["resumed_from_step"]
        for e in _events(batches, "attempt_started")
        if "resumed_from_step" in e
    }
    for b in batches:
        for e in b["events"]:
            if e["type"] == "interruption":
                assert e["lost_steps"] == e["step"] - resumed[b["attempt"] + 1]


def test_restarts_repeat_steps(batches: list[dict[str, Any]]) -> None:
    attempts_per_step: dict[int, set[int]] = {}
    for b in batches:
        for m in b["metrics"]:
            if m["name"] == "loss":
                attempts_per_step.setdefault(m["step"], set()).add(b["attempt"])
    repeated = [s for s, attempts in attempts_per_step.items() if len(attempts) > 1]
    assert len(repeated) >= 100
    assert 3_000 <= len(attempts_per_step) <= 4_500


def test_nan_loss_precedes_divergence(batches: list[dict[str, Any]]) -> None:
    nans = [
        (b["attempt"], m["step"])
        for b in batches
        for m in b["metrics"]
        if m["name"] == "loss" and math.isnan(m["value"])
    ]
    assert len(nans) == 1
    attempt, step = nans[0]
    divergence = [
        (b["attempt"], e["step"])
        for b in batches
        for e in b["events"]
        if e["type"] == "interruption" and e["category"] == "loss-divergence"
    ]
    assert divergence == [(attempt, step)]


def test_sdc_spike_is_a_single_step(batches: list[dict[str, Any]]) -> None:
    (sdc,) = _events(batches, "sdc_suspected")
    losses = {
        (b["attempt"], m["step"]): m["value"]
        for b in batches
        for m in b["metrics"]
        if m["name"] == "loss"
    }
    attempt = next(b["attempt"] for b in batches if sdc in b["events"])
    spike = losses[(attempt, sdc["step"])]
    assert spike == sdc["value"]
    assert spike > 2.5 * losses[(attempt, sdc["step"] - 1)]
    assert spike > 2.5 * losses[(attempt, sdc["step"] + 1)]


def test_events_ride_in_the_batch_covering_their_time(batches: list[dict[str, Any]]) -> None:
    for b in batches[1:-1]:
        if not b["metrics"]:
            continue
        first = _parse(b["metrics"][0]["time"])
        for e in b["events"]:
            if e["type"] not in {"attempt_started", "checkpoint_restored", "note"}:
                assert _parse(e["time"]) >= first, e


def test_naive_start_is_utc() -> None:
    out = demo_batches(start=datetime(2026, 11, 5))
    assert out[0]["events"][0]["time"] == "2026-11-05T00:00:00Z"
