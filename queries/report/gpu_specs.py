"""Datasheet peaks of the GPUs tracegraph knows, for the roofline of `op_perf`: dense (no
sparsity) tensor-core / matrix-core TFLOP/s per data type, vector FP32 TFLOP/s, and HBM
bandwidth. The trace's `deviceProperties` name picks one (`spec_for`); `report --gpu NAME`
overrides it. Vendors' published figures (NVIDIA's and AMD's product pages): what the silicon
can do at its boost clock, not what a kernel achieves (TraceLens ships measured "max
achievable" figures, some 30-45% lower)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    name: str
    matrix_tflops: dict[str, float]  # by precision: bf16, fp16, fp8, tf32, fp32, fp64
    vector_tflops: float  # FP32 on the CUDA cores / stream processors
    hbm_tbps: float  # memory bandwidth, TB/s

    def peak_tflops(self, precision: str, matrix: bool) -> float | None:
        """The peak for work of this precision on the matrix units (else the vector ones)."""
        if not matrix:
            return self.vector_tflops if precision in ("fp32", "bf16", "fp16") else None
        return self.matrix_tflops.get(precision)


SPECS = {
    s.name: s
    for s in (
        GpuSpec(
            "H100 SXM",
            {
                "bf16": 989.4,
                "fp16": 989.4,
                "fp8": 1978.9,
                "tf32": 494.7,
                "fp32": 66.9,
                "fp64": 66.9,
            },
            66.9,
            3.35,
        ),  # fmt: skip
        GpuSpec(
            "H100 PCIe",
            {
                "bf16": 756.5,
                "fp16": 756.5,
                "fp8": 1513.0,
                "tf32": 378.0,
                "fp32": 51.2,
                "fp64": 51.2,
            },
            51.2,
            2.0,
        ),  # fmt: skip
        GpuSpec(
            "H200",
            {
                "bf16": 989.4,
                "fp16": 989.4,
                "fp8": 1978.9,
                "tf32": 494.7,
                "fp32": 66.9,
                "fp64": 66.9,
            },
            66.9,
            4.8,
        ),  # fmt: skip
        GpuSpec(
            "B200",
            {
                "bf16": 2250.0,
                "fp16": 2250.0,
                "fp8": 4500.0,
                "tf32": 1100.0,
                "fp32": 75.0,
                "fp64": 37.0,
            },
            75.0,
            8.0,
        ),  # fmt: skip
        GpuSpec(
            "A100",
            {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
            19.5,
            2.039,
        ),  # fmt: skip
        GpuSpec("V100", {"fp16": 125.0, "fp32": 15.7, "fp64": 7.8}, 15.7, 0.9),
        GpuSpec(
            "MI300X",
            {
                "bf16": 1307.4,
                "fp16": 1307.4,
                "fp8": 2614.9,
                "tf32": 653.7,
                "fp32": 163.4,
                "fp64": 163.4,
            },
            163.4,
            5.3,
        ),  # fmt: skip
        GpuSpec(
            "MI325X",
            {
                "bf16": 1307.4,
                "fp16": 1307.4,
                "fp8": 2614.9,
                "tf32": 653.7,
                "fp32": 163.4,
                "fp64": 163.4,
            },
            163.4,
            6.0,
        ),  # fmt: skip
        GpuSpec("MI250X", {"bf16": 383.0, "fp16": 383.0, "fp32": 95.7, "fp64": 95.7}, 47.9, 3.2),
        GpuSpec("MI250", {"bf16": 362.1, "fp16": 362.1, "fp32": 90.5, "fp64": 90.5}, 45.3, 3.2),
        GpuSpec("MI210", {"bf16": 181.0, "fp16": 181.0, "fp32": 45.3, "fp64": 45.3}, 22.6, 1.6),
    )
}
# a device name as traces write it -> the spec (first match wins: the specific before the
# general, `H100 PCIe` before `H100`)
_PATTERNS = (
    (r"H100.*PCIe", "H100 PCIe"), (r"H100|GH200", "H100 SXM"), (r"H200", "H200"),
    (r"B200|GB200", "B200"), (r"A100", "A100"), (r"V100", "V100"), (r"MI325", "MI325X"),
    (r"MI300", "MI300X"), (r"MI250X", "MI250X"), (r"MI250", "MI250"), (r"MI210", "MI210"),
)  # fmt: skip


def spec_for(device_name: str | None) -> GpuSpec | None:
    """The spec of a device as the trace names it (`NVIDIA H100 80GB HBM3`, `AMD Instinct
    MI300X`) or as a user names it (`h100`, `mi300x`); None where unknown."""
    if not device_name:
        return None
    for pattern, name in _PATTERNS:
        if re.search(pattern, device_name, re.IGNORECASE):
            return SPECS[name]
    return None
