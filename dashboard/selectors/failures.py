"""What the failure breakdown page shows besides the logbook's breakdown: the GPU-hours lost to
interruptions (the logbook's) beside those lost to slowdowns (diagnosis's), over the
page's scope: the runs, time window, site and cluster its filters select."""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.selectors import slowdowns as slowdown_selectors
from logbook.failure_maths import Derived
from logbook.selectors import failures as failure_selectors
from logbook.selectors.failures import FailureFilters
from telemetry.selectors import User


@dataclass(frozen=True)
class Lost:
    interruptions: Derived
    slowdowns: Derived


def slowdown_derived(loss: slowdown_selectors.SlowdownLoss) -> Derived:
    """The slowdowns' loss as the page's other derived numbers: GPU-hours with formula and
    inputs (the hours below baseline and the GPU-hours of each cause)."""
    by_cause = {f"{kind}_gpu_h": hours for kind, hours in sorted(loss.gpu_hours_by_cause.items())}
    # Unknown only when every slowdown lacks a GPU count; none at all is 0.
    known = loss.without_gpu_count < loss.slowdowns or not loss.slowdowns
    return Derived(
        loss.gpu_hours if known else None,
        "GPU-hours",
        "Σ over slowdowns not dismissed of their GPU-hours lost · the share inside the window",
        {"slowdowns": loss.slowdowns, "below_baseline_h": loss.seconds / 3600.0, **by_cause},
        f"{loss.without_gpu_count} slowdown(s) of runs without a GPU count left out."
        if loss.without_gpu_count
        else "",
    )


def lost_for_user(*, user: User, filters: FailureFilters) -> Lost:
    """Both losses over the same runs and window as the breakdown (two queries, and one for a
    run filter)."""
    runs = failure_selectors.runs_in_scope(user=user, filters=filters)
    slowed = slowdown_selectors.lost_in_scope(runs=runs, start=filters.start, end=filters.end)
    return Lost(
        interruptions=failure_selectors.interruption_loss(runs=runs, filters=filters),
        slowdowns=slowdown_derived(slowed),
    )
