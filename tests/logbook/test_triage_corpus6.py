"""The sixth public corpus (tests/data/triage_corpus6.jsonl): real failure messages from
public issue threads and operators' trackers, none sharing a source or a message with the
earlier sets, split by the hash of their id. Committed before the engine read any of them
(the sixth corpus's section of tests/data/README.md); its held-out part was read once as
the engine stood then (counts only) and once after its tune part joined the prior
(docs/triage.md, "Seventh round"); held-out misses are never printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.logbook.test_triage_corpus4 import assert_real_split_by_hash_and_new
from tests.logbook.test_triage_corpus5 import EARLIER as CORPUS5_EARLIER
from tests.logbook.test_triage_heldout import (
    assert_floors,
    assert_targets_met,
    report_tune_part,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus6.jsonl"
EARLIER = (*CORPUS5_EARLIER, "triage_corpus5.jsonl")
# Floors at the figures docs/triage.md reports ("Seventh round"): the rules alone, and as the
# worker reads it (with logbook.triage_semantic's vote); the same at first read and after.
RULES_HELD_OUT_FLOOR = 17
HELD_OUT_FLOOR = 21


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def test_the_corpus_is_real_split_by_hash_and_new():
    assert_real_split_by_hash_and_new(rows(), EARLIER, max_chars=1600)


def test_the_tune_part_is_reported_with_its_misses():
    report_tune_part(rows("tune"), "corpus6 tune part")


def test_held_out_top1_never_falls_below_the_reported_figure():
    # misses not printed (module docstring)
    assert_floors(rows("heldout"), "corpus6 held-out part", RULES_HELD_OUT_FLOOR, HELD_OUT_FLOOR)


@pytest.mark.xfail(strict=True, reason="issue 37's held-out target is not met (docs/triage.md)")
def test_the_held_out_part_meets_the_targets():
    assert_targets_met(rows("heldout"), "corpus6 held-out part")
