"""Whether a running run is still alive: the threshold the run page, the stalled-run webhook and
the hang check share, and the run page's words for it. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# A running run silent for this long has stopped reporting.
RUN_STALL_AFTER = timedelta(minutes=15)


@dataclass(frozen=True)
class Liveness:
    state: str  # "running", "hung", "silent", "no-progress", or the latest attempt's status
    label: str  # what the page shows: "running", "silent since", "no progress since", ...
    since: datetime | None  # when the silence or the stall began


def liveness(
    *,
    status: str | None,
    status_label: str,
    last_seen_at: datetime | None,
    step_reached_at: datetime | None,
    now: datetime,
    stall_after: timedelta,
    hung_since: datetime | None = None,
) -> Liveness:
    """A running attempt whose last data is older than stall_after is "silent since" that
    data; one whose data still arrives but whose latest step was first reached more than
    stall_after before the latest data is at "no progress since" that step. Any other status
    is shown as it is.

    A running attempt with an open hang (hung_since: when its step stopped, as hang
    detection found it) is "Hung since" then, whatever else it looks like: on-call was paged
    for it, and a green "running" beside the page would contradict it.

    status: the latest attempt's status (None: no attempt yet); status_label its display.
    last_seen_at: the run's latest data; step_reached_at: when its latest step was first seen.
    """
    if status != "running":
        return Liveness(status or "none", status_label, None)
    if hung_since is not None:
        return Liveness("hung", "Hung since", hung_since)
    if last_seen_at is not None and now - last_seen_at > stall_after:
        return Liveness("silent", "silent since", last_seen_at)
    if (
        last_seen_at is not None
        and step_reached_at is not None
        and last_seen_at - step_reached_at > stall_after
    ):
        return Liveness("no-progress", "no progress since", step_reached_at)
    return Liveness("running", status_label, None)
