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


def _spec(
    name: str,
    fp16: float,
    bf16: float | None,
    fp8: float | None,
    tf32: float | None,
    fp32: float,
    fp64: float,
    vector: float,
    hbm_tbps: float,
) -> GpuSpec:
    """A GPU's peaks: dense fp16, bf16, fp8, tf32, fp32 and fp64 matrix TFLOP/s (None: no
    such units), vector FP32 TFLOP/s, HBM TB/s."""
    matrix = {"bf16": bf16, "fp16": fp16, "fp8": fp8, "tf32": tf32, "fp32": fp32, "fp64": fp64}
    return GpuSpec(name, {k: v for k, v in matrix.items() if v is not None}, vector, hbm_tbps)


# fmt: off
# name, dense fp16, bf16, fp8, tf32, fp32, fp64 (matrix), fp32 vector, HBM TB/s
_TABLE = (
    ("H100 SXM", 989.4, 989.4, 1978.9, 494.7, 66.9, 66.9, 66.9, 3.35),
    ("H100 PCIe", 756.5, 756.5, 1513.0, 378.0, 51.2, 51.2, 51.2, 2.0),
    ("H100 NVL", 835.5, 835.5, 1670.5, 417.5, 60.0, 60.0, 60.0, 3.9),
    ("GH200", 989.4, 989.4, 1978.9, 494.7, 66.9, 66.9, 66.9, 4.0),
    ("H200", 989.4, 989.4, 1978.9, 494.7, 66.9, 66.9, 66.9, 4.8),
    ("B200", 2250.0, 2250.0, 4500.0, 1100.0, 75.0, 37.0, 75.0, 8.0),
    ("A100 80GB SXM", 312.0, 312.0, None, 156.0, 19.5, 19.5, 19.5, 2.039),
    ("A100 80GB PCIe", 312.0, 312.0, None, 156.0, 19.5, 19.5, 19.5, 1.935),
    ("A100 40GB", 312.0, 312.0, None, 156.0, 19.5, 19.5, 19.5, 1.555),
    ("V100", 125.0, None, None, None, 15.7, 7.8, 15.7, 0.9),  # no bf16 units
    ("MI300X", 1307.4, 1307.4, 2614.9, 653.7, 163.4, 163.4, 163.4, 5.3),
    ("MI300A", 980.6, 980.6, 1961.2, 490.3, 122.6, 122.6, 122.6, 5.3),
    ("MI325X", 1307.4, 1307.4, 2614.9, 653.7, 163.4, 163.4, 163.4, 6.0),
    # an MI250X or MI250 is two dies, each a device of its own to PyTorch: one die's share
    ("MI250X", 191.5, 191.5, None, None, 47.9, 47.9, 23.9, 1.6),
    ("MI250", 181.0, 181.0, None, None, 45.3, 45.3, 22.6, 1.6),
    ("MI210", 181.0, 181.0, None, None, 45.3, 45.3, 22.6, 1.6),
)
# fmt: on
SPECS = {row[0]: _spec(*row) for row in _TABLE}
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
