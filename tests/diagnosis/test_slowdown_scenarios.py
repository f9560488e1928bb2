"""The slowdown rules measured on the labelled scenarios (tests/diagnosis/slowdown_scenarios.py):
top-1 cause right (kind, and the host or config keys it names) on at least 90% of the planted
slowdowns, and not one slowdown opened on a noise-only run. docs/slowdowns.md quotes the
figures this test computes; the last test keeps the page honest."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from diagnosis import slowdown_rules as rules
from diagnosis.slowdown_detect import detect
from diagnosis.slowdown_facts import facts_for
from tests.diagnosis.slowdown_scenarios import Scenario, labelled, noise_only

DOCS = Path(__file__).resolve().parents[2] / "docs" / "slowdowns.md"


def top_cause_right(scenario: Scenario, cause: rules.Cause) -> bool:
    if cause.kind != scenario.kind:
        return False
    if scenario.hosts and set(cause.hosts) != set(scenario.hosts):
        return False
    if scenario.config_keys and not set(scenario.config_keys) <= set(cause.config_keys):
        return False
    return scenario.kind != "section" or "data_loading" in cause.detail


def diagnose(scenario: Scenario) -> list[list[rules.Cause]]:
    points, windows = detect(scenario.series)
    assert scenario.source is not None
    return [rules.causes_rank(facts_for(points, window, scenario.source)) for window in windows]


@cache
def figures() -> dict[str, object]:
    planted = labelled()
    right = 0
    one_window = 0
    by_kind: dict[str, list[int]] = {}
    wrong: list[str] = []
    for scenario in planted:
        found = diagnose(scenario)
        one_window += len(found) == 1
        ok = len(found) == 1 and top_cause_right(scenario, found[0][0])
        right += ok
        tally = by_kind.setdefault(str(scenario.kind), [0, 0])
        tally[0] += ok
        tally[1] += 1
        if not ok:
            wrong.append(
                f"{scenario.name}: {[c[0].kind for c in found]} {found[0][0] if found else ''}"
            )
    noise = noise_only()
    false_windows = sum(len(diagnose(scenario)) for scenario in noise)
    return {
        "planted": len(planted),
        "right": right,
        "one_window": one_window,
        "by_kind": by_kind,
        "noise_runs": len(noise),
        "false_windows": false_windows,
        "wrong": wrong,
    }


def test_the_top_cause_is_right_on_at_least_90_percent_of_planted_slowdowns():
    result = figures()
    assert result["right"] / result["planted"] >= 0.9, result["wrong"]
    # Each planted slowdown opens exactly one window.
    assert result["one_window"] == result["planted"], result["wrong"]


def test_every_kind_is_planted_and_mostly_found():
    by_kind = figures()["by_kind"]
    assert set(by_kind) == {kind for kind in rules.KINDS}
    for kind, (right, total) in by_kind.items():
        assert right / total >= 0.75, (kind, right, total)


def test_noise_only_runs_open_no_slowdown():
    # ±2% jitter, a restart with its warm-up, blocking checkpoint saves every 100 steps.
    result = figures()
    assert result["noise_runs"] >= 16
    assert result["false_windows"] == 0


def test_the_docs_page_quotes_these_figures():
    result = figures()
    text = DOCS.read_text()
    quoted = re.search(r"top-1 cause right on (\d+) of (\d+)", text)
    assert quoted, "docs/slowdowns.md states the top-1 figure"
    assert (int(quoted[1]), int(quoted[2])) == (result["right"], result["planted"])
    noise = re.search(r"(\d+) slowdowns opened on (\d+) noise-only runs", text)
    assert noise and (int(noise[1]), int(noise[2])) == (
        result["false_windows"],
        result["noise_runs"],
    )
