"""Spare hosts for a job: the expected failures of a job of N accelerators in the next days,
and the spares that keep its restart wait under a target. Pure: numbers in, a `Derived` out
(logbook.failure_maths), with the formula shown beside the figure.

A job of N accelerators with a per-accelerator failure rate λ expects N·λ·t failures in time
t (DOMAIN.md §10; the Llama 3 paper's 419 unexpected interruptions in 54 days on 16,384 GPUs
are λ ≈ 0.47 per 1,000 GPU-days). Each failure takes a host out until it is repaired (R
hours); the job restarts at once when a spare host is ready and waits for a repair when none
is. Failures are taken as a Poisson process, so the hosts out for repair at any moment are
Poisson with mean m = N·λ·R: s spares leave the job without a spare with probability
P(Poisson(m) > s). The spares shown are the fewest that keep that below `miss`; a wait
target at least as long as the repair needs none (the repaired host itself comes back in
time).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from logbook.failure_maths import PER_ACCELERATOR_DAYS, Derived

DEFAULT_MISS = 0.05
MAX_SPARES = 100_000
# Past this mean the Poisson tail is read from its normal approximation (exact to a spare or
# two there, where the exact sum would take a pass over thousands of terms).
NORMAL_FROM = 1_000.0


def expected_failures(*, accelerators: int, rate_per_1000_days: float, days: float) -> Derived:
    value = accelerators * rate_per_1000_days / PER_ACCELERATOR_DAYS * days
    return Derived(
        value=value,
        unit="failures",
        formula="N · λ · t",
        inputs={
            "N": accelerators,
            "λ per 1,000 accelerator-days": rate_per_1000_days,
            "t days": days,
        },
    )


def poisson_tail(mean: float, spares: int) -> float:
    """P(Poisson(mean) > spares), summed in log space (exp(-mean) alone underflows past a
    mean of ~745: a projection to 100,000 accelerators with days of repair gets there)."""
    if mean <= 0:
        return 0.0
    log_mean = math.log(mean)
    cumulative = sum(math.exp(-mean + k * log_mean - math.lgamma(k + 1)) for k in range(spares + 1))
    return max(0.0, 1.0 - cumulative)


def spares_needed(mean: float, miss: float) -> int:
    """The fewest s with P(Poisson(mean) > s) <= miss: one pass over k (the tail is read as
    it is summed), or the normal approximation m + z·√m for a mean past NORMAL_FROM."""
    if mean <= 0:
        return 0
    if mean > NORMAL_FROM:
        return math.ceil(mean + NormalDist().inv_cdf(1 - miss) * math.sqrt(mean))
    log_mean = math.log(mean)
    cumulative = 0.0
    for k in range(MAX_SPARES + 1):
        cumulative += math.exp(-mean + k * log_mean - math.lgamma(k + 1))
        if 1.0 - cumulative <= miss:
            return k
    return MAX_SPARES


def spare_hosts(
    *,
    accelerators: int,
    rate_per_1000_days: float,
    repair_hours: float,
    wait_target_hours: float,
    miss: float = DEFAULT_MISS,
) -> Derived:
    """The spare hosts that keep a restart from waiting longer than the target in all but
    `miss` of failures (see the module)."""
    # Each failure takes out the one host it happened on, whatever its accelerator count.
    mean = accelerators * rate_per_1000_days / PER_ACCELERATOR_DAYS * repair_hours / 24
    inputs = {
        "N": accelerators,
        "λ per 1,000 accelerator-days": rate_per_1000_days,
        "R repair hours": repair_hours,
        "wait target hours": wait_target_hours,
        "miss": miss,
        "m = N·λ·R": round(mean, 3),
    }
    formula = "fewest s with P(Poisson(N·λ·R) > s) ≤ miss"
    if wait_target_hours >= repair_hours:
        return Derived(0, "hosts", formula, inputs, "the repair itself is within the wait target")
    return Derived(spares_needed(mean, miss), "hosts", formula, inputs)
