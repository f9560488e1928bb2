"""The bench measures native and /mlflow ingest the same way: every per-token and per-project
rate limit off (stack.chronicle.RATE_LIMITS_OFF), except in the DCGM fleet phase, which
pushes through the per-token push rate at its production default."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import dcgm_fleet, pages
from stack.chronicle import RATE_LIMITS_OFF, Chronicle


def _stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Chronicle, list[dict]]:
    pg = SimpleNamespace(url_for=lambda name: f"postgres://127.0.0.1:1/{name}")
    redis = SimpleNamespace(url="redis://127.0.0.1:1/0")
    app = Chronicle(tmp_path, pg, redis)  # type: ignore[arg-type]
    restarts: list[dict] = []
    # A web pool "restart" records the environment it would start with.
    monkeypatch.setattr(app, "restart_web", lambda: restarts.append(app.env()))
    return app, restarts


def test_the_stack_runs_with_every_ingest_rate_limit_off(tmp_path, monkeypatch):
    app, _ = _stack(tmp_path, monkeypatch)
    env = app.env()
    # native's token and project buckets and the push rate /mlflow and Prometheus keep
    assert set(RATE_LIMITS_OFF) == {
        "INGEST_TOKEN_POINTS_PER_S",
        "INGEST_TOKEN_REQUESTS_PER_S",
        "INGEST_PROJECT_POINTS_PER_S",
        "INGEST_PROJECT_REQUESTS_PER_S",
        "INGEST_RATE_LIMIT",
        "INGEST_PROJECT_MAX_IN_FLIGHT",
        "INGEST_PROJECT_PUSH_RATE",
    }
    for key in RATE_LIMITS_OFF:
        assert env[key] == "0"
    # an explicit setting wins; None leaves the setting to its default
    assert app.env(INGEST_RATE_LIMIT="5/s")["INGEST_RATE_LIMIT"] == "5/s"
    assert "INGEST_RATE_LIMIT" not in app.env(INGEST_RATE_LIMIT=None)


def test_the_dcgm_phase_pushes_through_the_default_push_rate_and_restores_it(tmp_path, monkeypatch):
    # given the bench's stack, its DCGM phase measured with the fleet stubbed out
    app, restarts = _stack(tmp_path, monkeypatch)
    seen: list[dict[str, Any]] = []

    def measure(app_: Chronicle, token: str, cookie: str, **kwargs: Any) -> Any:
        seen.append(app_.env())
        return SimpleNamespace(
            pushes_per_s=1.0, p95_ms=1.0, cpu_ms_per_push=1.0, fleet_page_p95_ms=1.0,
            as_dict=lambda: {},
        )  # fmt: skip

    monkeypatch.setattr(dcgm_fleet, "measure", measure)
    monkeypatch.setattr(pages, "reader_cookie", lambda app_: "")
    args = SimpleNamespace(dcgm_hosts=10, dcgm_seconds=1.0)
    bench_main._dcgm(app, "token", args)  # type: ignore[arg-type]
    # then the fleet pushed to a web pool without INGEST_RATE_LIMIT (the settings default)
    # and the other limits still off
    assert len(seen) == 1
    assert "INGEST_RATE_LIMIT" not in seen[0]
    assert seen[0]["INGEST_TOKEN_POINTS_PER_S"] == "0"
    # the pool was restarted for the phase, and after it with the push rate off again
    assert ["INGEST_RATE_LIMIT" in env for env in restarts] == [False, True]
    assert app.env()["INGEST_RATE_LIMIT"] == "0"


def test_the_push_rate_is_off_again_when_the_dcgm_phase_fails(tmp_path, monkeypatch):
    app, restarts = _stack(tmp_path, monkeypatch)
    with pytest.raises(RuntimeError), app.production_push_rate():
        raise RuntimeError("the fleet phase failed")
    assert app.env()["INGEST_RATE_LIMIT"] == "0"
    assert len(restarts) == 2
