"""Auto-triage's reading by meaning: what the public labelled messages most like this one were
filed under. A vote beside the rules of logbook.autotriage, for messages no pattern was
written for.

- The message becomes a sentence embedding (logbook.triage_embedding: all-MiniLM-L6-v2 in
  numpy), compared with the embeddings of the labelled public messages the rules were tuned on
  (tests/data: the 121-message set and the tune parts of the two later sets, never a held-out
  message) and of one description per category (its name and its runbook's "Check" words).
- The labelled set also holds a class that names no cause (NO_CAUSE: generic exits and
  failures written for Chronicle, tests/data/triage_nocause.jsonl). The vote abstains when
  that class wins or the winner leads it by less than MARGIN: "the job exited" is like
  every labelled message a little and is evidence of none. The vote's probability also
  falls with the distance to the nearest labelled vector (closeness), and
  logbook.autotriage caps what a vote may raise a confidence to (VOTE_CAP).
- Two readings of those neighbours, averaged: the categories of the K nearest (weighted by
  similarity ** POWER), and a multinomial logistic regression over the embeddings (C, class
  weights balanced). The vote is the likeliest category, weighed VOTE_WEIGHT times its probability
  as one of the job's words (logbook.triage_combine): it outvotes a weaker rule of another
  family, corroborates one of its own, and never moves a DCGM event on one of the
  interruption's hosts (those come first).
- Every choice above (the classifier, K, POWER, C, the descriptions, VOTE_WEIGHT) was made by
  cross-validation on the tune messages only: `python -m bench.triage_semantic`, whose
  figures docs/triage.md reports with the held-out parts, measured once with this method.
- The labelled set ships as numbers (`logbook/data/triage_prior.npz`: each message's unit
  vector, category, id and source; the regression's weights), written by
  `python -m bench.triage_semantic --write-prior`: a worker embeds only the message it reads.
- Without the model package (or the prior file) `vote` returns None and the rules read alone.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from logbook import triage_embedding
from logbook.autotriage import EvidenceItem, category_name

PRIOR_FILE = Path(__file__).resolve().parent / "data" / "triage_prior.npz"
PRIOR_VERSION = 2
# Chosen by cross-validation on the tune messages (module docstring).
K = 3
POWER = 4
C = 10.0
VOTE_WEIGHT = 1.0
# The label of the messages that name no cause (no taxonomy row: it is never suggested).
NO_CAUSE = "no-cause"
# The least lead of the voted category over NO_CAUSE's probability (chosen by the CV).
MARGIN = 0.1
# Below this cosine similarity to every labelled message the text reads like none of them
# ("", "hello world" score under 0.2; the least similar tune message to the rest, 0.29).
MIN_SIMILARITY = 0.3
# The vote's probability falls linearly from this similarity of the nearest labelled vector
# down to MIN_SIMILARITY: a text like no labelled message is little evidence of any.
FULL_SIMILARITY = 0.6
# The embedding reads 256 tokens, about 1,000 characters: longer text is not read anyway.
MESSAGE_MAX_CHARS = 4_000
DESCRIPTION_PREFIX = "category:"
RULE = "embedding"


@dataclass(frozen=True)
class Nearest:
    id: str
    category: str
    similarity: float
    source: str


@dataclass(frozen=True)
class SemanticVote:
    category: str
    probability: float
    # The nearest labelled messages of the voted category, most similar first.
    nearest: tuple[Nearest, ...]

    @property
    def weight(self) -> float:
        return round(VOTE_WEIGHT * self.probability, 4)


@dataclass(frozen=True)
class Prior:
    """The labelled vectors and the regression fitted on them."""

    vectors: np.ndarray  # (n, 384), unit rows
    categories: np.ndarray  # (n,) slugs
    ids: np.ndarray
    sources: np.ndarray
    classes: np.ndarray  # the regression's classes, (c,)
    coef: np.ndarray  # (c, 384)
    intercept: np.ndarray  # (c,)

    def readings(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the K nearest's probability per class, the regression's, the similarity to each
        labelled vector)."""
        similarity = self.vectors @ vector
        index = {slug: i for i, slug in enumerate(self.classes)}
        knn = np.zeros(len(self.classes))
        for i in np.argsort(-similarity, kind="stable")[:K]:
            knn[index[self.categories[i]]] += max(float(similarity[i]), 0.0) ** POWER
        knn = knn / knn.sum() if knn.sum() > 0 else knn
        scores = self.coef @ vector + self.intercept
        exps = np.exp(scores - scores.max())
        return knn, exps / exps.sum(), similarity

    def probabilities(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(per class probability: the two readings averaged, similarity to each vector)."""
        knn, regression, similarity = self.readings(vector)
        return (knn + regression) / 2.0, similarity

    def decide(self, probabilities: np.ndarray, margin: float = MARGIN) -> int | None:
        """The voted class's index, or None when the likeliest names no cause or leads the
        no-cause class by less than `margin`."""
        best = int(np.argmax(probabilities))
        none = np.flatnonzero(self.classes == NO_CAUSE)
        if none.size == 0:
            return best
        if best == int(none[0]) or probabilities[best] - probabilities[none[0]] < margin:
            return None
        return best

    def vote_vector(self, vector: np.ndarray) -> SemanticVote | None:
        probabilities, similarity = self.probabilities(vector.astype(np.float32))
        if float(similarity.max()) < MIN_SIMILARITY:
            return None
        best = self.decide(probabilities)
        if best is None:
            return None
        category = str(self.classes[best])
        probability = float(probabilities[best]) * closeness(float(similarity.max()))
        order = np.argsort(-similarity, kind="stable")
        nearest = tuple(
            Nearest(
                str(self.ids[i]),
                category,
                round(float(similarity[i]), 3),
                str(self.sources[i]),
            )
            for i in order
            if self.categories[i] == category
        )[:K]
        return SemanticVote(category, round(probability, 4), nearest)


def closeness(similarity: float, full: float | None = FULL_SIMILARITY) -> float:
    """What the nearest labelled vector's similarity leaves of a vote: 1 from `full` on (or
    always, when None), 0 at MIN_SIMILARITY."""
    if full is None:
        return 1.0
    return min(max((similarity - MIN_SIMILARITY) / (full - MIN_SIMILARITY), 0.0), 1.0)


def category_descriptions() -> list[tuple[str, str]]:
    """(slug, text) per seeded category: its name, its group and its runbook's "Check"
    paragraph without links or markup (a category with no labelled message is still one)."""
    from logbook.runbooks import RUNBOOKS
    from logbook.taxonomy import ROOT_CAUSE_SEEDS

    rows = []
    for seed in ROOT_CAUSE_SEEDS:
        text = f"{seed.name} ({seed.group})"
        check = re.search(r"\*\*Check\*\*(.*?)(?:\n\n|$)", RUNBOOKS.get(seed.slug, ""), re.S)
        if check:
            words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", check.group(1))
            text += ": " + words.replace("`", "").replace("\n", " ").strip()
        rows.append((seed.slug, text))
    return rows


def fit_prior(
    vectors: np.ndarray, categories: Sequence[str], ids: Sequence[str], sources: Sequence[str]
) -> Prior:
    """A prior over labelled unit vectors (scikit-learn only here: the worker reads the
    stored weights)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, max_iter=3000, class_weight="balanced")
    model.fit(vectors, list(categories))
    return Prior(
        vectors=np.asarray(vectors, dtype=np.float32),
        categories=np.asarray(categories),
        ids=np.asarray(ids),
        sources=np.asarray(sources),
        classes=np.asarray(model.classes_),
        coef=model.coef_.astype(np.float32),
        intercept=model.intercept_.astype(np.float32),
    )


def prior_save(prior: Prior, path: Path = PRIOR_FILE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        version=np.asarray(PRIOR_VERSION),
        # float16: half the file, and a cosine changes by under 0.001.
        vectors=prior.vectors.astype(np.float16),
        categories=prior.categories.astype(str),
        ids=prior.ids.astype(str),
        sources=prior.sources.astype(str),
        classes=prior.classes.astype(str),
        coef=prior.coef,
        intercept=prior.intercept,
    )


def prior_load(path: Path = PRIOR_FILE) -> Prior | None:
    """The stored prior, or None when the file is missing or of another version (no pickles:
    loading runs no code)."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as data:
        if int(data["version"]) != PRIOR_VERSION:
            return None
        vectors = data["vectors"].astype(np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return Prior(
            vectors,
            data["categories"],
            data["ids"],
            data["sources"],
            data["classes"],
            data["coef"].astype(np.float32),
            data["intercept"].astype(np.float32),
        )


_LOCK = threading.Lock()
_PRIOR: dict[str, Prior | None] = {}


def prior() -> Prior | None:
    """The process's prior, loaded on first use."""
    with _LOCK:
        if "prior" not in _PRIOR:
            _PRIOR["prior"] = prior_load()
        return _PRIOR["prior"]


@functools.lru_cache(maxsize=256)
def _embedding(text: str) -> np.ndarray | None:
    # A pending suggestion is remade whenever evidence arrives: its message is read once.
    model = triage_embedding.encoder()
    return None if model is None else model.encode([text])[0]


def vote(message: str) -> SemanticVote | None:
    """The vote on one message, or None: no model package or prior, an empty message, or one
    that reads like no labelled message (MIN_SIMILARITY)."""
    text = (message or "")[:MESSAGE_MAX_CHARS]
    if not text.strip():
        return None
    book = prior()
    if book is None:
        return None
    vector = _embedding(text)
    return None if vector is None else book.vote_vector(vector)


def vote_evidence(
    message: str, occurred_at: datetime | None, names: Mapping[str, str] | None = None
) -> list[EvidenceItem]:
    """The vote as one evidence item ("Reads like NIC (nearest labelled: …)"), linked to the
    public source of the nearest labelled message; nothing when `vote` abstains."""
    result = vote(message)
    if result is None or not result.nearest:
        return []
    name = category_name(result.category, names)
    first = result.nearest[0]
    label = (
        f"the description of {name}"
        if first.id.startswith(DESCRIPTION_PREFIX)
        else f"{first.id}, {first.similarity:.2f} similar"
    )
    text = (
        f"Reads like {name} (nearest labelled: {label}; public messages, {result.probability:.0%})"
    )
    return [
        EvidenceItem(
            "semantic",
            occurred_at,
            text,
            first.source,
            result.category,
            result.weight,
            component=name,
            rule=RULE,
        )
    ]
