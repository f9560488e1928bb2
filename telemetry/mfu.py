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

from collections.abc import Sequence
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


@dataclass(frozen=True)
class ThroughputSums:
    """One attempt's throughput (tokens_per_s and step_time_s, by step) reduced to what the
    MFU means need, so that a run's mean reads one row per attempt instead of every step:
    PostgreSQL keeps these sums as points arrive (telemetry.models.ThroughputSum), `of`
    computes them from arrays. "Finite" leaves NaN and ±Infinity out."""

    steps: int  # steps with either metric
    first_step: int
    last_step: int
    reported_count: int  # finite tokens_per_s
    reported_sum: float
    timed_count: int  # finite step_time_s
    timed_positive_count: int  # finite step_time_s > 0
    timed_positive_sum_s: float
    # Steps with a finite tokens_per_s and a finite step time > 0: the weighted mean's terms.
    paired_weighted_sum: float  # Σ tokens_per_s · step_time_s
    paired_weight_s: float  # Σ step_time_s

    @classmethod
    def of(
        cls, steps: npt.ArrayLike, tokens_per_s: npt.ArrayLike, step_time_s: npt.ArrayLike
    ) -> ThroughputSums:
        """The sums of one attempt's steps (NaN where a metric is absent)."""
        step = np.asarray(steps, dtype=np.int64)
        reported = np.asarray(tokens_per_s, dtype=np.float64)
        timed = np.asarray(step_time_s, dtype=np.float64)
        finite = np.isfinite(reported)
        with np.errstate(invalid="ignore"):
            positive = np.isfinite(timed) & (timed > 0)
        paired = finite & positive
        return cls(
            steps=int(step.size),
            first_step=int(step.min()) if step.size else 0,
            last_step=int(step.max()) if step.size else 0,
            reported_count=int(finite.sum()),
            reported_sum=float(reported[finite].sum()),
            timed_count=int(np.isfinite(timed).sum()),
            timed_positive_count=int(positive.sum()),
            timed_positive_sum_s=float(timed[positive].sum()),
            paired_weighted_sum=float((reported[paired] * timed[paired]).sum()),
            paired_weight_s=float(timed[paired].sum()),
        )


def throughput_source(sums: Sequence[ThroughputSums], *, tokens_per_step: float | None) -> str:
    """Where throughput comes from: the job's tokens_per_s when it sent any finite one, else
    tokens per step over step_time_s, else nowhere ("")."""
    if any(one.reported_count for one in sums):
        return "tokens_per_s"
    if tokens_per_step and any(one.timed_count for one in sums):
        return "step_time_s"
    return ""


def mean_from_sums(
    sums: Sequence[ThroughputSums],
    scales: Sequence[float],
    *,
    source: str,
    weighted: bool,
    tokens_per_step: float | None,
) -> float:
    """mean_utilisation over every step of these attempts, from their sums: each attempt's
    MFU is its throughput times its scale (flops_per_token / (n_accelerators · peak_flops)).

    `weighted` when any step time of the window is known (mean_utilisation is then given
    the step times as weights, for the run and for each attempt alike): Σ scale ·
    tokens_per_s · step_time / Σ step_time over the steps with both (with throughput from
    step time, tokens_per_s · step_time is tokens_per_step, always weighted). Unweighted
    otherwise. NaN when nothing is left."""
    if source == "tokens_per_s" and weighted:
        top = sum(k * one.paired_weighted_sum for one, k in zip(sums, scales, strict=True))
        bottom = sum(one.paired_weight_s for one in sums)
        counted = sum(one.paired_weight_s > 0 for one in sums)
    elif source == "tokens_per_s":
        top = sum(k * one.reported_sum for one, k in zip(sums, scales, strict=True))
        bottom = sum(one.reported_count for one in sums)
        counted = bottom
    elif source == "step_time_s" and tokens_per_step:
        top = sum(
            k * tokens_per_step * one.timed_positive_count
            for one, k in zip(sums, scales, strict=True)
        )
        bottom = sum(one.timed_positive_sum_s for one in sums)
        counted = sum(one.timed_positive_count for one in sums)
    else:
        return float("nan")
    return top / bottom if counted and bottom > 0 else float("nan")
