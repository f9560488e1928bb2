"""Auto-triage rules: what a failure message and the evidence around an interruption say
about its root cause. Pure functions over plain data (no ORM, no network): the selectors
gather the evidence, `suggest` weighs it, the worker stores the result.

How it weighs (logbook.triage_combine says it in full):
- Each message rule that matches (RE2 patterns, logbook.safe_patterns: linear in the message,
  and a whole suggestion has a budget, `Reading`) is a signal for its category with no place:
  the job's words. XID lines are read by number (`XID_RULES`), from the message and from DCGM
  events, which name a host and device; stragglers and a hang's first-silent ranks name a
  stall's culprit and weigh nothing.
- Signals are combined per culprit (device, then host, then the job) and per family of
  causes, so that one family's signals about one GPU corroborate; another host's evidence
  counts EVIDENCE_ELSEWHERE of its weight and at most ELSEWHERE_CAP all told.
- "Evidence beats words": a symptom (an NCCL watchdog timeout, a suspected hang) says *that*
  a collective stalled, not why; it wins only when no cause reaches EXPLAINS, and the note
  says when the message alone read otherwise.
- Confidence is the winner's score discounted by the best cause of another family: agreeing
  evidence never lowers it, and other hosts never move an own-host signal's culprit.

The rules are data (RuleBook): the built-in catalogue (logbook.triage_catalogue) seeded as
rows, which a project's admins disable, re-weight or extend.
Sources for the rules are named per rule (`source`); the runbooks cite theirs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from diagnosis.evidence import Cause, Evidence
from logbook import safe_patterns, triage_config
from logbook import triage_combine as combine
from logbook.safe_patterns import PatternError
from logbook.taxonomy import FAMILY_GPU, FAMILY_OF, FAMILY_SYMPTOM, ROOT_CAUSE_SEEDS
from logbook.triage_catalogue import (
    BUILTIN_RULES,
    DCGM_KIND_RULES,
    GPU_UUID,
    SDC_VERDICT_WEIGHTS,
    XID_CATALOG,
    XID_LINE,
    XID_RULES,
    MessageRule,
    XidRule,
)
from logbook.triage_combine import Category

# A symptom category wins only when no cause reaches this score (triage_combine).
EXPLAINS = combine.EXPLAINS
# Evidence on the attempt's other hosts counts less than on the interruption's own.
EVIDENCE_ELSEWHERE = 0.8
# Longest message read: admins' patterns run on it, and a pasted log can be megabytes.
MESSAGE_MAX_CHARS = 64_000
# The most a learned vote (the project's classifier, the public messages' reading by meaning)
# may raise a suggestion's confidence to: it reads resemblance, not the cause itself; a
# symptom (an NCCL watchdog timeout) says even less about what broke.
VOTE_CAP = 0.95
SYMPTOM_VOTE_CAP = 0.9
# Evidence whose rule is the driver's own record of a device (an XID line of the message, a
# DCGM event), not the job's words: triage_combine.Signal.device_record.
DEVICE_RECORD_RULES = ("xid:", "dcgm:")
# A suggestion reads at most this many message rules (built-in and a project's own) and
# starts none after its time budget (Reading).
MAX_RULES_READ = 400
SUGGESTION_BUDGET_S = 2.0
# How much of a matched line an evidence item quotes.
QUOTE_MAX_CHARS = 160
QUOTE_CONTEXT_CHARS = 40
CATEGORY_NAMES = {seed.slug: seed.name for seed in ROOT_CAUSE_SEEDS}


def rules_merge(extra: Iterable[MessageRule]) -> tuple[MessageRule, ...]:
    """The built-ins followed by the admins' patterns (both are read; neither replaces the
    other: an admin narrows a category by adding a heavier rule for it)."""
    return BUILTIN_RULES + tuple(extra)


def pattern_problem(pattern: str) -> str:
    """Why an admin's pattern cannot be used ("" when it can): RE2 must compile it, so that
    it runs in time linear in the message (logbook.safe_patterns)."""
    return safe_patterns.pattern_problem(pattern)


# --- Inputs: the interruption and the evidence the selectors found ----------------------------


@dataclass(frozen=True)
class IncidentFacts:
    """What the rules read about the interruption itself."""

    message: str
    occurred_at: datetime
    hosts: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    url: str = ""


@dataclass(frozen=True)
class EvidenceFact:
    """One stored record near the interruption. `kind` is one of:
    "dcgm" (a DeviceEvent: `event_kind`, `xid`), "straggler" (a StragglerRecord),
    "first_silent" (a hang's ranks that stopped reporting first), "sdc" (an SdcReplay:
    `verdict`), "group" (an IncidentGroup holding the interruption: `category` and
    `component`, the part its hosts share), "config" (the config change its attempt started
    with: `category`, and `after_s`, how far into the attempt it failed). `own_host` says
    whether it is on one of the interruption's hosts (else on another host of its attempt)."""

    kind: str
    at: datetime | None
    text: str
    url: str = ""
    host: str = ""
    device: str = ""
    event_kind: str = ""
    xid: int | None = None
    verdict: str = ""
    own_host: bool = True
    category: str = ""
    component: str = ""
    after_s: float | None = None


# Several hosts of one rack (pod, cluster) failing within minutes point at the part they
# share (logbook.incident_groups): strongly, as one cause explains them all.
GROUP_WEIGHT = 0.7


# --- Output ------------------------------------------------------------------------------------


EVIDENCE_KINDS = (
    "message",
    "dcgm",
    "straggler",
    "first_silent",
    "sdc",
    "group",
    "config",
    "classifier",
    "semantic",
)


@dataclass(frozen=True)
class EvidenceItem:
    # One of EVIDENCE_KINDS: "message", "dcgm", "straggler", "first_silent", "sdc", "group",
    # "config", "classifier" (the project's classifier), "semantic" (the public messages'
    # reading, triage_semantic)
    kind: str
    at: datetime | None
    text: str
    url: str
    category: str = ""
    weight: float = 0.0
    host: str = ""
    device: str = ""
    component: str = ""
    own: bool = True  # on one of the interruption's hosts (or no host: the job's words)
    # What made it: a rule's name ("nccl-watchdog", "admin:12"), "xid:79", "dcgm:thermal",
    # "classifier", "embedding"... (the accuracy page counts each rule's precision by it).
    rule: str = ""

    def as_json(self) -> dict[str, str | None]:
        return {
            "kind": self.kind,
            "at": self.at.isoformat() if self.at else None,
            "text": self.text,
            "url": safe_url(self.url),
            "category": self.category,
            "rule": self.rule,
        }


@dataclass(frozen=True)
class Suggestion:
    category: str
    component: str
    hosts: list[str]
    devices: list[str]
    confidence: float
    evidence: list[EvidenceItem]
    note: str = ""
    # What the message alone pointed at ("" when it matched nothing).
    message_category: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    reading: Reading | None = None
    # Each family's best explanation, best first, in diagnosis's shared evidence model.
    causes: list[Cause] = field(default_factory=list)


def safe_url(url: str) -> str:
    """A link the pages may print: this site's paths and web addresses only (an admin's
    pattern note becomes its evidence's link; `javascript:` must never reach an href)."""
    return url if url.startswith(("/", "https://", "http://")) and not url.startswith("//") else ""


def category_name(slug: str, names: Mapping[str, str] | None = None) -> str:
    return (names or {}).get(slug) or CATEGORY_NAMES.get(slug) or slug


def _quote(text: str, start: int, end: int) -> str:
    """The words around a match, within its line: the match and up to QUOTE_CONTEXT_CHARS
    either side, "…" where the line goes on (a long NCCL line would quote the same 300
    characters for every rule it matched)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    first = max(line_start, start - QUOTE_CONTEXT_CHARS)
    last = min(line_end, end + QUOTE_CONTEXT_CHARS, first + QUOTE_MAX_CHARS)
    quoted = text[first:last].strip()
    return ("…" if first > line_start else "") + quoted + ("…" if last < line_end else "")


def xids_in(text: str) -> list[tuple[int, int, int]]:
    """(code, start, end) of each XID line in the text."""
    return [
        (int(m.group(1)), m.start(), m.end()) for m in safe_patterns.all_matches(XID_LINE, text)
    ]


@dataclass
class Reading:
    """What reading one message cost, and where it stopped. RE2 makes each rule linear in
    the message; the budget bounds the whole suggestion (a project may hold many patterns):
    at most MAX_RULES_READ rules are read, and none is started after `budget_s` of wall
    time. Rules left unread are counted, and the suggestion's note says so."""

    budget_s: float = SUGGESTION_BUDGET_S
    max_rules: int = 0
    started: float = field(default_factory=time.monotonic)
    rules_read: int = 0
    rules_unread: int = 0
    chars_scanned: int = 0
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.max_rules = self.max_rules or MAX_RULES_READ

    def may_read(self) -> bool:
        spent = time.monotonic() - self.started
        return self.rules_read < self.max_rules and spent < self.budget_s

    @property
    def complete(self) -> bool:
        return self.rules_unread == 0


def message_evidence(
    facts: IncidentFacts,
    rules: Sequence[MessageRule] = BUILTIN_RULES,
    reading: Reading | None = None,
    *,
    xid_rules: Mapping[int, XidRule] | None = None,
) -> list[EvidenceItem]:
    """An evidence item per rule that matches the message (its first match), and per
    distinct XID code in it. Rules past the budget are not read (counted in `reading`); a
    rule whose pattern RE2 refuses (saved before patterns were checked) is skipped."""
    reading = reading if reading is not None else Reading()
    text = facts.message[:MESSAGE_MAX_CHARS]
    items: list[EvidenceItem] = []
    seen_xids: set[int] = set()
    xid_rules = XID_RULES if xid_rules is None else xid_rules
    for code, start, end in xids_in(text):
        rule = xid_rules.get(code)
        if rule is None or rule.weight <= 0 or code in seen_xids:
            continue
        seen_xids.add(code)
        items.append(
            EvidenceItem(
                "message",
                facts.occurred_at,
                f"{rule.component}: “{_quote(text, start, end)}”",
                XID_CATALOG,
                rule.category,
                rule.weight,
                component=rule.component,
                rule=f"xid:{code}",
            )
        )
    for index, rule in enumerate(rules):
        if not reading.may_read():
            reading.rules_unread = len(rules) - index
            break
        reading.rules_read += 1
        if rule.weight <= 0:
            continue
        try:
            match = safe_patterns.first_match(rule.pattern, text)
        except PatternError:
            reading.refused.append(rule.name)
            continue
        reading.chars_scanned += len(text)
        if match is None:
            continue
        items.append(
            EvidenceItem(
                "message",
                facts.occurred_at,
                f"{rule.component}: “{_quote(text, match.start(), match.end())}”",
                facts.url or rule.source,
                rule.category,
                rule.weight,
                component=rule.component,
                rule=rule.name,
            )
        )
    return items


@dataclass(frozen=True)
class RuleBook:
    """Everything the weighing reads besides the evidence: the message rules, the XID and
    DCGM-kind rules and the taxonomy's categories (family, hardware, name). The built-in
    book is `builtin_rules()`; the worker reads a project's from the database
    (logbook.selectors.triage.rule_book: the seeded rows with the project's changes)."""

    message_rules: tuple[MessageRule, ...]
    xid_rules: Mapping[int, XidRule]
    dcgm_rules: Mapping[str, XidRule]
    categories: Mapping[str, Category]

    def names(self) -> dict[str, str]:
        return {slug: category.name for slug, category in self.categories.items()}


def builtin_categories() -> dict[str, Category]:
    return {
        seed.slug: Category(seed.slug, seed.name, FAMILY_OF.get(seed.slug, ""), seed.is_hardware)
        for seed in ROOT_CAUSE_SEEDS
    }


def builtin_rules(extra: Iterable[MessageRule] = ()) -> RuleBook:
    return RuleBook(rules_merge(extra), XID_RULES, DCGM_KIND_RULES, builtin_categories())


def fact_evidence(fact: EvidenceFact, book: RuleBook | None = None) -> EvidenceItem:
    """The evidence item a stored record makes, with the category it points at (if any).
    Stragglers and first-silent ranks point at none: they name a stall's culprit (a slow
    rank explains no crash), and weigh nothing."""
    book = book or builtin_rules()
    rule: XidRule | None = None
    if fact.kind == "dcgm":
        rule = book.xid_rules.get(fact.xid or -1) if fact.event_kind == "xid" else None
        rule = rule or book.dcgm_rules.get(fact.event_kind)
        if fact.event_kind == "xid" and rule is None and (fact.xid or -1) not in book.xid_rules:
            rule = XidRule("faulty-gpu", f"XID {fact.xid}", 0.5)  # a code the table lacks
    elif fact.kind == "sdc":
        weight = SDC_VERDICT_WEIGHTS.get(fact.verdict, 0.0)
        rule = XidRule("silent-data-corruption", "Silent data corruption", weight)
    elif fact.kind == "group":
        weight = GROUP_WEIGHT if fact.category else 0.0
        rule = XidRule(fact.category, fact.component, weight)
    elif fact.kind == "config":
        weight = triage_config.config_weight(fact.after_s) if fact.category else 0.0
        rule = XidRule(fact.category, category_name(fact.category), weight)
    category, weight = (rule.category, rule.weight) if rule else ("", 0.0)
    if not fact.own_host:
        weight *= EVIDENCE_ELSEWHERE
    name = fact.kind
    if fact.kind == "dcgm":
        name = f"dcgm:xid:{fact.xid}" if fact.event_kind == "xid" else f"dcgm:{fact.event_kind}"
    return EvidenceItem(
        fact.kind,
        fact.at,
        fact.text,
        fact.url,
        category,
        weight,
        fact.host,
        fact.device,
        component=rule.component if rule else "",
        own=fact.own_host,
        rule=name,
    )


def scores_of(items: Iterable[EvidenceItem], book: RuleBook | None = None) -> dict[str, float]:
    """Per category, the best figure one candidate place gives it (for the pages' debugging
    and the tests: the weighing itself is per family, triage_combine)."""
    book = book or builtin_rules()
    signals = _signals(list(items))
    best: dict[str, float] = {}
    for candidate in combine.candidates(signals, book.categories):
        by_category: dict[str, list[float]] = {}
        for signal in candidate.signals:
            by_category.setdefault(signal.category, []).append(signal.weight)
        for category, weights in by_category.items():
            figure = combine.noisy_or(weights)
            if candidate.host and not candidate.own:
                figure = min(figure, combine.ELSEWHERE_CAP)
            best[category] = max(best.get(category, 0.0), figure)
    return best


def _signals(items: Sequence[EvidenceItem]) -> list[combine.Signal]:
    return [
        combine.Signal(
            item.category,
            item.weight,
            item.host,
            item.device,
            item.own,
            index,
            device_record=item.rule.startswith(DEVICE_RECORD_RULES),
            setting=item.kind == "config",
        )
        for index, item in enumerate(items)
        if item.category and item.weight > 0
    ]


def suggest(
    facts: IncidentFacts,
    evidence: Sequence[EvidenceFact] = (),
    *,
    extra_rules: Sequence[MessageRule] = (),
    names: Mapping[str, str] | None = None,
    rules: RuleBook | None = None,
    reading: Reading | None = None,
    votes: Sequence[EvidenceItem] = (),
) -> Suggestion | None:
    """The suggested root cause of one interruption, or None when neither its message nor
    any evidence points anywhere. `rules` is the project's rule book (the built-ins when
    None; `extra_rules` are added to it); `names` maps slugs to the taxonomy's names.
    `votes` are learned opinions of the message (kind "classifier": the project's classifier,
    logbook.triage_classifier), weighed like the job's words."""
    book = rules or builtin_rules()
    if extra_rules:
        book = RuleBook(
            book.message_rules + tuple(extra_rules),
            book.xid_rules,
            book.dcgm_rules,
            book.categories,
        )
    names = {**book.names(), **(names or {})}
    reading = reading if reading is not None else Reading()
    said = message_evidence(facts, book.message_rules, reading, xid_rules=book.xid_rules)
    seen = [fact_evidence(fact, book) for fact in evidence]
    items = said + list(votes) + seen
    hints = [
        (item.kind, item.host, item.device)
        for item in seen
        if item.kind in ("first_silent", "straggler") and item.host
    ]
    verdict = combine.weigh(_signals(items), book.categories, own_hosts=facts.hosts, hints=hints)
    grouped = next((item for item in seen if item.kind == "group"), None)
    if verdict is None:
        if not hints and grouped is None:
            return None
        # Only culprit hints: a stall nobody explained yet.
        verdict = combine.weigh(
            [combine.Signal(STALL_CATEGORY, STALL_WEIGHT)],
            {**book.categories, STALL_CATEGORY: _stall_category(book)},
            own_hosts=facts.hosts,
            hints=hints,
        )
        assert verdict is not None
        stalled = True
    else:
        stalled = False
    category = verdict.category
    message_verdict = combine.weigh(_signals(said), book.categories) if said else None
    message_category = message_verdict.category if message_verdict else ""
    keys = [] if stalled else [signal.key for signal in verdict.supporting]
    supporting = [items[key] for key in keys]
    component = _component(category, supporting, names)
    hosts, devices = verdict.hosts, verdict.devices
    info = book.categories.get(category)
    if not devices and info is not None and info.family == FAMILY_GPU and info.is_hardware:
        # A GPU cause with no device named by its evidence: the UUIDs its message quotes,
        # else the interruption's own devices.
        quoted = safe_patterns.all_matches(GPU_UUID, facts.message[:MESSAGE_MAX_CHARS])
        devices = list(dict.fromkeys(m.group(0) for m in quoted)) or list(facts.devices)
    note = _note(message_category, category, supporting, names)
    if grouped is not None:
        # Said first whatever the category: on-call looks at the shared part, not the host.
        note = f"{grouped.text}." + (f" {note}" if note else "")
    if not reading.complete:
        note = " ".join(
            part
            for part in (note, f"Time budget reached: {reading.rules_unread} rules not read.")
            if part
        )
    # The evidence list: what supports the winner first, then everything else, heaviest first.
    chosen = set(keys)
    ordered = supporting + sorted(
        (item for index, item in enumerate(items) if index not in chosen),
        key=lambda item: -item.weight,
    )
    scores = scores_of(items, book)
    causes = _causes(_signals(items), items, book)
    return Suggestion(
        category=category,
        component=component,
        hosts=hosts,
        devices=devices,
        confidence=_vote_capped(
            verdict, items, len(said), 0 if stalled else len(votes), book, facts, hints
        ),
        evidence=ordered,
        note=note,
        message_category=message_category,
        scores={c: round(value, 3) for c, value in scores.items()},
        reading=reading,
        causes=causes,
    )


def _vote_capped(
    verdict: combine.Verdict,
    items: Sequence[EvidenceItem],
    first_vote: int,
    n_votes: int,
    book: RuleBook,
    facts: IncidentFacts,
    hints: Sequence[tuple[str, str, str]],
) -> float:
    """The verdict's confidence, where a learned vote supports the winner, raised by the vote
    no further than VOTE_CAP (SYMPTOM_VOTE_CAP for a symptom): a reading by resemblance is
    never near-certainty. What the rest of the evidence makes of the same category is kept,
    so corroborating evidence still keeps or raises the confidence."""
    votes = range(first_vote, first_vote + n_votes)
    if not any(signal.key in votes for signal in verdict.supporting):
        return verdict.confidence
    info = book.categories.get(verdict.category)
    cap = SYMPTOM_VOTE_CAP if info is not None and info.is_symptom else VOTE_CAP
    rest = [signal for signal in _signals(items) if signal.key not in votes]
    alone = combine.weigh(rest, book.categories, own_hosts=facts.hosts, hints=hints)
    without = alone.confidence if alone and alone.category == verdict.category else 0.0
    return max(without, min(verdict.confidence, cap))


def _causes(
    signals: Sequence[combine.Signal], items: Sequence[EvidenceItem], book: RuleBook
) -> list[Cause]:
    causes = []
    for candidate in combine.best_per_family(signals, book.categories):
        slug = combine.category_of(candidate, book.categories)
        causes.append(
            Cause(
                kind=slug,
                detail=category_name(slug, book.names()),
                confidence=round(min(max(candidate.score, 0.0), 1.0), 4),
                hosts=(candidate.host,) if candidate.host else (),
                devices=(candidate.device,) if candidate.device else (),
                evidence=tuple(
                    Evidence(
                        source=items[s.key].kind,
                        detail=items[s.key].text,
                        weight=min(max(s.weight, 0.0), 1.0),
                        host=s.host or None,
                        device=s.device or None,
                    )
                    for s in candidate.signals
                ),
            )
        )
    return causes


STALL_CATEGORY = "nccl-watchdog-timeout"
STALL_WEIGHT = 0.25


def _stall_category(book: RuleBook) -> Category:
    return book.categories.get(STALL_CATEGORY) or Category(
        STALL_CATEGORY, "NCCL Watchdog Timeouts", FAMILY_SYMPTOM, False
    )


def _component(category: str, supporting: Sequence[EvidenceItem], names: Mapping[str, str]) -> str:
    """The component the heaviest supporting item names (the XID's or the rule's)."""
    if not supporting:
        return category_name(category, names)
    return supporting[0].component or category_name(category, names)


def _note(
    message_category: str,
    category: str,
    supporting: Sequence[EvidenceItem],
    names: Mapping[str, str] | None,
) -> str:
    """When the words and the evidence disagree, say so (on-call reads the message first)."""
    if not message_category or message_category == category:
        return ""
    lead = next((item for item in supporting if item.kind != "message"), None)
    lead = lead or (supporting[0] if supporting else None)
    where = f" on {lead.host}" if lead and lead.host and lead.host not in lead.text else ""
    what = f"{lead.text}{where}" if lead else "the evidence"
    return (
        f"The message alone reads as {category_name(message_category, names)}; "
        f"{what} points at {category_name(category, names)}, which is suggested instead."
    )
