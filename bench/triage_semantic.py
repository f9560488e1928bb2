"""Choosing auto-triage's reading by meaning (logbook.triage_semantic) on the tune messages
only, and writing its prior.

Every figure here is a repeated stratified 5-fold cross-validation (3 repeats, fixed seed)
over the 354 tune messages (the 121-message set and the tune parts of triage_heldout.jsonl,
triage_corpus2.jsonl to triage_corpus6.jsonl; never a held-out
message), the category descriptions always on the training side. Each variant is read two ways:

- **with the rules as they stood before they were tuned on each message** ("untuned"): the
  catalogue at the commit before the message's set was read (git archive of that commit's
  logbook/, run in a subprocess). Held-out messages are read by rules that never saw them;
  this is the same condition on tune data (the untuned rules read 218 of 354, 62%; the
  current ones 46 of 71 held-out, 65%). The choice is made on this figure.
- with the current rules, which were tuned on these very messages (89%): an upper bound that
  says what a vote costs where the rules are already right.

    python -m bench.triage_semantic              # the comparison and CPU per message
    python -m bench.triage_semantic --write-prior  # logbook/data/triage_prior.npz
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import RepeatedStratifiedKFold

from bench.triage_prior import nocause_pool, tune_pool
from logbook import autotriage, triage_embedding
from logbook import triage_classifier as tc
from logbook import triage_combine as combine
from logbook import triage_semantic as ts

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CACHE = ROOT / "var" / "triage_semantic"
AT = datetime(2024, 7, 1, 3, 0, tzinfo=UTC)
REPEATS = 3
FOLDS = 5
VOTE_WEIGHTS = (0.6, 0.8, 1.0)
MARGINS = (0.0, 0.2, 0.3)
FULLS = (None, 0.5, 0.7)
# The rules before each set was read: (commit, file, which rows). The 121-message set landed
# in two commits (58, then 63 read after the rules were tuned on the 58).
FIRST_58 = "34a696a"
ERAS = (
    (f"{FIRST_58}^", "triage_messages.jsonl", "first 58"),
    ("2cfc6c1^", "triage_messages.jsonl", "next 63"),
    ("6bdbb60", "triage_heldout.jsonl", "tune"),
    ("91cb52b", "triage_corpus2.jsonl", "tune"),
    # corpus3 was committed (8db764b) before anything read it; no rule was written from it.
    ("8db764b", "triage_corpus3.jsonl", "tune"),
    # corpus4 landed (a5123dc) after logbook 0022; no rule was written from it.
    ("a5123dc", "triage_corpus4.jsonl", "tune"),
    # corpus5 landed (0e22544) before its tune part led to two rules (logbook 0023).
    ("0e22544", "triage_corpus5.jsonl", "tune"),
    # corpus6 landed (2d5316f) before anything read it; no rule was written from it.
    ("2d5316f", "triage_corpus6.jsonl", "tune"),
)
DUMP = """
import json, sys
from datetime import UTC, datetime
from logbook import autotriage as at
at_ = datetime(2024, 7, 1, 3, 0, tzinfo=UTC)
out = {}
for row in json.load(sys.stdin):
    items = at.message_evidence(at.IncidentFacts(message=row["message"], occurred_at=at_))
    out[row["id"]] = [[i.category, i.weight] for i in items if i.category and i.weight > 0]
print(json.dumps(out))
"""

Signals = list[tuple[str, float]]


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def untuned_signals(pool: Sequence[dict[str, str]]) -> list[Signals]:
    """Each tune message's rule signals from the catalogue that had not yet read it."""
    cache = CACHE / "untuned.json"
    if cache.exists():
        found = json.loads(cache.read_text())
        if all(row["id"] in found for row in pool):
            return [[(c, w) for c, w in found[row["id"]]] for row in pool]
    first = {
        json.loads(line)["id"]
        for line in _git("show", f"{FIRST_58}:tests/data/triage_messages.jsonl")
        .decode()
        .split("\n")
        if line.strip()
    }
    by_id = {row["id"]: row for row in pool}
    found = {}
    for commit, name, part in ERAS:
        rows = [
            by_id[json.loads(line)["id"]]
            for line in (DATA / name).read_text().splitlines()
            if line.strip() and json.loads(line)["id"] in by_id
        ]
        if part != "tune":
            rows = [row for row in rows if (row["id"] in first) == (part == "first 58")]
        with tempfile.TemporaryDirectory() as tmp:
            # The logbook app (and, from 6bdbb60 on, the evidence model it imports).
            present = _git("ls-tree", "--name-only", commit).decode().split()
            parts = [name for name in ("logbook", "diagnosis") if name in present]
            archive = _git("archive", "--format=tar", commit, *parts)
            with tarfile.open(fileobj=BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            done = subprocess.run(
                [sys.executable, "-c", DUMP],
                input=json.dumps(rows),
                cwd=tmp,
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONPATH": tmp},
            )
        found.update(json.loads(done.stdout))
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(found))
    return [[(c, w) for c, w in found[row["id"]]] for row in pool]


def current_signals(pool: Sequence[dict[str, str]]) -> list[Signals]:
    result = []
    for row in pool:
        facts = autotriage.IncidentFacts(message=row["message"], occurred_at=AT)
        items = autotriage.message_evidence(facts)
        result.append([(i.category, i.weight) for i in items if i.category and i.weight > 0])
    return result


def embeddings(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of the texts (cached by their hash under var/)."""
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    cache = CACHE / f"embeddings-{key}.npy"
    if cache.exists():
        return np.load(cache)
    model = triage_embedding.encoder()
    if model is None:
        raise SystemExit(f"the model package {triage_embedding.MODEL_PACKAGE} is not installed")
    vectors = model.encode([text[: ts.MESSAGE_MAX_CHARS] for text in texts])
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


CATEGORIES = autotriage.builtin_categories()


def combined(signals: Signals, vote: tuple[str, float] | None) -> str:
    """The category the message alone reads as (autotriage.suggest without evidence), with
    the vote as one more of the job's words."""
    items = [*signals, *([vote] if vote else [])]
    verdict = combine.weigh(
        [combine.Signal(c, w, key=i) for i, (c, w) in enumerate(items)], CATEGORIES
    )
    return verdict.category if verdict else "unknown"


def _semantic(
    knn: bool, regression: bool, margin: float = ts.MARGIN, full: float | None = ts.FULL_SIMILARITY
) -> Callable[..., list[tuple[str, float]]]:
    def fit(vectors, _texts, labels, test_vectors, _test_texts) -> list[tuple[str, float]]:
        n = len(labels)
        prior = ts.fit_prior(vectors, labels, [str(i) for i in range(n)], [""] * n)
        out = []
        for vector in test_vectors:
            near, learned, similarity = prior.readings(vector)
            probabilities = (near * knn + learned * regression) / (knn + regression)
            best = prior.decide(probabilities, margin)
            # An abstention is no vote: the rules read alone.
            out.append(
                ("", 0.0)
                if best is None
                else (
                    str(prior.classes[best]),
                    float(probabilities[best]) * ts.closeness(float(similarity.max()), full),
                )
            )
        return out

    return fit


def _tfidf(_vectors, texts, labels, _test_vectors, test_texts) -> list[tuple[str, float]]:
    vectorizer = tc._vectorizer()
    matrix = vectorizer.fit_transform(texts)
    model = LogisticRegression(C=ts.C, max_iter=3000, class_weight="balanced")
    model.fit(matrix, labels)
    probabilities = model.predict_proba(vectorizer.transform(test_texts))
    return [
        (str(model.classes_[i]), float(p[i]))
        for p, i in zip(probabilities, probabilities.argmax(1), strict=True)
    ]


CHOSEN = "embedding: kNN + regression (chosen)"
CLASSIFIERS: dict[str, Callable[..., list[tuple[str, float]]]] = {
    CHOSEN: _semantic(True, True),
    **{f"  same, no-cause margin {m}": _semantic(True, True, m) for m in MARGINS},
    **{f"  same, full similarity {f}": _semantic(True, True, full=f) for f in FULLS},
    "embedding: kNN (k=3, sim^4)": _semantic(True, False),
    "embedding: regression (C=10)": _semantic(False, True),
    "TF-IDF regression (C=10)": _tfidf,
}


def training_extra(descriptions: bool = True, causeless: bool = True) -> list[tuple[str, str]]:
    """(label, text) always on the training side: the category descriptions and the
    messages that name no cause."""
    described = ts.category_descriptions() if descriptions else []
    return described + ([(r["category"], r["message"]) for r in nocause_pool()] * causeless)


def cross_validate(
    pool: Sequence[dict[str, str]], descriptions: bool = True, causeless: bool = True
) -> dict:
    texts = [row["message"] for row in pool]
    labels = np.asarray([row["category"] for row in pool])
    described = training_extra(descriptions, causeless)
    vectors = embeddings(texts)
    extra = embeddings([text for _, text in described]) if described else np.zeros((0, 384))
    extra_labels = [slug for slug, _ in described]
    splitter = RepeatedStratifiedKFold(n_splits=FOLDS, n_repeats=REPEATS, random_state=0)
    with warnings.catch_warnings():  # the rarest categories have fewer than 5 messages
        warnings.simplefilter("ignore")
        splits = list(splitter.split(vectors, labels))
    predictions: dict[str, list[list[tuple[str, float]]]] = {}
    for name, fit in CLASSIFIERS.items():
        runs = [[("", 0.0)] * len(pool) for _ in range(REPEATS)]
        for n, (train, test) in enumerate(splits):
            guesses = fit(
                np.vstack([vectors[train], extra]),
                [texts[i] for i in train] + [text for _, text in described],
                [*labels[train], *extra_labels],
                vectors[test],
                [texts[i] for i in test],
            )
            for i, guess in zip(test, guesses, strict=True):
                runs[n // FOLDS][i] = guess
        predictions[name] = runs
    return {"labels": labels, "predictions": predictions}


def mean_right(labels: np.ndarray, guesses: Callable[[int, int], str]) -> float:
    """Messages read right, averaged over the repeats."""
    return float(
        np.mean(
            [sum(guesses(r, i) == labels[i] for i in range(len(labels))) for r in range(REPEATS)]
        )
    )


def per_category(labels: np.ndarray, guesses: Callable[[int, int], str]) -> dict[str, float]:
    right: Counter[str] = Counter()
    for r in range(REPEATS):
        for i, label in enumerate(labels):
            right[label] += guesses(r, i) == label
    return {c: right[c] / REPEATS for c in Counter(labels)}


def cpu_per_message(texts: Sequence[str]) -> tuple[float, float]:
    """(CPU seconds to load the model and prior, CPU seconds per message voted on)."""
    ts._embedding.cache_clear()
    started = time.process_time()
    ts.vote("warm-up: load the encoder and the prior")
    loaded = time.process_time() - started
    ts._embedding.cache_clear()
    started = time.process_time()
    for text in texts:
        ts.vote(text)
    return loaded, (time.process_time() - started) / len(texts)


def write_prior(pool: Sequence[dict[str, str]]) -> Path:
    pool = [*pool, *nocause_pool()]
    described = ts.category_descriptions()
    vectors = embeddings([row["message"] for row in pool] + [text for _, text in described])
    prior = ts.fit_prior(
        vectors,
        [row["category"] for row in pool] + [slug for slug, _ in described],
        [row["id"] for row in pool] + [ts.DESCRIPTION_PREFIX + slug for slug, _ in described],
        [row["source"] for row in pool] + ["" for _ in described],
    )
    ts.prior_save(prior)
    return ts.PRIOR_FILE


def print_variants(result: dict, views: dict[str, list[Signals]], labels: np.ndarray) -> None:
    for name, runs in result["predictions"].items():
        alone = mean_right(labels, lambda r, i, runs=runs: runs[r][i][0])
        line = f"  {name:38} alone {alone:6.1f}"
        for weight in VOTE_WEIGHTS:
            for view, signals in views.items():

                def guess(r, i, runs=runs, signals=signals, weight=weight):
                    category, p = runs[r][i]
                    return combined(signals[i], (category, weight * p))

                line += f" | a={weight} {view.split()[0]} {mean_right(labels, guess):6.1f}"
        print(line, flush=True)


def print_per_category(
    runs: list[list[tuple[str, float]]], views: dict[str, list[Signals]], labels: np.ndarray
) -> None:
    print(f"per category, chosen, vote weight {ts.VOTE_WEIGHT} (mean right of n)")
    tables = {}
    for view, signals in views.items():

        def final(r, i, signals=signals):
            category, p = runs[r][i]
            return combined(signals[i], (category, ts.VOTE_WEIGHT * p))

        def rules(_r, i, signals=signals):
            return combined(signals[i], None)

        tables[view] = (per_category(labels, rules), per_category(labels, final))
    print(f"  {'category':30} {'n':>3} {'untuned':>8} {'+vote':>6} {'current':>8} {'+vote':>6}")
    for category, n in Counter(labels).most_common():
        cells = [f"{tables[v][k][category]:6.1f}" for v in views for k in (0, 1)]
        print(f"  {category:30} {n:3d}   {'   '.join(cells)}")


def causeless_abstained(pool: Sequence[dict[str, str]]) -> dict[float, int]:
    """Per margin, how many of the no-cause messages the vote abstains on when each is left
    out of training (leave-one-out over them, the tune messages and descriptions in)."""
    causeless = nocause_pool()
    described = ts.category_descriptions()
    vectors = embeddings([r["message"] for r in pool] + [t for _, t in described])
    labels = [r["category"] for r in pool] + [slug for slug, _ in described]
    held = embeddings([r["message"] for r in causeless])
    found = dict.fromkeys((*MARGINS, ts.MARGIN), 0)
    for i in range(len(causeless)):
        rest = [j for j in range(len(causeless)) if j != i]
        train = np.vstack([vectors, held[rest]])
        n = len(train)
        prior = ts.fit_prior(train, labels + [ts.NO_CAUSE] * len(rest), [""] * n, [""] * n)
        probabilities, _ = prior.probabilities(held[i])
        for margin in found:
            found[margin] += prior.decide(probabilities, margin) is None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-prior", action="store_true", help="write the shipped prior")
    args = parser.parse_args()
    pool = tune_pool()
    if args.write_prior:
        print(f"wrote {write_prior(pool)} from {len(pool)} tune messages")
        return
    labels = np.asarray([row["category"] for row in pool])
    views = {"untuned rules": untuned_signals(pool), "current rules": current_signals(pool)}
    total = len(pool)
    print(f"{total} tune messages; {REPEATS}x stratified {FOLDS}-fold cross-validation")
    for view, signals in views.items():
        right = sum(combined(s, None) == label for s, label in zip(signals, labels, strict=True))
        print(f"  rules alone, {view:14} {right:6.1f} / {total}  {right / total:6.1%}")
    for descriptions, causeless in ((True, True), (True, False), (False, True)):
        result = cross_validate(pool, descriptions, causeless)
        print(f"in training: category descriptions {descriptions}, no-cause messages {causeless}")
        print_variants(result, views, labels)
        if descriptions and causeless:
            print_per_category(result["predictions"][CHOSEN], views, labels)
    abstained = causeless_abstained(pool)
    print(f"no-cause messages abstained on, leave-one-out of {len(nocause_pool())}: {abstained}")
    loaded, each = cpu_per_message([row["message"] for row in pool])
    print(f"CPU: {loaded:.2f} s to load the model and prior; {each * 1000:.0f} ms per message")


if __name__ == "__main__":
    main()
