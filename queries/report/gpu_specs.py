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
        if not matrix:  # elementwise work of any type runs on the vector units
            return self.vector_tflops
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
            "H100 NVL",
            {
                "bf16": 835.5,
                "fp16": 835.5,
                "fp8": 1670.5,
                "tf32": 417.5,
                "fp32": 60.0,
                "fp64": 60.0,
            },
            60.0,
            3.9,
        ),  # fmt: skip
        GpuSpec(
            "GH200",
            {
                "bf16": 989.4,
                "fp16": 989.4,
                "fp8": 1978.9,
                "tf32": 494.7,
                "fp32": 66.9,
                "fp64": 66.9,
            },
            66.9,
            4.0,
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
            "A100 80GB SXM",
            {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
            19.5,
            2.039,
        ),  # fmt: skip
        GpuSpec(
            "A100 80GB PCIe",
            {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
            19.5,
            1.935,
        ),  # fmt: skip
        GpuSpec(
            "A100 40GB",
            {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
            19.5,
            1.555,
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
            "MI300A",
            {
                "bf16": 980.6,
                "fp16": 980.6,
                "fp8": 1961.2,
                "tf32": 490.3,
                "fp32": 122.6,
                "fp64": 122.6,
            },
            122.6,
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
        # an MI250X or MI250 is two dies, each a device of its own to PyTorch: one die's share
        GpuSpec("MI250X", {"bf16": 191.5, "fp16": 191.5, "fp32": 47.9, "fp64": 47.9}, 23.9, 1.6),
        GpuSpec("MI250", {"bf16": 181.0, "fp16": 181.0, "fp32": 45.3, "fp64": 45.3}, 22.6, 1.6),
        GpuSpec("MI210", {"bf16": 181.0, "fp16": 181.0, "fp32": 45.3, "fp64": 45.3}, 22.6, 1.6),
    )
}
# a device name as traces write it -> the spec (first match wins: the specific before the
# general, `H100 PCIe` before `H100`); an A100 whose name says no 80GB is a 40GB part (the
# PG509-200 of HTA's traces has 40 GB)
_PATTERNS = (
    (r"GH200", "GH200"), (r"H100.*NVL", "H100 NVL"), (r"H100.*PCIe", "H100 PCIe"),
    (r"H100", "H100 SXM"), (r"H200", "H200"), (r"B200|GB200", "B200"),
    (r"A100.*80GB.*PCIe", "A100 80GB PCIe"), (r"A100.*80GB", "A100 80GB SXM"),
    (r"A100", "A100 40GB"), (r"V100", "V100"), (r"MI325", "MI325X"), (r"MI300A", "MI300A"),
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
