"""A run across sites: where an attempt's hosts are, by site, and each site's share of the
step's time from its ranks' timings (their heat-map buckets at RANK_BUCKET_S, the newest
BUCKETS_READ of them), so a site-wide slowdown or a slow inter-site link shows as one
site's ranks waiting (`collective_wait`) or computing longer than the other's."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models.functions import Coalesce

from telemetry.models import Attempt, Host, RankBucket, RankPlacement

BUCKETS_READ = 36  # six hours of 10-minute buckets
STEP_SECTION = "step"
# A site whose ranks compute this much longer than another's is named a site-wide slowdown;
# every site waiting this share of the step, a slow link between them.
SLOW_SITE = 1.10
WAIT_SHARE = 0.30
UNKNOWN = ""


@dataclass
class SiteShare:
    site: str
    hosts: list[str] = field(default_factory=list)
    ranks: int = 0
    # Mean seconds per step of each section over the site's ranks.
    sections: dict[str, float] = field(default_factory=dict)

    @property
    def share(self) -> dict[str, float]:
        """Each section's share of the site's step time (its `step` section's mean)."""
        step = self.sections.get(STEP_SECTION)
        if not step:
            return {}
        return {name: value / step for name, value in self.sections.items() if name != STEP_SECTION}


@dataclass(frozen=True)
class AttemptSites:
    attempt: int
    sites: list[SiteShare]
    note: str


def attempt_sites(*, attempt: Attempt) -> AttemptSites:
    """The attempt's hosts and ranks by site, with each site's section means. Four queries."""
    place = dict(
        Host.objects.filter(project_id=attempt.run.project_id)
        .filter(attempts=attempt)
        .annotate(place=Coalesce("site__name", "cluster__site__name"))
        .values_list("name", "place")
    )
    rank_hosts = dict(RankPlacement.objects.filter(attempt=attempt).values_list("rank", "host"))
    missing = sorted({h for h in rank_hosts.values() if h and h not in place})
    if missing:
        place |= dict(
            Host.objects.filter(project_id=attempt.run.project_id, name__in=missing)
            .annotate(place=Coalesce("site__name", "cluster__site__name"))
            .values_list("name", "place")
        )
    sites: dict[str, SiteShare] = {}
    for host, site in sorted(place.items()):
        sites.setdefault(site or UNKNOWN, SiteShare(site or UNKNOWN)).hosts.append(host)
    rank_site = {rank: place.get(host) or UNKNOWN for rank, host in rank_hosts.items()}
    for site in rank_site.values():
        sites.setdefault(site, SiteShare(site))
    for rank_count_site in rank_site.values():
        sites[rank_count_site].ranks += 1
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    buckets = (
        RankBucket.objects.filter(attempt=attempt, bucket_s=settings.RANK_BUCKET_S)
        .order_by("-bucket_start")
        .values_list("section", "ranks", "means_s", "counts")
    )
    read: dict[str, int] = defaultdict(int)
    for section, ranks, means, counts in buckets.iterator():
        if read[section] >= BUCKETS_READ:
            continue
        read[section] += 1
        for rank, mean, count in zip(ranks, means, counts, strict=True):
            if rank in rank_site and count:
                total = totals[(rank_site[rank], section)]
                total[0] += mean * count
                total[1] += count
    for (site, section), (weighted, count) in totals.items():
        sites[site].sections[section] = weighted / count
    ordered = sorted(sites.values(), key=lambda one: (one.site == UNKNOWN, one.site))
    return AttemptSites(attempt.number, ordered, _note(ordered))


def _note(sites: list[SiteShare]) -> str:
    """Names what the sites' shares say. A synchronous job's step takes as long everywhere
    (every rank waits for the slowest), so a slow site shows as its ranks computing longer
    (step minus collective_wait) while the others wait for it; a slow link between sites as
    every site waiting a large share of the step."""
    timed = [one for one in sites if one.site and one.sections.get(STEP_SECTION)]
    if len(timed) < 2:
        return ""
    wait = "collective_wait"

    def compute(one: SiteShare) -> float:
        return one.sections[STEP_SECTION] - one.sections.get(wait, 0.0)

    fastest = min(timed, key=compute)
    slowest = max(timed, key=compute)
    if compute(fastest) > 0 and compute(slowest) >= SLOW_SITE * compute(fastest):
        ratio = compute(slowest) / compute(fastest) - 1
        return (
            f"Site {slowest.site}'s ranks compute {ratio:.0%} longer a step than site "
            f"{fastest.site}'s, whose ranks wait for them: a site-wide slowdown at "
            f"{slowest.site} (power, cooling, throttling)."
        )
    shares = [one.share.get(wait) for one in timed]
    if all(share is not None and share >= WAIT_SHARE for share in shares):
        least = min(share for share in shares if share is not None)
        return (
            f"Every site waits in collectives for at least {least:.0%} of the step: a slow "
            "inter-site link (or a fabric all sites share)."
        )
    return ""
