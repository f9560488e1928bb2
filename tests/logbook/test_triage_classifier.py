"""The auto-triage classifier (logbook.triage_classifier), without a database: what it learns
from, that a stored model (JSON) votes as the fitted one does, that it abstains where it has
nothing to say, and its cross-validated accuracy on the public labelled messages."""

from __future__ import annotations

import json
from pathlib import Path

from logbook import triage_classifier as tc

DATA = Path(__file__).resolve().parent.parent / "data"
NIC = [
    f"NCCL WARN NET/IB : mlx5_{n}:1 Got async event : port error; rail {n} flapping"
    for n in range(6)
]
ECC = [
    f"RuntimeError: CUDA error: uncorrectable ECC error encountered on GPU {n}" for n in range(6)
]
OOM = [f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB" for n in range(6)]


def examples(*groups: tuple[str, list[str]]) -> list[tc.Example]:
    rows = []
    for category, messages in groups:
        rows += [tc.Example(text, category, len(rows) + 1) for text in messages]
    return rows


def test_only_categories_with_enough_examples_are_learned_and_two_are_needed():
    few = examples(("nic", NIC[: tc.MIN_EXAMPLES_PER_CATEGORY - 1]), ("gpu-hbm3-memory", ECC))
    # given one category below the minimum: one category left, nothing to vote between
    assert tc.learnable(few) == []
    assert tc.train(few) is None
    assert tc.cross_validated_accuracy(few) is None
    # given two categories at the minimum and an empty message
    enough = [*examples(("nic", NIC), ("gpu-hbm3-memory", ECC)), tc.Example("  ", "nic", 99)]
    kept = tc.learnable(enough)
    assert {item.category for item in kept} == {"nic", "gpu-hbm3-memory"}
    assert all(item.message.strip() for item in kept)


def test_a_stored_model_votes_for_the_category_of_similar_messages_and_says_how_many():
    model = tc.train(examples(("nic", NIC), ("gpu-hbm3-memory", ECC), ("software-bug", OOM)))
    assert model is not None
    stored = json.loads(json.dumps(model))  # what the database keeps and gives back
    # when it reads a new message like the NIC ones
    vote = tc.vote(stored, "NCCL WARN NET/IB : mlx5_7:1 Got async event : port error")
    # then
    assert vote is not None
    assert vote.category == "nic"
    assert vote.probability >= tc.MIN_VOTE_PROBABILITY
    assert vote.agreeing >= 3
    assert vote.neighbours[0].category == "nic"
    assert [n.similarity for n in vote.neighbours] == sorted(
        (n.similarity for n in vote.neighbours), reverse=True
    )
    assert 0 < vote.weight <= tc.VOTE_WEIGHT


def test_it_abstains_without_a_model_on_unknown_words_and_on_an_old_model():
    model = tc.train(examples(("nic", NIC), ("gpu-hbm3-memory", ECC)))
    assert tc.vote(None, NIC[0]) is None
    assert tc.vote(model, "") is None
    assert tc.vote(model, "zzzz qqqq wwww") is None  # no word it learned
    assert tc.vote({**model, "version": tc.MODEL_VERSION + 1}, NIC[0]) is None


def test_two_categories_vote_through_the_binary_model():
    model = tc.train(examples(("nic", NIC), ("gpu-hbm3-memory", ECC)))
    vote = tc.vote(model, "CUDA error: uncorrectable ECC error encountered")
    assert vote is not None and vote.category == "gpu-hbm3-memory"


def test_cross_validated_accuracy_on_the_public_tuned_on_messages():
    # The tuned-on set and the held-out set's tune part (never its held-out part).
    rows = [
        json.loads(line)
        for line in (DATA / "triage_messages.jsonl").read_text().split("\n")
        if line
    ]
    rows += [
        row
        for row in map(json.loads, (DATA / "triage_heldout.jsonl").read_text().splitlines())
        if row["split"] == "tune"
    ]
    data = [tc.Example(row["message"], row["category"], i) for i, row in enumerate(rows)]
    first = tc.cross_validated_accuracy(data)
    assert first is not None
    accuracy, right, total = first
    print(f"\nclassifier cross-validated on {total} public messages: {right} ({accuracy:.1%})")
    assert total == len(tc.learnable(data))
    assert accuracy >= 0.8  # 86.5% measured (docs/triage.md)
    assert tc.cross_validated_accuracy(data) == first  # fixed folds: the same figure
