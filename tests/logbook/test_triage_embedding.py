"""The numpy forward of all-MiniLM-L6-v2 (logbook.triage_embedding): unit vectors of 384,
meaning before words (a paraphrase scores above an unrelated text), the same vectors as the
reference implementation where it is installed, and no model without its package."""

from __future__ import annotations

import numpy as np
import pytest

from logbook import triage_embedding

pytestmark = pytest.mark.skipif(
    triage_embedding.model_dir() is None, reason="the model package is not installed"
)
TEXTS = [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA reported an illegal memory access while the kernel ran",
    "The cat sat on the mat.",
    "NCCL WARN NET/IB : Got completion with error 12, opcode 0, vendor err 129 " * 30,
]


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    model = triage_embedding.encoder()
    assert model is not None
    return model.encode(TEXTS)


def test_each_text_is_one_unit_vector_of_384(vectors):
    assert vectors.shape == (len(TEXTS), triage_embedding.DIMENSIONS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # a text longer than 256 tokens is read up to its 256th (and still one vector)
    ids, _mask = triage_embedding.encoder().tokens([TEXTS[3]])
    assert ids.shape == (1, triage_embedding.MAX_TOKENS)


def test_a_paraphrase_is_nearer_than_an_unrelated_text(vectors):
    paraphrase = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    assert paraphrase > 0.6 > unrelated + 0.3, (paraphrase, unrelated)


def test_a_batch_reads_each_text_as_alone(vectors):
    # Padding a short text to a long one's length changes nothing (the attention mask).
    alone = triage_embedding.encoder().encode([TEXTS[2]])[0]
    np.testing.assert_allclose(alone, vectors[2], atol=1e-5)


def test_the_vectors_are_the_reference_implementations():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = str(triage_embedding.model_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)
    ours = triage_embedding.encoder().encode(TEXTS)
    np.testing.assert_allclose(ours, reference.numpy(), atol=1e-5)


def test_without_the_package_there_is_no_encoder(monkeypatch):
    monkeypatch.setattr(triage_embedding.importlib.util, "find_spec", lambda _name: None)
    monkeypatch.setattr(triage_embedding, "_LOADED", {})
    assert triage_embedding.model_dir() is None
    assert triage_embedding.encoder() is None
