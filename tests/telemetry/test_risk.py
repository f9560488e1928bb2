"""Hardware about to fail, the pure detector (telemetry.risk) and its measurement on the
replayed stream of bench.risk_replay (docs/at-risk.md quotes what this prints)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.risk_replay import replay
from telemetry import risk

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _readings(values: list[dict[str, float]], *, every=timedelta(hours=1)) -> list[risk.Reading]:
    start = NOW - every * (len(values) - 1)
    return [risk.Reading(start + i * every, one) for i, one in enumerate(values)]


SBE = risk.ECC_SBE[0]


def test_a_rising_correctable_ecc_rate_and_a_pending_remap_put_a_gpu_at_risk():
    counts = [0, 1, 2, 3, 4, 5, 15, 40, 90, 160, 250]
    values = [
        {SBE: c, risk.ROW_REMAP_PENDING: 1.0 if i >= 8 else 0.0} for i, c in enumerate(counts)
    ]
    found = risk.assess(_readings(values), now=NOW)
    assert found.at_risk
    kinds = {one.kind: one for one in found.signals}
    assert set(kinds) == {"ecc_rate", "row_remap_pending"}
    assert kinds["ecc_rate"].detail == "correctable (single-bit) ECC errors 1.0/h → 49.0/h"
    assert kinds["row_remap_pending"].since == NOW - timedelta(hours=2)
    assert found.score == 0.75
    assert found.action.startswith("drain before the next restart and reset the GPU")


def test_a_high_but_steady_rate_is_not_rising_and_one_reading_is_no_state():
    steady = [{SBE: 20.0 * i} for i in range(12)]
    assert not risk.assess(_readings(steady), now=NOW).signals
    one_pending = [{SBE: 0.0, risk.ROW_REMAP_PENDING: 0.0}] * 5 + [
        {SBE: 0.0, risk.ROW_REMAP_PENDING: 1.0}
    ]
    assert not risk.assess(_readings(one_pending), now=NOW).at_risk


def test_readings_older_than_the_lookback_and_too_short_a_span_say_nothing():
    counts = [{SBE: c} for c in [0, 0, 0, 0, 100, 400]]
    old = _readings(counts)
    assert risk.assess(old, now=NOW + risk.LOOKBACK + timedelta(hours=6)).signals == []
    brief = _readings(counts, every=timedelta(minutes=2))
    assert risk.assess(brief, now=NOW).signals == []


def test_a_counter_reset_is_growth_from_zero_not_a_negative_rate():
    assert risk.counter_increase([(NOW, 50.0), (NOW, 70.0), (NOW, 5.0), (NOW, 9.0)]) == 29.0


def test_precursor_xids_count_and_a_failed_remap_quarantines():
    xids = [risk.XidSeen(NOW - timedelta(hours=h), 92) for h in (3, 2)]
    found = risk.assess([], xids, now=NOW)
    assert [one.detail for one in found.signals] == ["XID 92 x2 (high single-bit ECC error rate)"]
    assert found.action == "drain before the next restart"
    xid_64 = risk.assess([], [risk.XidSeen(NOW, 64)], now=NOW)
    assert xid_64.action == "quarantine"
    # XID 79 is the failure itself, not a precursor.
    assert not risk.assess([], [risk.XidSeen(NOW, 79)], now=NOW).signals


def test_the_at_risk_list_measured_on_a_replayed_stream(capsys):
    measured = replay()
    with capsys.disabled():
        print("\n" + "\n".join(f"  at-risk replay: {line}" for line in measured.lines()))
    assert measured.failures == 28 and measured.with_precursors == 18
    # It cannot flag the failures that had no precursor: at most the share that had one.
    assert measured.flagged <= measured.with_precursors + measured.false_alarms
    assert measured.flagged_share >= 0.5
    assert measured.median_lead_h is not None and measured.median_lead_h >= 4
    assert measured.false_alarms_per_1000_gpu_days < 10
