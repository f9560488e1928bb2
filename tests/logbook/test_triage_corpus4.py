"""The fourth public corpus (tests/data/triage_corpus4.jsonl): real failure messages from
public issue threads and vendor guides, none sharing a source or a message with the earlier
sets, split by the hash of their id. Its held-out part was read once by the engine as it
stood before this corpus (counts only) and once after its tune part joined the prior
(docs/triage.md, "Fifth round"); held-out misses are never printed (tests/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logbook.taxonomy import ROOT_CAUSE_SEEDS
from tests.logbook.test_triage_corpus3 import normalised, split_of
from tests.logbook.test_triage_heldout import (
    assert_floors,
    assert_targets_met,
    report_tune_part,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus4.jsonl"
EARLIER = (
    "triage_messages.jsonl",
    "triage_heldout.jsonl",
    "triage_corpus2.jsonl",
    "triage_corpus3.jsonl",
    "triage_nocause.jsonl",
)
FIELDS = {"id", "split", "message", "category", "component", "source", "why"}
# Floors at the figures docs/triage.md reports ("Fifth round"), measured with the final
# method: the rules alone, and as the worker reads it (with logbook.triage_semantic's vote).
RULES_HELD_OUT_FLOOR = 17
HELD_OUT_FLOOR = 24


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def assert_real_split_by_hash_and_new(
    every: list[dict[str, str]], earlier_names: tuple[str, ...], *, max_chars: int | None = None
) -> None:
    """A public corpus's rows: the fields, a taxonomy category, the part fixed by the id's hash,
    a public source, and nothing (id, source page, normalised message) of the earlier files."""
    names = {seed.slug: seed.name for seed in ROOT_CAUSE_SEEDS}
    earlier = [
        json.loads(line)
        for name in earlier_names
        for line in (DATA.parent / name).read_text().splitlines()
        if line.strip()
    ]
    earlier_ids = {row["id"] for row in earlier}
    earlier_sources = {row["source"].rstrip("/") for row in earlier if "source" in row}
    earlier_messages = {normalised(row["message"]) for row in earlier}
    assert len(every) >= 60
    assert len({row["id"] for row in every}) == len(every)
    assert len({normalised(row["message"]) for row in every}) == len(every)
    for row in every:
        assert set(row) == FIELDS, row["id"]
        assert row["category"] in names, row["id"]
        assert row["component"] == names[row["category"]], row["id"]
        # The part is fixed by the id, chosen before the hash was computed.
        assert row["split"] == split_of(row["id"]), row["id"]
        assert row["message"].strip() and row["why"].strip(), row["id"]
        assert max_chars is None or len(row["message"]) <= max_chars, row["id"]
        assert row["source"].startswith("https://"), row["id"]
        # Nothing of the earlier sets is reused: their held-out parts stay unread here.
        assert row["id"] not in earlier_ids, row["id"]
        assert row["source"].rstrip("/") not in earlier_sources, row["id"]
        assert normalised(row["message"]) not in earlier_messages, row["id"]


def test_the_corpus_is_real_split_by_hash_and_new():
    assert_real_split_by_hash_and_new(rows(), EARLIER)


def test_the_tune_part_is_reported_with_its_misses():
    report_tune_part(rows("tune"), "corpus4 tune part")


def test_held_out_top1_never_falls_below_the_reported_figure():
    # misses not printed (module docstring)
    assert_floors(rows("heldout"), "corpus4 held-out part", RULES_HELD_OUT_FLOOR, HELD_OUT_FLOOR)


@pytest.mark.xfail(strict=True, reason="issue 37's held-out target is not met (docs/triage.md)")
def test_the_held_out_part_meets_the_targets():
    assert_targets_met(rows("heldout"), "corpus4 held-out part")
