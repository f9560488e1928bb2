"""The spares calculator's formula (logbook.spares)."""

from __future__ import annotations

import math

import pytest

from logbook.spares import expected_failures, poisson_tail, spare_hosts, spares_needed


def test_expected_failures_is_n_lambda_t():
    # Llama 3: 419 unexpected in 54 days on 16,384 GPUs.
    rate = 419 / (16_384 * 54) * 1000
    found = expected_failures(accelerators=16_384, rate_per_1000_days=rate, days=54)
    assert found.value == pytest.approx(419)
    assert found.formula == "N · λ · t"


def test_poisson_tail_matches_its_definition():
    mean = 2.5
    at_most_3 = sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(4))
    assert poisson_tail(mean, 3) == pytest.approx(1 - at_most_3)


def test_spares_are_the_fewest_that_keep_the_miss_below_target():
    rate = 419 / (16_384 * 54) * 1000
    found = spare_hosts(
        accelerators=16_384, rate_per_1000_days=rate, repair_hours=48, wait_target_hours=1
    )
    mean = found.inputs["m = N·λ·R"]
    assert mean == pytest.approx(419 / 54 * 2, rel=1e-3)  # ~15.5 hosts out for repair
    spares = int(found.value)
    assert poisson_tail(mean, spares) <= 0.05 < poisson_tail(mean, spares - 1)


def test_a_wait_target_longer_than_the_repair_needs_no_spare():
    found = spare_hosts(
        accelerators=1024, rate_per_1000_days=1.0, repair_hours=4, wait_target_hours=6
    )
    assert found.value == 0
    assert "within the wait target" in found.note


def test_a_huge_job_gets_an_answer_at_once_close_to_the_exact_tail():
    # 10 million accelerators, a week's repair: a mean of ~33,000 hosts out
    found = spare_hosts(
        accelerators=10_000_000, rate_per_1000_days=0.47, repair_hours=168, wait_target_hours=1
    )
    mean = found.inputs["m = N·λ·R"]
    assert mean > 30_000
    assert mean < found.value < mean + 2 * mean**0.5
    # and at the switch to the approximation the two agree within a spare or two
    exact = spares_needed(999.0, 0.05)
    assert abs(exact - spares_needed(1001.0, 0.05)) <= 3
    assert poisson_tail(999.0, exact) <= 0.05 < poisson_tail(999.0, exact - 1)
