"""Auto-triage against the second public corpus (tests/data/triage_corpus2.jsonl, issue 37):
107 real failure messages from public issue threads and guides, collected after the first
held-out set, split by the hash of their id into a part the rules may be tuned on and a part
that is only measured. Held-out misses are deliberately not printed (counts per category
only): reading them would turn them into tuning data (tests/data/README.md)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from logbook.taxonomy import ROOT_CAUSE_SEEDS
from tests.logbook import test_triage_heldout as first_set
from tests.logbook.test_triage_accuracy import accuracy_table
from tests.logbook.test_triage_heldout import assert_floors, report, targets_missed

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus2.jsonl"
FIELDS = {"id", "split", "message", "category", "component", "source", "why"}
# Floors at the figures docs/triage.md reports (right of the part): regressions fail. The
# tune part by the rules alone; the held-out part by the rules alone and as the worker reads
# it (with the vote of logbook.triage_semantic), measured once with the final method.
TUNE_FLOOR = 59
RULES_HELD_OUT_FLOOR = 28
# 30 before the no-cause class and the vote caps, 31 after, 30 once corpus5's tune part
# joined the prior (docs/triage.md, "Sixth round").
HELD_OUT_FLOOR = 30


def split_of(row_id: str) -> str:
    """The part a message belongs to, fixed by its id before the engine read any of them."""
    return "heldout" if hashlib.sha256(row_id.encode()).hexdigest()[0] in "0123456" else "tune"


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def test_the_corpus_is_real_split_by_hash_and_new():
    every = rows()
    slugs = {seed.slug for seed in ROOT_CAUSE_SEEDS}
    earlier = [
        json.loads(line)
        for name in ("triage_messages.jsonl", "triage_heldout.jsonl")
        for line in (DATA.parent / name).read_text().splitlines()
        if line.strip()
    ]
    earlier_ids = {row["id"] for row in earlier}
    earlier_sources = {row["source"].rstrip("/") for row in earlier}
    assert len(every) >= 100
    assert len({row["id"] for row in every}) == len(every)
    for row in every:
        assert set(row) == FIELDS, row["id"]
        assert row["category"] in slugs, row["id"]
        assert row["split"] == split_of(row["id"]), row["id"]
        assert row["message"].strip() and row["source"].startswith("https://"), row["id"]
        # No thread of the earlier sets is reused: the held-out part of the first set stays
        # unread, and nothing here was tuned on before.
        assert row["id"] not in earlier_ids, row["id"]
        assert row["source"].rstrip("/") not in earlier_sources, row["id"]


def test_the_tune_part_is_reported_with_its_misses():
    table, misses = accuracy_table(rows("tune"))
    right, total, text = report(table)
    print("\ncorpus2 tune part\n" + text + "\nmisses:\n" + "\n".join(misses))
    assert total == len(rows("tune"))
    assert right >= TUNE_FLOOR, text


def test_held_out_top1_never_falls_below_the_reported_figure():
    # misses not printed (module docstring)
    assert_floors(rows("heldout"), "corpus2 held-out part", RULES_HELD_OUT_FLOOR, HELD_OUT_FLOOR)


@pytest.mark.xfail(strict=True, reason="issue 37's held-out target is not met (docs/triage.md)")
def test_both_held_out_parts_together_meet_the_targets():
    both = rows("heldout") + first_set.rows("heldout")
    table, _misses = accuracy_table(both, vote=True)
    _right, _total, text = report(table)
    print(f"\nboth held-out parts, rules and the vote\n{text}")
    assert targets_missed(table) == {}, text
