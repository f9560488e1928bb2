"""Does a classifier trained on the public labelled messages help the rules on messages they
never saw? (issue 37: "a classifier trained on the public tune corpus as a site-wide prior").

Measured by 5-fold cross-validation over the tune messages only (tests/data: the tuned-on
set, the tune parts of triage_heldout.jsonl and triage_corpus2.jsonl to triage_corpus6.jsonl):
each fold's messages are read by the rules alone and by the rules with the vote of a
classifier trained on the other folds. `--held-out` then reads corpus2's held-out part once,
with a model trained on every tune message, and prints only counts (its misses are not read).

    python -m bench.triage_prior [--held-out]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from logbook import triage_classifier as tc
from logbook.autotriage import EvidenceItem, IncidentFacts, suggest
from logbook.taxonomy import UNKNOWN_SLUG

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
AT = datetime(2024, 7, 1, 3, 0, tzinfo=UTC)
FOLDS = 5


def _rows(name: str, part: str | None = None) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]
    return [row for row in rows if part is None or row.get("split") == part]


def nocause_pool() -> list[dict[str, str]]:
    """Messages that name no cause, written for Chronicle (label NO_CAUSE): the reading by
    meaning learns to abstain on them (logbook.triage_semantic)."""
    return _rows("triage_nocause.jsonl")


def tune_pool() -> list[dict[str, str]]:
    return (
        _rows("triage_messages.jsonl")
        + _rows("triage_heldout.jsonl", "tune")
        + _rows("triage_corpus2.jsonl", "tune")
        + _rows("triage_corpus3.jsonl", "tune")
        + _rows("triage_corpus4.jsonl", "tune")
        + _rows("triage_corpus5.jsonl", "tune")
        + _rows("triage_corpus6.jsonl", "tune")
    )


def _votes(model: dict | None, message: str) -> list[EvidenceItem]:
    vote = tc.vote(model, message)
    if vote is None:
        return []
    return [
        EvidenceItem(
            "classifier", AT, "public prior", "", vote.category, vote.weight, rule="classifier"
        )
    ]


def predicted(message: str, votes: Sequence[EvidenceItem] = ()) -> str:
    suggestion = suggest(IncidentFacts(message=message, occurred_at=AT), votes=votes)
    return suggestion.category if suggestion else UNKNOWN_SLUG


Variant = Callable[[dict | None, str], str]


def rules_only(_model: dict | None, message: str) -> str:
    return predicted(message)


def rules_and_vote(model: dict | None, message: str) -> str:
    return predicted(message, _votes(model, message))


def vote_when_silent(model: dict | None, message: str) -> str:
    guess = predicted(message)
    return guess if guess != UNKNOWN_SLUG else predicted(message, _votes(model, message))


VARIANTS: dict[str, Variant] = {
    "rules alone": rules_only,
    "rules + public vote": rules_and_vote,
    "public vote only where the rules say nothing": vote_when_silent,
}


def _train(rows: Sequence[dict[str, str]]) -> dict | None:
    return tc.train([tc.Example(row["message"], row["category"]) for row in rows])


def cross_validate(pool: Sequence[dict[str, str]]) -> dict[str, int]:
    order = list(range(len(pool)))
    random.Random(0).shuffle(order)
    right = dict.fromkeys(VARIANTS, 0)
    for fold in range(FOLDS):
        test = [pool[i] for k, i in enumerate(order) if k % FOLDS == fold]
        train = [pool[i] for k, i in enumerate(order) if k % FOLDS != fold]
        model = _train(train)
        for row in test:
            for name, variant in VARIANTS.items():
                right[name] += variant(model, row["message"]) == row["category"]
    return right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true", help="read corpus2's held-out once")
    args = parser.parse_args()
    pool = tune_pool()
    print(f"tune messages: {len(pool)}; {FOLDS}-fold cross-validation")
    for name, right in cross_validate(pool).items():
        print(f"  {name:48} {right:4d} / {len(pool)}  {right / len(pool):6.1%}")
    if args.held_out:
        model = _train(pool)
        held = _rows("triage_corpus2.jsonl", "heldout")
        print(f"corpus2 held-out: {len(held)} (counts only)")
        for name, variant in VARIANTS.items():
            right = sum(variant(model, row["message"]) == row["category"] for row in held)
            print(f"  {name:48} {right:4d} / {len(held)}  {right / len(held):6.1%}")


if __name__ == "__main__":
    main()
