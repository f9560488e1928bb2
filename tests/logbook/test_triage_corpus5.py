"""The fifth public corpus (tests/data/triage_corpus5.jsonl): real failure messages from
public issue threads, operators' trackers, training chronicles and guides, none sharing a
source or a message with the earlier sets, split by the hash of their id. Only the structural
check lives here for now: the engine has not read any of these messages (tests/data/README.md,
"The fifth corpus")."""

from __future__ import annotations

import json
from pathlib import Path

from logbook.taxonomy import ROOT_CAUSE_SEEDS
from tests.logbook.test_triage_corpus3 import normalised, split_of

DATA = Path(__file__).resolve().parent.parent / "data" / "triage_corpus5.jsonl"
EARLIER = (
    "triage_messages.jsonl",
    "triage_heldout.jsonl",
    "triage_corpus2.jsonl",
    "triage_corpus3.jsonl",
    "triage_corpus4.jsonl",
    "triage_nocause.jsonl",
)
FIELDS = {"id", "split", "message", "category", "component", "source", "why"}


def rows(part: str | None = None) -> list[dict[str, str]]:
    every = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [row for row in every if part is None or row["split"] == part]


def test_the_corpus_is_real_split_by_hash_and_new():
    every = rows()
    names = {seed.slug: seed.name for seed in ROOT_CAUSE_SEEDS}
    earlier = [
        json.loads(line)
        for name in EARLIER
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
        assert len(row["message"]) <= 1600, row["id"]
        assert row["source"].startswith("https://"), row["id"]
        # Nothing of the earlier sets is reused: their held-out parts stay unread here.
        assert row["id"] not in earlier_ids, row["id"]
        assert row["source"].rstrip("/") not in earlier_sources, row["id"]
        assert normalised(row["message"]) not in earlier_messages, row["id"]
