"""Every pattern auto-triage runs on a message runs in linear time (RE2), and a suggestion
has a budget (issue 42 findings 2 and 3, issue 37 step 3). No wall-clock assertion: the tests
assert what bounds the work (the engine's type, the rules read, the characters scanned);
`python -m bench.triage_isolation` measures the time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import re2

from logbook import autotriage, safe_patterns
from logbook.autotriage import IncidentFacts, MessageRule, Reading, suggest

AT = datetime(2024, 7, 1, 3, 0, tzinfo=UTC)
CATASTROPHIC = r"^(\w+\s?)+$"


def rule(name: str) -> MessageRule:
    return next(r for r in autotriage.BUILTIN_RULES if r.name == name)


def test_every_built_in_pattern_is_an_re2_program():
    patterns = [r.pattern for r in autotriage.BUILTIN_RULES]
    patterns += [autotriage.XID_LINE, autotriage.GPU_UUID]
    for pattern in patterns:
        assert isinstance(safe_patterns.compiled(pattern), re2._Regexp), pattern


def test_a_catastrophic_admin_pattern_on_64000_characters_is_bounded():
    # given the pattern (30 s on 72 characters under Python's re) and a message of
    # 64,000 word characters that almost matches it
    assert isinstance(safe_patterns.compiled(CATASTROPHIC), re2._Regexp)
    message = ("a" * 63_999) + "!"
    mine = MessageRule("admin:1", CATASTROPHIC, "software-bug", "Ours", 0.9)
    # when the engine reads it with every built-in rule
    suggestion = suggest(IncidentFacts(message, AT), extra_rules=[mine])
    # then it read each rule once, over at most the message's first 64,000 characters
    reading = Reading()
    autotriage.message_evidence(IncidentFacts(message, AT), [mine], reading)
    assert reading.rules_read == 1 and reading.complete
    assert reading.chars_scanned <= autotriage.MESSAGE_MAX_CHARS
    assert suggestion is None or suggestion.category != "software-bug"


def test_the_filesystem_rule_reads_four_10000_character_nfs_messages_in_one_pass_each():
    # given finding 2's messages: one 'nfs' word with no error word after it (Python's re
    # backtracked quadratically on it: 0.7 s at 900 characters, 43 s at 7,200)
    message = "nfs" * 3334
    filesystem = rule("filesystem")
    # then its program is RE2's and finds no match (nor runs past the text)
    assert isinstance(safe_patterns.compiled(filesystem.pattern), re2._Regexp)
    assert len(message) >= 10_000
    for _ in range(4):
        assert safe_patterns.first_match(filesystem.pattern, message) is None
    assert safe_patterns.first_match(filesystem.pattern, message + " nfs: server error")


def test_a_suggestion_stops_reading_rules_at_its_budget_and_says_so():
    facts = IncidentFacts("NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus", AT)
    # a budget already spent reads no rule, counts the rest, and the note says so
    spent = Reading(budget_s=0.0)
    suggestion = suggest(facts, reading=spent)
    assert spent.rules_read == 0
    assert spent.rules_unread == len(autotriage.BUILTIN_RULES)
    assert suggestion is not None and "Time budget reached" in suggestion.note
    # a rule count bound reads that many and no more
    few = Reading(max_rules=3)
    autotriage.message_evidence(facts, autotriage.BUILTIN_RULES, few)
    assert (few.rules_read, few.rules_unread) == (3, len(autotriage.BUILTIN_RULES) - 3)


@pytest.mark.parametrize(
    "pattern", [r"(?<!closing )SIGTERM", r"(a)\1", r"foo(?=bar)", "(unclosed", "", "x" * 501]
)
def test_a_pattern_re2_cannot_run_is_refused(pattern):
    assert safe_patterns.pattern_problem(pattern) != ""
    assert autotriage.pattern_problem(pattern) != ""


def test_an_unless_group_skips_the_matches_it_marks():
    sigterm = rule("sigterm").pattern
    preemption = rule("preemption").pattern
    assert safe_patterns.first_match(sigterm, "torchrun: closing signal SIGTERM to 7") is None
    torchrun = "elastic.multiprocessing.api:Sending process 4521 closing signal SIGTERM"
    assert safe_patterns.first_match(sigterm, torchrun) is None
    found = safe_patterns.first_match(sigterm, "closing signal SIGTERM; later: got SIGTERM")
    assert found is not None and found.start() > 25
    assert safe_patterns.first_match(preemption, "Xid 45: preemptive cleanup") is None
    assert safe_patterns.first_match(preemption, "preemption cleanup done") is None
    assert safe_patterns.first_match(preemption, "JOB CANCELLED DUE TO PREEMPTION")


def test_a_pattern_saved_before_patterns_were_checked_is_skipped_not_raised():
    old = MessageRule("admin:2", r"(?<!x)frobnicator", "cpu", "CPU", 0.9)
    reading = Reading()
    items = autotriage.message_evidence(IncidentFacts("frobnicator", AT), [old], reading)
    assert items == [] and reading.refused == ["admin:2"]
