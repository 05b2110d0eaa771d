"""Achieved throughput of each operator x shape against its GPU's roofline (`op_perf`): from an
`op_shapes` row (the call's recorded arguments and its kernels' busy time per call) and the
model of its work (`perf_model.op_work`), its TFLOP/s, TB/s and FLOPs per byte; with the GPU's
peaks (`gpu_specs`), the time the roofline allows (the longer of the compute and the memory
time at peak), whether compute or memory bounds it, and how close the kernels came (the
roofline's time as a share of theirs: 100% is at the roofline)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa

from tracegraph.ingest.edgesets.records import rank_property
from tracegraph.ingest.store import GraphStore

from .analyses import Row
from .gpu_specs import GpuSpec, spec_for
from .perf_model import op_work


def op_perf_rows(
    shapes: Sequence[Row], gpus: Mapping[int, str | None], override: str | None = None
) -> list[Row]:
    """One row per `op_shapes` row a model covers, in their order. `gpus`: each rank's device
    name as its trace gives it; `override` (`report --gpu`) names the GPU of the ranks whose
    trace names none tracegraph knows."""
    out = []
    for row in shapes:
        work = op_work(
            row["name"], _value(row["input_dims"]), _value(row["input_types"]),
            _value(row["concrete_inputs"]),
        )  # fmt: skip
        per_call_ns = row["gpu_mean_ns"]
        if work is None or per_call_ns <= 0 or row["category"] == "memcpy":
            continue  # a copy between host and device is bound by its link, not by HBM
        spec = spec_for(gpus.get(row["rank"])) or spec_for(override)
        out.append(
            {
                "rank": row["rank"],
                "name": row["name"],
                "category": row["category"],
                "input_dims": row["input_dims"],
                "input_types": row["input_types"],
                "input_strides": row["input_strides"],
                "concrete_inputs": row["concrete_inputs"],
                "count": row["count"],
                "gpu_mean_ns": per_call_ns,
                "gflop": work.flops / 1e9,
                "mbytes": work.bytes / 1e6,
                "tflops": work.flops / per_call_ns / 1e3,
                "tbps": work.bytes / per_call_ns / 1e3,
                "flops_per_byte": work.flops / work.bytes if work.bytes else 0.0,
                "precision": work.precision,
                **_roofline(spec, work.flops, work.bytes, work.matrix, work.precision, per_call_ns),
            }  # fmt: skip
        )
    return out


def _roofline(
    spec: GpuSpec | None, flops: float, moved: float, matrix: bool, precision: str, ns: float
) -> Row:
    peak = spec.peak_tflops(precision, matrix) if spec is not None else None
    if spec is None or peak is None:  # unknown GPU, or no peak for this precision
        return {"gpu": spec.name if spec else "", "peak_tflops": None,
                "peak_tbps": spec.hbm_tbps if spec else None, "bound": "",
                "roofline_pct": None}  # fmt: skip
    compute_ns = flops / peak / 1e3
    memory_ns = moved / spec.hbm_tbps / 1e3
    return {
        "gpu": spec.name,
        "peak_tflops": peak,
        "peak_tbps": spec.hbm_tbps,
        "bound": "compute" if compute_ns >= memory_ns else "memory",
        "roofline_pct": 100.0 * max(compute_ns, memory_ns) / ns,
    }


def rank_gpus(store: GraphStore, run: str) -> dict[int, str | None]:
    """Each rank's GPU as its trace names it (None: unnamed, or a database from before
    tracegraph kept it)."""
    return rank_property(store, run, "gpu")


def _value(text: str) -> object:
    return json.loads(text) if text else None


_I, _F, _S = pa.int64(), pa.float64(), pa.string()
SCHEMA = pa.schema(
    [("rank", _I), ("name", _S), ("category", _S), ("input_dims", _S), ("input_types", _S),
     ("input_strides", _S), ("concrete_inputs", _S), ("count", _I), ("gpu_mean_ns", _F),
     ("gflop", _F), ("mbytes", _F), ("tflops", _F),
     ("tbps", _F), ("flops_per_byte", _F), ("precision", _S), ("gpu", _S), ("peak_tflops", _F),
     ("peak_tbps", _F), ("bound", _S), ("roofline_pct", _F)]
)  # fmt: skip
