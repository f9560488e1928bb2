"""Auto-triage's second opinion: a text classifier trained on a project's own triaged
incidents (what on-call filed each message as), used beside the rules of logbook.autotriage.

Pure functions over plain data (scikit-learn and numpy, no ORM): the worker gathers the
examples (logbook.selectors.triage_learning), trains and stores the result as JSON
(logbook.services.triage_learning), and each suggestion asks the stored model for a vote.

- TF-IDF over the message's words and short codes (XID numbers, `NET/IB`, `mlx5_3`), then a
  multinomial logistic regression: small data (tens to thousands of incidents), a model a
  person can read (the weights are words), trained in well under a second.
- Only categories with MIN_EXAMPLES_PER_CATEGORY examples or more are learned, and only when
  there are at least two of them: a vote needs alternatives it beat.
- The model is stored as numbers (vocabulary, idf, weights), not pickled: loading it runs no
  code, and it survives a scikit-learn upgrade.
- A vote says why in on-call's words: how many of the most similar triaged incidents were
  filed under the voted category ("3 confirmed incidents with similar messages were NIC").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

MODEL_VERSION = 1
# A category needs this many triaged incidents before the classifier learns it.
MIN_EXAMPLES_PER_CATEGORY = 5
MIN_CATEGORIES = 2
# Longest message read (a pasted log can be megabytes; the rules read 64,000 characters).
MESSAGE_MAX_CHARS = 8_000
MAX_FEATURES = 4_000
# Words, and the codes failure messages are made of: XID numbers, NET/IB, mlx5_3, 0x1f.
TOKEN_PATTERN = r"(?u)\b[a-zA-Z][a-zA-Z0-9_]+\b|\b\d{2,3}\b|\b[A-Z]+/[A-Z]+\b"
# The evidence line counts the category among this many most similar triaged incidents.
NEIGHBOURS = 5
# Below this cosine similarity an incident is not "similar".
MIN_SIMILARITY = 0.2
# A vote weighs its probability times this: enough to outvote a symptom (the NCCL watchdog
# at 0.5 steps aside for any cause at 0.3) or a bare traceback, never an XID or DCGM event.
VOTE_WEIGHT = 0.6
# Below this probability the classifier abstains.
MIN_VOTE_PROBABILITY = 0.4
CV_FOLDS = 5


@dataclass(frozen=True)
class Example:
    """One triaged incident: its message and the category on-call filed it under."""

    message: str
    category: str
    incident_id: int | None = None


@dataclass(frozen=True)
class Neighbour:
    incident_id: int | None
    category: str
    similarity: float


@dataclass(frozen=True)
class Vote:
    """The classifier's opinion of one message: the category, its probability, and the most
    similar triaged incidents (most similar first) behind it."""

    category: str
    probability: float
    neighbours: tuple[Neighbour, ...]

    @property
    def agreeing(self) -> int:
        """How many of the similar incidents were filed under the voted category."""
        return sum(1 for item in self.neighbours if item.category == self.category)

    @property
    def weight(self) -> float:
        return round(VOTE_WEIGHT * self.probability, 4)


def learnable(examples: Sequence[Example]) -> list[Example]:
    """The examples the classifier may learn from: a message, and a category with at least
    MIN_EXAMPLES_PER_CATEGORY of them. Empty when fewer than MIN_CATEGORIES remain."""
    usable = [item for item in examples if item.message.strip() and item.category]
    counts = Counter(item.category for item in usable)
    kept = [item for item in usable if counts[item.category] >= MIN_EXAMPLES_PER_CATEGORY]
    return kept if len({item.category for item in kept}) >= MIN_CATEGORIES else []


def _vectorizer(vocabulary: Mapping[str, int] | None = None) -> TfidfVectorizer:
    return TfidfVectorizer(
        lowercase=True,
        token_pattern=TOKEN_PATTERN,
        ngram_range=(1, 2),
        sublinear_tf=True,
        max_features=MAX_FEATURES,
        vocabulary=vocabulary,
    )


def _text(message: str) -> str:
    return message[:MESSAGE_MAX_CHARS]


def _fit(examples: Sequence[Example]) -> tuple[TfidfVectorizer, LogisticRegression, Any]:
    vectorizer = _vectorizer()
    matrix = vectorizer.fit_transform([_text(item.message) for item in examples])
    # newton-cg: the same fit as lbfgs here, in a fraction of the time on small sparse data.
    model = LogisticRegression(solver="newton-cg", C=10.0, max_iter=200)
    model.fit(matrix, [item.category for item in examples])
    return vectorizer, model, matrix


def train(examples: Sequence[Example]) -> dict[str, Any] | None:
    """A JSON-able model of the learnable examples, or None when there is not enough to learn
    (see `learnable`). Keeps each example's sparse vector, for the neighbours of a vote."""
    kept = learnable(examples)
    if not kept:
        return None
    vectorizer, model, matrix = _fit(kept)
    rows = matrix.tocsr()
    neighbours = []
    for index, item in enumerate(kept):
        row = rows.getrow(index)
        neighbours.append(
            {
                "id": item.incident_id,
                "category": item.category,
                "vector": {
                    str(col): round(float(val), 5)
                    for col, val in zip(row.indices, row.data, strict=True)
                },
            }
        )
    return {
        "version": MODEL_VERSION,
        "vocabulary": {term: int(col) for term, col in vectorizer.vocabulary_.items()},
        "idf": [round(float(value), 6) for value in vectorizer.idf_],
        "classes": [str(name) for name in model.classes_],
        "coef": [[round(float(value), 6) for value in row] for row in model.coef_],
        "intercept": [round(float(value), 6) for value in model.intercept_],
        "examples": neighbours,
        "counts": dict(Counter(item.category for item in kept)),
    }


def _transform(model: Mapping[str, Any], message: str) -> Any:
    vectorizer = _vectorizer(vocabulary=model["vocabulary"])
    vectorizer.idf_ = np.asarray(model["idf"], dtype=float)
    return vectorizer.transform([_text(message)])


def _probabilities(model: Mapping[str, Any], vector: Any) -> np.ndarray:
    coef = np.asarray(model["coef"], dtype=float)
    scores = np.asarray(vector @ coef.T).ravel() + np.asarray(model["intercept"], dtype=float)
    if len(model["classes"]) == 2 and coef.shape[0] == 1:  # binary: one row for classes[1]
        positive = 1.0 / (1.0 + math.exp(-float(scores[0])))
        return np.asarray([1.0 - positive, positive])
    exps = np.exp(scores - scores.max())
    return exps / exps.sum()


def vote(model: Mapping[str, Any] | None, message: str) -> Vote | None:
    """The stored model's vote on one message, or None: no model, an unreadable one, an empty
    message, a message sharing no word with what it learned, or a probability below
    MIN_VOTE_PROBABILITY, or no similar triaged incident to show for it."""
    if not model or model.get("version") != MODEL_VERSION or not message.strip():
        return None
    vector = _transform(model, message)
    if vector.nnz == 0:
        return None
    probabilities = _probabilities(model, vector)
    best = int(np.argmax(probabilities))
    probability = float(probabilities[best])
    if probability < MIN_VOTE_PROBABILITY:
        return None
    terms = dict(zip(vector.indices.tolist(), vector.data.tolist(), strict=True))
    similar = []
    for item in model["examples"]:
        similarity = sum(terms.get(int(col), 0.0) * value for col, value in item["vector"].items())
        if similarity >= MIN_SIMILARITY:
            similar.append(Neighbour(item["id"], item["category"], round(similarity, 4)))
    similar.sort(key=lambda item: (-item.similarity, item.incident_id or 0))
    result = Vote(model["classes"][best], round(probability, 4), tuple(similar[:NEIGHBOURS]))
    return result if result.agreeing else None


def cross_validated_accuracy(examples: Sequence[Example]) -> tuple[float, int, int] | None:
    """(accuracy, right, total) of the classifier by stratified k-fold cross-validation over
    the learnable examples (k = CV_FOLDS, fewer when the smallest category is smaller), or
    None when there is not enough to learn. Deterministic (fixed fold seed)."""
    kept = learnable(examples)
    if not kept:
        return None
    labels = [item.category for item in kept]
    folds = min(CV_FOLDS, min(Counter(labels).values()))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    right = 0
    for train_index, test_index in splitter.split(np.zeros(len(kept)), labels):
        vectorizer, model, _ = _fit([kept[i] for i in train_index])
        predicted = model.predict(
            vectorizer.transform([_text(kept[i].message) for i in test_index])
        )
        right += sum(
            1 for i, guess in zip(test_index, predicted, strict=True) if guess == labels[i]
        )
    return right / len(kept), right, len(kept)
