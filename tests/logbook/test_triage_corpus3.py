"""Auto-triage against the third public corpus (tests/data/triage_corpus3.jsonl, issue 37's
fourth round): 101 real failure messages from public issue threads, none sharing a source or
a message with the earlier sets, split by the hash of their id into a part the rules and the
prior may learn from and a part that is only measured. Held-out misses are deliberately not
printed (counts per category only): reading them would turn them into tuning data
(tests/data/README.md)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from logbook.taxonomy import ROOT_CAUSE_SEEDS
from tests.logbook.test_triage_heldout import (
    assert_floors,
    assert_targets_met,
    report_tune_part,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus3.jsonl"
EARLIER = ("triage_messages.jsonl", "triage_heldout.jsonl", "triage_corpus2.jsonl")
FIELDS = {"id", "split", "message", "category", "component", "source", "why"}
# Floors at the figures docs/triage.md reports ("Fourth round"): regressions fail. The
# held-out part by the rules alone and as the worker reads it (with the vote of
# logbook.triage_semantic), measured once with the final method.
RULES_HELD_OUT_FLOOR = 33
HELD_OUT_FLOOR = 37  # 38 before corpus5's tune part joined the prior (docs/triage.md)


def split_of(row_id: str) -> str:
    """The part a message belongs to, fixed by its id before the engine read any of them."""
    return "heldout" if hashlib.sha256(row_id.encode()).hexdigest()[0] in "01234567" else "tune"


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def normalised(message: str) -> str:
    """A message with its numbers, hex and spacing blurred: how duplicates were checked."""
    return re.sub(r"\s+", " ", re.sub(r"0x[0-9a-f]+|\d+", "#", message.lower())).strip()


def test_the_corpus_is_real_split_by_hash_and_new():
    every = rows()
    slugs = {seed.slug for seed in ROOT_CAUSE_SEEDS}
    earlier = [
        json.loads(line)
        for name in (*EARLIER, "triage_nocause.jsonl")
        for line in (DATA.parent / name).read_text().splitlines()
        if line.strip()
    ]
    earlier_sources = {row["source"].rstrip("/") for row in earlier if "source" in row}
    earlier_messages = {normalised(row["message"]) for row in earlier}
    assert len(every) >= 100
    assert len({row["id"] for row in every}) == len(every)
    assert len({normalised(row["message"]) for row in every}) == len(every)
    for row in every:
        assert set(row) == FIELDS, row["id"]
        assert row["category"] in slugs, row["id"]
        assert row["split"] == split_of(row["id"]), row["id"]
        assert row["message"].strip() and row["source"].startswith("https://"), row["id"]
        # No thread or message of the earlier sets is reused: their held-out parts stay
        # unread, and nothing here was tuned on before.
        assert row["id"] not in {r["id"] for r in earlier}, row["id"]
        assert row["source"].rstrip("/") not in earlier_sources, row["id"]
        assert normalised(row["message"]) not in earlier_messages, row["id"]


def test_the_tune_part_is_reported_with_its_misses():
    report_tune_part(rows("tune"), "corpus3 tune part")


def test_held_out_top1_never_falls_below_the_reported_figure():
    # misses not printed (module docstring)
    assert_floors(rows("heldout"), "corpus3 held-out part", RULES_HELD_OUT_FLOOR, HELD_OUT_FLOOR)


@pytest.mark.xfail(strict=True, reason="issue 37's held-out target is not met (docs/triage.md)")
def test_the_held_out_part_meets_the_targets():
    assert_targets_met(rows("heldout"), "corpus3 held-out part")
