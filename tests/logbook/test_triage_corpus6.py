"""The sixth public corpus (tests/data/triage_corpus6.jsonl): real failure messages from
public issue threads and operators' trackers, none sharing a source or a message with the
earlier sets, split by the hash of their id. Committed before the engine read any of them
(the sixth corpus's section of tests/data/README.md); held-out misses are never printed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.logbook.test_triage_corpus4 import assert_real_split_by_hash_and_new
from tests.logbook.test_triage_corpus5 import EARLIER as CORPUS5_EARLIER

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus6.jsonl"
EARLIER = (*CORPUS5_EARLIER, "triage_corpus5.jsonl")


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def test_the_corpus_is_real_split_by_hash_and_new():
    assert_real_split_by_hash_and_new(rows(), EARLIER, max_chars=1600)
