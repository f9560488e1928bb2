"""How auto-triage weighs evidence: per culprit, in families. Pure functions over plain
data (no ORM).

An interruption's evidence names a place or none: a DCGM event names a device (or its host),
a straggler or a hang's first-silent ranks a host, the job's own message nothing (it is the
job's view: the interruption's hosts, all of them). Evidence is combined bottom-up, per
family of causes (the GPU's own faults; the host's; the network's; software; the job's data
and config; symptoms), so that one family's signals about one device corroborate instead of
competing: an XID 79 and an XID 92 on the same GPU both say "this GPU is failing".

- **Device**: the noisy-OR (1 - prod(1 - w)) of the family's weights on that device.
- **Host**: the noisy-OR of the family's host-level weights and its *best* device (two
  devices of one host are two suspects, not two votes).
- **Candidate**: one per family and host (one per family with no place at all for the job's
  words): the noisy-OR of the host's figure and the job's words of that family. On a host
  other than the interruption's, the place's figure is first held at ELSEWHERE_CAP: noise on
  the other hosts of a 1,000-host job is one bounded vote, never N independent ones.

The winner is the best candidate, in three tiers: first those whose own-host evidence alone
explains (EXPLAINS or more on one of the interruption's hosts: what other hosts say can then
never move its category or culprit), then any cause that explains, then the rest (a symptom,
an NCCL watchdog timeout, wins only when no cause explains). Its category is the family's
heaviest category along the winner's place. Its confidence is its score discounted by the best
candidate of another family (a different kind of cause that also fits), so evidence that agrees
with the winner (its family, its place or no place) never lowers it: scores are noisy-ORs,
monotone in every weight, and a rival of another family is untouched by it.

Culprits come only from evidence that explains the winner: the winner's host and device
(when its evidence there is of the winning category, or of its family and explains alone),
then other own hosts with evidence of the winning category of EXPLAINS or more (a slow rank
on another host does not explain an XID 79: it weighs nothing). A winner with no place falls
back to the interruption's own hosts (hardware) or, for a stall, to the hosts that stopped
reporting first and then the stragglers'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from diagnosis.evidence import noisy_or as evidence_noisy_or
from logbook.taxonomy import FAMILY_SOFTWARE

# A cause explains an interruption from this score on; below it a symptom may win.
EXPLAINS = 0.3
# The most a host other than the interruption's can say about one family.
ELSEWHERE_CAP = 0.75
SYMPTOM_FAMILY = "symptom"


@dataclass(frozen=True)
class Category:
    """What the weighing needs of a taxonomy row (logbook.models.RootCause)."""

    slug: str
    name: str
    family: str
    is_hardware: bool

    @property
    def is_symptom(self) -> bool:
        return self.family == SYMPTOM_FAMILY


@dataclass(frozen=True)
class Signal:
    """One piece of evidence pointing at a category with a weight, at a place or none.
    `own` says the place is one of the interruption's hosts (always true with no place)."""

    category: str
    weight: float
    host: str = ""
    device: str = ""
    own: bool = True
    key: int = 0  # the caller's index of the evidence item
    # The driver's own record of a device fault (an XID line, a DCGM event), not the job's
    # words about it.
    device_record: bool = False
    # A config change at the attempt's start (logbook.triage_config), not anything the job or
    # a device said.
    setting: bool = False


@dataclass(frozen=True)
class Candidate:
    family: str
    host: str  # "" for the job's words alone
    device: str  # the host's best device of the family ("" when none)
    own: bool
    located: float  # the place's figure (capped elsewhere), before the job's words
    score: float
    signals: tuple[Signal, ...] = ()
    hardware: bool = False  # one of its signals names a hardware category

    def tier(self) -> int:
        if self.family == SYMPTOM_FAMILY:
            return 0
        if self.host and self.own and self.located >= EXPLAINS:
            return 2
        return 1 if self.score >= EXPLAINS else 0


@dataclass(frozen=True)
class Verdict:
    category: str
    confidence: float
    winner: Candidate | None
    rival: float
    hosts: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    # The signals that support the winning category, heaviest first.
    supporting: list[Signal] = field(default_factory=list)


def noisy_or(weights: Iterable[float]) -> float:
    """diagnosis.evidence's noisy-OR, over weights held in [0, 1]."""
    return evidence_noisy_or([min(max(weight, 0.0), 1.0) for weight in weights])


def _family(signal: Signal, categories: Mapping[str, Category]) -> str:
    category = categories.get(signal.category)
    return category.family if category else "other"


def candidates(signals: Sequence[Signal], categories: Mapping[str, Category]) -> list[Candidate]:
    """Every (family, place) candidate the signals make, as the module docstring says."""
    words: dict[str, list[Signal]] = {}
    placed: dict[tuple[str, str], list[Signal]] = {}
    own_of: dict[str, bool] = {}
    for signal in signals:
        if signal.weight <= 0 or not signal.category:
            continue
        family = _family(signal, categories)
        if signal.host:
            placed.setdefault((family, signal.host), []).append(signal)
            own_of[signal.host] = own_of.get(signal.host, False) or signal.own
        else:
            words.setdefault(family, []).append(signal)
    result: list[Candidate] = []
    for family, said in words.items():
        score = noisy_or(s.weight for s in said)
        result.append(
            Candidate(family, "", "", True, 0.0, score, tuple(said), _hardware(said, categories))
        )
    for (family, host), there in placed.items():
        on_host = [s for s in there if not s.device]
        by_device: dict[str, list[Signal]] = {}
        for s in there:
            if s.device:
                by_device.setdefault(s.device, []).append(s)
        device, best = "", 0.0
        for name in sorted(by_device):
            figure = noisy_or(s.weight for s in by_device[name])
            if figure > best:
                device, best = name, figure
        own = own_of[host]
        located = noisy_or([*(s.weight for s in on_host), best])
        if not own:
            located = min(located, ELSEWHERE_CAP)
        said = words.get(family, [])
        score = noisy_or([located, *(s.weight for s in said)])
        kept = tuple(on_host) + tuple(by_device.get(device, ())) + tuple(said)
        hardware = _hardware(kept, categories)
        result.append(Candidate(family, host, device, own, located, score, kept, hardware))
    return result


def _hardware(signals: Iterable[Signal], categories: Mapping[str, Category]) -> bool:
    return any(
        (category := categories.get(s.category)) is not None and category.is_hardware
        for s in signals
    )


def _rank_key(candidate: Candidate) -> tuple:  # type: ignore[type-arg]
    # Rounded so that float noise never decides; then placed before unplaced (a named GPU is
    # the more useful answer), hardware first (replace the part, then read the code), names.
    return (
        -candidate.tier(),
        -round(candidate.score, 9),
        not candidate.host,
        not candidate.hardware,
        candidate.family,
        candidate.host,
    )


def category_of(winner: Candidate, categories: Mapping[str, Category]) -> str:
    by_category: dict[str, list[float]] = {}
    for s in winner.signals:
        by_category.setdefault(s.category, []).append(s.weight)

    def key(slug: str) -> tuple:  # type: ignore[type-arg]
        category = categories.get(slug)
        hardware = bool(category and category.is_hardware)
        return (-round(noisy_or(by_category[slug]), 9), not hardware, slug)

    return sorted(by_category, key=key)[0]


def weigh(
    signals: Sequence[Signal],
    categories: Mapping[str, Category],
    *,
    own_hosts: Sequence[str] = (),
    hints: Sequence[tuple[str, str, str]] = (),
) -> Verdict | None:
    """The winning category, its confidence and culprits; None when no signal points
    anywhere. `hints` are (kind, host, device) of "first_silent" and "straggler" records:
    they name a stall's culprit and explain nothing themselves."""
    pool = candidates(signals, categories)
    if not pool:
        return None
    ranked = sorted(pool, key=_rank_key)
    winner = ranked[0]
    category = category_of(winner, categories)
    tier = winner.tier()
    recorded = _records_hardware_fault(winner, categories)
    rivals = [
        c.score
        for c in pool
        if c.family != winner.family
        and c.family != SYMPTOM_FAMILY
        # An own-host signal that explains is not discounted by other hosts' noise.
        and not (tier == 2 and c.host and not c.own)
        # Beside a device's own record of a hardware fault, the job's software words (an
        # illegal memory access, a Python traceback around it) are the job's view of that
        # fault, not another cause: "hardware beats its symptoms" (tests/data/README.md).
        and not (recorded and not c.host and c.family == FAMILY_SOFTWARE)
        # Nor is a changed setting alone: no learning rate makes a GPU fall off the bus.
        and not (recorded and all(s.setting for s in c.signals))
    ]
    rival = max(rivals, default=0.0)
    if winner.family == SYMPTOM_FAMILY:
        rival = 0.0  # the causes that could have explained it all stayed below EXPLAINS
    confidence = round(min(max(winner.score * (1.0 - rival / 2.0), 0.0), 1.0), 2)
    hosts, devices = _culprits(winner, category, pool, categories, own_hosts, hints)
    supporting = sorted(
        (s for s in signals if s.category == category and _supports(s, winner)),
        key=lambda s: -s.weight,
    )
    return Verdict(category, confidence, winner, rival, hosts, devices, supporting)


def _records_hardware_fault(winner: Candidate, categories: Mapping[str, Category]) -> bool:
    """Whether the winner holds a device's own record (XID, DCGM) of a hardware category that
    explains the interruption alone."""
    return any(
        s.device_record
        and s.weight >= EXPLAINS
        and (category := categories.get(s.category)) is not None
        and category.is_hardware
        for s in winner.signals
    )


def best_per_family(
    signals: Sequence[Signal], categories: Mapping[str, Category]
) -> list[Candidate]:
    """Each family's best candidate, best first (the ranked alternatives a page may show)."""
    best: dict[str, Candidate] = {}
    for candidate in sorted(candidates(signals, categories), key=_rank_key):
        best.setdefault(candidate.family, candidate)
    return list(best.values())


def _supports(signal: Signal, winner: Candidate) -> bool:
    """Whether a signal of the winning category is part of the winner's case: the job's
    words, or evidence at the winner's place; else evidence elsewhere that explains alone."""
    if not signal.host:
        return True
    if signal.host == winner.host:
        return not signal.device or not winner.device or signal.device == winner.device
    return signal.weight >= EXPLAINS and signal.own == winner.own


def _culprits(
    winner: Candidate,
    category: str,
    pool: Sequence[Candidate],
    categories: Mapping[str, Category],
    own_hosts: Sequence[str],
    hints: Sequence[tuple[str, str, str]],
) -> tuple[list[str], list[str]]:
    info = categories.get(category)
    if info is None or info.is_symptom:
        # A stall: the ranks that stopped reporting first, else the slow ones (MegaScale).
        for kind in ("first_silent", "straggler"):
            named = [(host, device) for k, host, device in hints if k == kind and host]
            if named:
                return _unique(h for h, _ in named), _unique(d for _, d in named)
        return [], []
    if not info.is_hardware:
        return [], []  # software causes blame no hardware
    hosts: list[str] = []
    devices: list[str] = []
    # The winner's place, when its evidence there is of the winning category, or of its
    # family and explains alone (a GPU's thermal event beside a message's XID 79: one
    # family's signals about one device corroborate, and name that device).
    placed = [s for s in winner.signals if s.host]
    if winner.host and (any(s.category == category for s in placed) or winner.located >= EXPLAINS):
        hosts.append(winner.host)
        if winner.device and any(s.device == winner.device for s in placed):
            devices.append(winner.device)
    # Other own hosts whose evidence of the winning category explains alone (two GPUs of
    # one job failing together).
    # Elsewhere, only the winner's own place: other hosts' noise names no more culprits.
    for candidate in sorted(pool, key=lambda c: (-c.score, c.host)):
        if candidate is winner or not candidate.host or not candidate.own or not winner.own:
            continue
        strong = [
            s for s in candidate.signals
            if s.host and s.category == category and s.weight >= EXPLAINS
        ]  # fmt: skip
        if strong:
            hosts.append(candidate.host)
            devices.extend(s.device for s in strong if s.device)
    if not hosts:
        hosts = list(own_hosts)
    return _unique(hosts), _unique(devices)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))
