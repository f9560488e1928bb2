"""The shared evidence model's maths: ranking is stable and noisy-OR never falls as agreeing
evidence is added."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagnosis.evidence import Cause, Evidence, noisy_or, ranked

weights = st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=12)


# Input generation is slow on a loaded CI machine; the property, not the clock, is the test.
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(weights, st.floats(min_value=0.0, max_value=1.0))
def test_noisy_or_never_falls_when_evidence_is_added(existing, added):
    assert noisy_or([*existing, added]) >= noisy_or(existing) - 1e-12


def test_noisy_or_of_two_halves_is_three_quarters():
    assert noisy_or([0.5, 0.5]) == pytest.approx(0.75)
    assert noisy_or([]) == 0.0


def test_ranked_puts_the_most_confident_first_and_breaks_ties_by_kind():
    causes = [Cause("thermal", "", 0.4), Cause("straggler", "", 0.9), Cause("power", "", 0.4)]
    assert [cause.kind for cause in ranked(causes)] == ["straggler", "power", "thermal"]


def test_confidence_and_weight_outside_the_unit_interval_are_refused():
    with pytest.raises(ValueError, match="confidence"):
        Cause("thermal", "", 1.5)
    with pytest.raises(ValueError, match="weight"):
        Evidence("dcgm", "XID 79", -0.1)


def test_a_cause_renders_in_the_api_shape():
    cause = Cause(
        "straggler", "rank 13 on node1 is 20% slower", 0.8, hosts=("node1",), ranks=(13,),
        evidence=(Evidence("rank_timings", "rank 13 median 1.2 s vs 1.0 s", 0.8, host="node1"),),
    )  # fmt: skip
    assert cause.as_dict() == {
        "kind": "straggler", "detail": "rank 13 on node1 is 20% slower", "hosts": ["node1"],
        "ranks": [13], "devices": [], "config_keys": [], "confidence": 0.8,
        "evidence": ["rank 13 median 1.2 s vs 1.0 s"],
    }  # fmt: skip
