"""Window matching of failure signals (logbook.incident_windows), without a database."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from logbook.incident_windows import Signal, gap, window_groups, window_match

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


def sig(seconds: float, *keys: str, kind: str = "", until_s: float | None = None) -> Signal:
    until = None if until_s is None else T0 + timedelta(seconds=until_s)
    return Signal(at=T0 + timedelta(seconds=seconds), keys=frozenset(keys), kind=kind, until=until)


def test_gap_is_zero_for_overlapping_spans_and_the_distance_otherwise() -> None:
    hang = sig(0, "a", until_s=300)
    assert gap(hang, sig(120, "a")) == timedelta(0)
    assert gap(hang, sig(320, "a")) == timedelta(seconds=20)
    assert gap(sig(320, "a"), hang) == timedelta(seconds=20)


def test_a_crash_report_20_s_after_an_xid_on_the_same_attempt_joins_it() -> None:
    dcgm = sig(0, "attempt:7", kind="dcgm")
    assert window_match(sig(20, "attempt:7", kind="job"), [[dcgm]], window=WINDOW) == 0


def test_no_shared_key_or_beyond_the_window_is_a_new_failure() -> None:
    dcgm = sig(0, "attempt:7", kind="dcgm")
    assert window_match(sig(20, "attempt:8", kind="job"), [[dcgm]], window=WINDOW) is None
    assert window_match(sig(601, "attempt:7", kind="job"), [[dcgm]], window=WINDOW) is None
    assert window_match(sig(600, "attempt:7", kind="job"), [[dcgm]], window=WINDOW) == 0


def test_a_hang_is_near_from_its_last_step_to_its_detection() -> None:
    # The step stopped at 0, the hang was detected at 900 s; the watchdog's crash at 920 s.
    hang = sig(0, "attempt:7", kind="hang", until_s=900)
    assert window_match(sig(920, "attempt:7", kind="job"), [[hang]], window=WINDOW) == 0


def test_the_nearest_group_wins() -> None:
    groups = [[sig(0, "rack:r1")], [sig(200, "rack:r1")]]
    assert window_match(sig(150, "rack:r1"), groups, window=WINDOW) == 1
    assert window_match(sig(100, "rack:r1"), groups, window=WINDOW) == 0  # tie: the earlier


def test_one_per_kind_keeps_a_second_report_of_the_same_kind_apart() -> None:
    groups = [[sig(0, "attempt:7", kind="job")]]
    second = sig(30, "attempt:7", kind="job")
    assert window_match(second, groups, window=WINDOW, one_per_kind=True) is None
    assert window_match(second, groups, window=WINDOW) == 0


def test_groups_chain_hosts_of_one_rack_and_do_not_depend_on_order() -> None:
    # Three hosts of rack r1 failing 4 minutes apart chain into one event; r2's is its own;
    # r1's host failing an hour later is another.
    signals = [
        sig(0, "rack:r1", "host:a"),
        sig(240, "rack:r1", "host:b"),
        sig(480, "rack:r1", "host:c"),
        sig(100, "rack:r2", "host:d"),
        sig(4000, "rack:r1", "host:a"),
    ]
    expected = [[0, 240, 480], [100], [4000]]
    for order in itertools.permutations(signals):
        groups = window_groups(order, window=timedelta(minutes=5))
        assert [[int((s.at - T0).total_seconds()) for s in g] for g in groups] == expected
