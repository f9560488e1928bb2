"""Auto-triage against the held-out set (tests/data/triage_heldout.jsonl, issue 37 item 5):
real messages collected after the rules were tuned, split by the hash of their id into a part
the rules may be tuned on and a part that is only measured. The gate is the held-out figure
of what the worker reads (the rules with the public messages' reading by meaning beside them,
logbook.triage_semantic): 85% top-1, and 70% for every category with 5 or more held-out
messages. Held-out misses are deliberately not printed (only counts per category): reading
them would turn them into tuning data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from logbook.taxonomy import ROOT_CAUSE_SEEDS
from tests.logbook.test_triage_accuracy import (
    CATEGORY_MIN_MESSAGES,
    CATEGORY_TARGET,
    OVERALL_TARGET,
    accuracy_table,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_heldout.jsonl"
FIELDS = {"id", "split", "message", "category", "component", "source", "why"}
# The held-out part may not fall below what docs/triage.md reports (right of 34): floors
# against regressions while issue 37's 85% is not met. The rules alone, and as the worker
# reads (with the vote), measured once with the final method.
RULES_HELD_OUT_FLOOR = 18
HELD_OUT_FLOOR = 24  # 25 before the no-cause class and the vote caps (docs/triage.md)


def split_of(row_id: str) -> str:
    """The part a message belongs to, fixed by its id (see tests/data/README.md)."""
    return "heldout" if hashlib.sha256(row_id.encode()).hexdigest()[0] in "01234567" else "tune"


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def report(table: dict[str, tuple[int, int]]) -> tuple[int, int, str]:
    right = sum(r for r, _ in table.values())
    total = sum(t for _, t in table.values())
    lines = [f"{'category':32} {'right':>5} {'of':>4}"]
    for category, (r, t) in sorted(table.items(), key=lambda kv: (-kv[1][1], kv[0])):
        lines.append(f"{category:32} {r:5d} {t:4d}")
    lines.append(f"{'overall':32} {right:5d} {total:4d} {right / total:6.0%}")
    return right, total, "\n".join(lines)


def test_the_held_out_set_is_real_split_by_hash_and_uses_the_taxonomy():
    every = rows()
    slugs = {seed.slug for seed in ROOT_CAUSE_SEEDS}
    old = Path(__file__).resolve().parent.parent / "data" / "triage_messages.jsonl"
    old_ids = {json.loads(line)["id"] for line in old.read_text().splitlines() if line.strip()}
    assert len(every) >= 60
    assert len({row["id"] for row in every}) == len(every)
    assert not {row["id"] for row in every} & old_ids
    for row in every:
        assert set(row) == FIELDS, row["id"]
        assert row["category"] in slugs, row["id"]
        assert row["split"] == split_of(row["id"]), row["id"]
        assert row["message"].strip() and row["source"].startswith("https://"), row["id"]
    assert {row["split"] for row in every} == {"tune", "heldout"}


def test_the_tune_part_is_reported_with_its_misses():
    # Not gated: the rules may be tuned on these, so their figure says little.
    table, misses = accuracy_table(rows("tune"))
    _right, total, text = report(table)
    print("\ntune part\n" + text + "\nmisses:\n" + "\n".join(misses))
    assert total == len(rows("tune"))


def test_held_out_top1_never_falls_below_the_reported_figure():
    # misses not printed (module docstring)
    assert_floors(rows("heldout"), "held-out part", RULES_HELD_OUT_FLOOR, HELD_OUT_FLOOR)


def assert_floors(held_out: list[dict[str, str]], label: str, rules_floor: int, floor: int) -> None:
    """A held-out part's counts per category, printed (never its misses), by the rules alone
    and with the vote, each at least its reported floor."""
    rules_right, _total, rules_text = report(accuracy_table(held_out)[0])
    right, _total, text = report(accuracy_table(held_out, vote=True)[0])
    print(f"\n{label}, rules alone\n{rules_text}")
    print(f"\n{label}, rules and the vote\n{text}")
    assert rules_right >= rules_floor, rules_text
    assert right >= floor, text


def report_tune_part(tune: list[dict[str, str]], label: str) -> None:
    """A tune part's counts and misses, printed: not gated, as the rules and the prior may
    learn from these and their figure says little."""
    table, misses = accuracy_table(tune, vote=True)
    _right, total, text = report(table)
    print(f"\n{label}, rules and the vote\n{text}\nmisses:\n" + "\n".join(misses))
    assert total == len(tune)


def assert_targets_met(held_out: list[dict[str, str]], label: str) -> None:
    """Issue 37's targets on a held-out part as the worker reads it (counts printed only)."""
    table, _misses = accuracy_table(held_out, vote=True)
    _right, _total, text = report(table)
    print(f"\n{label}, rules and the vote\n{text}")
    assert targets_missed(table) == {}, text


def targets_missed(table: dict[str, tuple[int, int]]) -> dict[str, str]:
    """What falls short of issue 37's targets: overall, and each category of 5 or more."""
    right = sum(r for r, _ in table.values())
    total = sum(t for _, t in table.values())
    missed = {
        category: f"{r}/{t}"
        for category, (r, t) in table.items()
        if t >= CATEGORY_MIN_MESSAGES and r / t < CATEGORY_TARGET
    }
    if right / total < OVERALL_TARGET:
        missed["overall"] = f"{right}/{total}"
    return missed


@pytest.mark.xfail(strict=True, reason="issue 37's held-out target is not met (docs/triage.md)")
def test_held_out_top1_meets_the_targets():
    table, _misses = accuracy_table(rows("heldout"), vote=True)
    assert targets_missed(table) == {}, report(table)[2]
