"""The at-risk list: GPUs (and their hosts) with precursor signals of failure
(telemetry.selectors.risk), each with the incidents that followed the same signals elsewhere
in its project's fleet and the action to take."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet

from logbook.models import Interruption
from telemetry import run_cache
from telemetry.models import Project
from telemetry.push_marks import push_marks
from telemetry.selectors.risk import DeviceRisk, at_risk_devices, risk_at

# Which past incidents are asked "did the same signals come first": the project's newest
# hardware incidents naming a GPU, in this many days, at most this many.
FOLLOWED_DAYS = 30
FOLLOWED_INCIDENTS = 50
# How long a list older than the newest push may still be served: HOLD_FACTOR times its cost
# (at most 1/HOLD_FACTOR of the time spent recomputing it), never more than HOLD_MAX_S.
HOLD_FACTOR = 20.0
HOLD_MAX_S = 30.0


@dataclass(frozen=True)
class Followed:
    """A past incident on another GPU that the same signal came before."""

    interruption_id: int
    run_id: int
    number: int
    occurred_at: datetime
    device: str
    kinds: tuple[str, ...]


@dataclass
class AtRisk:
    project: str
    entry: DeviceRisk
    followed: list[Followed] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        risk = self.entry.risk
        return {
            "project": self.project,
            "host": self.entry.host or None,
            "device": self.entry.device,
            "score": risk.score,
            "signals": [
                {"kind": one.kind, "detail": one.detail, "since": one.since} for one in risk.signals
            ],
            "action": risk.action,
            "followed": [
                {
                    "incident": one.interruption_id,
                    "run": one.run_id,
                    "number": one.number,
                    "occurred_at": one.occurred_at,
                    "device": one.device,
                    "signals": list(one.kinds),
                }
                for one in self.followed
            ],
        }


def at_risk_cached(*, projects: QuerySet[Project], now: datetime) -> list[dict[str, object]]:
    """at_risk_for_projects as the API's rows, cached under what moves them: the fleet's
    version (incidents), the minute (the lookback slides) and the projects' last GPU pushes
    (telemetry.push_marks: a quiet push bumps no version). A list computed before the newest
    push is served again only while it is younger than HOLD_FACTOR times what it cost to
    compute (at most HOLD_MAX_S): a fleet that pushes every few milliseconds would otherwise
    have every view recompute it (~100 ms at 100,000 GPUs), while a small fleet's list, a few
    milliseconds of work, shows a push at once."""
    slugs = dict(projects.values_list("pk", "slug"))
    marks = push_marks(project_ids=sorted(slugs))  # before the data the list reads
    versions = sorted(projects.values_list("pk", "fleet_version"))
    digest = hashlib.sha256(repr(versions).encode()).hexdigest()[:32]
    key = f"fleet-at-risk:v3:{digest}:{now:%Y%m%d%H%M}"

    def compute() -> dict[str, Any]:
        began = time.perf_counter()
        rows = [one.as_dict() for one in at_risk_for_projects(projects=projects, now=now)]
        cost = time.perf_counter() - began
        return {"rows": rows, "marks": marks, "computed": time.time(), "cost": cost}

    def fresh(found: dict[str, Any]) -> bool:
        hold = min(HOLD_MAX_S, HOLD_FACTOR * found["cost"])
        return found["marks"] == marks or time.time() - found["computed"] < hold

    rows: list[dict[str, object]] = run_cache.cached(key, compute, fresh=fresh)["rows"]
    return rows


def at_risk_for_projects(*, projects: QuerySet[Project], now: datetime) -> list[AtRisk]:
    slugs = dict(projects.values_list("pk", "slug"))
    found = at_risk_devices(project_ids=sorted(slugs), now=now)
    if not found:
        return []
    followed = _followed_by_kind(project_ids=sorted({one.project_id for one in found}), now=now)
    listed = []
    for entry in found:
        kinds = {one.kind for one in entry.risk.signals}
        before = [
            one
            for one in followed.get(entry.project_id, [])
            if one.device != entry.device and kinds & set(one.kinds)
        ]
        listed.append(AtRisk(slugs[entry.project_id], entry, before))
    return listed


def _followed_by_kind(*, project_ids: list[int], now: datetime) -> dict[int, list[Followed]]:
    """The projects' recent hardware incidents naming a GPU, each with the detector's signals
    on that GPU just before it (those it had any)."""
    incidents = list(
        Interruption.objects.filter(
            run__project_id__in=project_ids,
            root_cause__is_hardware=True,
            occurred_at__gte=now - timedelta(days=FOLLOWED_DAYS),
            occurred_at__lte=now,
            devices__isnull=False,
        )
        .order_by("-occurred_at")
        .values_list("pk", "run_id", "run__project_id", "number", "occurred_at", "devices",
                     "devices__uuid")[:FOLLOWED_INCIDENTS]
    )  # fmt: skip
    by_project: dict[int, list[Followed]] = {}
    for pk, run_id, project_id, number, at, device_id, uuid in incidents:
        assessed = risk_at(device_ids=[device_id], at=at)[device_id]
        kinds = tuple(sorted({one.kind for one in assessed.signals}))
        if kinds:
            by_project.setdefault(project_id, []).append(
                Followed(pk, run_id, number, at, uuid, kinds)
            )
    return by_project
