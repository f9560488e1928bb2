"""Model FLOPs utilisation: pure maths, no database.

    flops_per_token = 6·N + 12·L·H·Q·T      (PaLM appendix B; nanoGPT and Megatron count so)
                    = 6·N + 6·L·H·Q·T       with causal attention (half the score matrix)
    MFU = tokens_per_s · flops_per_token / (n_accelerators · peak_flops)

N is the parameter count without embeddings, L layers, H heads, Q the head dimension and T the
sequence length. 6·N is the dense matmuls (2 forward + 4 backward FLOPs per parameter per
token); 12·L·H·Q·T is attention's QK^T and AV products, which grow with the sequence length.

A job that reports its own FLOPs per token, or says its count includes activation
recomputation, measures *hardware* FLOPs: the same ratio is then HFU, and the two must never be
compared as if they were one number.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class Utilisation(StrEnum):
    MFU = "MFU"
    HFU = "HFU"


def flops_per_token(
    *,
    n_params: float,
    n_layers: int,
    n_heads: int,
    head_dim: int,
    seq_len: int,
    causal: bool = False,
) -> float:
    """Training FLOPs per token (forward and backward), without recomputation. `causal`
    counts half of the attention term (6·L·H·Q·T): a causal mask leaves the upper half of
    the TxT scores uncomputed, which PaLM's full count includes."""
    for name, value in (
        ("n_params", n_params),
        ("n_layers", n_layers),
        ("n_heads", n_heads),
        ("head_dim", head_dim),
        ("seq_len", seq_len),
    ):
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")
    attention = 12.0 * n_layers * n_heads * head_dim * seq_len
    return 6.0 * n_params + (attention / 2 if causal else attention)


def mfu(
    *, tokens_per_s: float, flops_per_token: float, n_accelerators: int, peak_flops: float
) -> float:
    """Achieved FLOP/s over the cluster's peak, as a fraction (0.4 is 40%)."""
    if n_accelerators <= 0 or peak_flops <= 0:
        raise ValueError("n_accelerators and peak_flops must be > 0")
    return tokens_per_s * flops_per_token / (n_accelerators * peak_flops)


def mfu_array(
    tokens_per_s: npt.ArrayLike, *, flops_per_token: float, n_accelerators: int, peak_flops: float
) -> FloatArray:
    """`mfu` over an array of per-step throughputs (NaN stays NaN)."""
    if n_accelerators <= 0 or peak_flops <= 0:
        raise ValueError("n_accelerators and peak_flops must be > 0")
    values = np.asarray(tokens_per_s, dtype=np.float64)
    return values * (flops_per_token / (n_accelerators * peak_flops))


def tokens_per_s_from_step_time(
    step_time_s: npt.ArrayLike, *, tokens_per_step: float
) -> FloatArray:
    """Throughput when a job reports seconds per step rather than tokens per second."""
    times = np.asarray(step_time_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(times > 0, tokens_per_step / times, np.nan)


def label_for(*, job_reported_flops: bool, counts_recomputation: bool) -> Utilisation:
    """HFU when the FLOPs count is the job's own or includes recomputation; MFU otherwise."""
    return Utilisation.HFU if job_reported_flops or counts_recomputation else Utilisation.MFU


def mean_utilisation(values: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> float:
    """Mean over a window, ignoring non-finite steps.

    Weighted by step time when it is known: MFU over a period is the FLOPs done over the peak
    FLOPs available in that period, so a slow step must count for more than a fast one. NaN
    when nothing is left."""
    array = np.asarray(values, dtype=np.float64)
    if weights is None:
        keep = np.isfinite(array)
        return float(array[keep].mean()) if keep.any() else float("nan")
    weight = np.asarray(weights, dtype=np.float64)
    keep = np.isfinite(array) & np.isfinite(weight) & (weight > 0)
    if not keep.any():
        return float("nan")
    return float(np.average(array[keep], weights=weight[keep]))


@dataclass(frozen=True)
class MfuInputs:
    """Everything MFU needs about a run, with where each number came from."""

    flops_per_token: float
    flops_source: str  # "formula" or "job"
    n_accelerators: int
    peak_flops: float
    accelerator: str
    label: Utilisation
