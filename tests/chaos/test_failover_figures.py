"""The figures `make chaos-failover` reports, from the client's answers (the run itself needs
Debian's PostgreSQL with pg_auto_failover and a few minutes: `make chaos-failover`)."""

from __future__ import annotations

from chaos.failover import Figures, latency_figures, recovered_at
from chaos.load import ClientStats

KILL = 100.0


def _stats(*answers: tuple[str, float, float, float, int]) -> ClientStats:
    stats = ClientStats()
    stats.answered.extend(answers)
    return stats


def test_recovery_is_the_first_2xx_to_a_request_sent_after_the_kill() -> None:
    stats = _stats(
        ("before", 99.0, 99.0, 99.5, 1),
        # Sent just before the kill, answered just after it: not the recovery.
        ("in-flight", 99.9, 99.9, 100.2, 1),
        ("retried", 99.8, 109.0, 109.4, 3),
        ("after", 108.5, 108.5, 109.1, 1),
    )

    assert recovered_at(stats, KILL) == 109.1
    assert recovered_at(_stats(("before", 99.0, 99.0, 99.5, 1)), KILL) is None


def test_the_failover_window_holds_the_batches_in_flight_at_the_kill() -> None:
    stats = _stats(
        ("early", 50.0, 50.0, 50.2, 1),
        ("waited", 99.0, 109.0, 110.0, 4),
        ("sent-during", 104.0, 109.0, 109.5, 2),
        ("late", 120.0, 120.0, 120.1, 1),
    )

    figures = latency_figures(stats, KILL, 109.1)

    assert figures["window_batches"] == 2
    assert figures["p95_window_s"] == 11.0
    assert figures["max_s"] == 11.0


def test_the_verdict_line_names_the_figures_and_fails_on_any_problem() -> None:
    figures = Figures(points_sent=100_000, promoted_after_s=8.4, first_2xx_after_s=9.0)
    figures.stored = {"points": 100_000, "duplicated": 0}
    assert figures.verdict().startswith("chaos-failover: PASS: 100,000 / 100,000 points")
    assert "standby took writes 8.4 s" in figures.verdict()

    figures.problems.append("acknowledged but not stored: b-1")
    assert figures.verdict().startswith("chaos-failover: FAIL")
    assert "acknowledged but not stored: b-1" in figures.verdict()
