"""The accelerator peaks Chronicle ships with (dense BF16, FLOP/s per accelerator). The data
migration seeds them; admins edit or extend the table afterwards."""

from __future__ import annotations

from typing import NamedTuple


class AcceleratorSeed(NamedTuple):
    name: str
    aliases: str
    peak_flops_bf16: float
    source: str


ACCELERATOR_SEEDS: list[AcceleratorSeed] = [
    AcceleratorSeed(
        "A100",
        "A100-SXM, A100 SXM4, A100-80GB, A100-40GB",
        312e12,
        "NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (dense)",
    ),
    AcceleratorSeed(
        "H100-SXM",
        "H100, H100 SXM, H100 SXM5, H100-80GB",
        989e12,
        "NVIDIA H100 Tensor Core GPU datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
        "989 dense",
    ),
    AcceleratorSeed(
        "H200",
        "H200-SXM, H200 SXM",
        989e12,
        "NVIDIA H200 Tensor Core GPU datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
        "989 dense",
    ),
    AcceleratorSeed(
        "B200",
        "B200-SXM, HGX B200",
        2250e12,
        "NVIDIA HGX B200 datasheet: BF16 Tensor Core 4.5 PFLOPS with sparsity, 2.25 dense",
    ),
    AcceleratorSeed(
        "MI300X",
        "AMD MI300X, Instinct MI300X",
        1307.4e12,
        "AMD Instinct MI300X data sheet: BF16 1,307.4 TFLOPS dense",
    ),
    AcceleratorSeed(
        "TPU v4",
        "TPUv4, v4",
        275e12,
        "Google Cloud TPU v4 documentation: 275 TFLOPS peak BF16 per chip",
    ),
    AcceleratorSeed(
        "TPU v5e",
        "TPUv5e, v5e, v5litepod",
        197e12,
        "Google Cloud TPU v5e documentation: 197 TFLOPS peak BF16 per chip",
    ),
]
