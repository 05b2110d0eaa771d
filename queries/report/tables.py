"""The report's tables by name, and their schemas (per rank, per step, per collective)."""

from __future__ import annotations

import pyarrow as pa

from .allocator import SCHEMA as ALLOCATOR_SCHEMA
from .annotations import SCHEMA as ANNOTATIONS_SCHEMA
from .collectives import SCHEMAS as COLLECTIVE_SCHEMAS
from .counters import SCHEMA as COUNTERS_SCHEMA
from .kernel_sequences import SCHEMA as SEQUENCES_SCHEMA
from .launchers import CATEGORY_SCHEMA, SHAPE_SCHEMA
from .memory import SCHEMA as MEMORY_SCHEMA
from .modules import SCHEMA as MODULES_SCHEMA
from .nodes import SCHEMA as NODES_SCHEMA
from .op_perf import SCHEMA as OP_PERF_SCHEMA
from .spread import SCHEMA as SPREAD_SCHEMA
from .unmatched import SCHEMA as UNMATCHED_SCHEMA

_I, _F, _S = pa.int64(), pa.float64(), pa.string()
TABLES = {
    "spread": SPREAD_SCHEMA,
    "nodes": NODES_SCHEMA,
    "steps": pa.schema(
        [("rank", _I), ("step", _I), ("step_ns", _I), ("gpu_work", _I), ("kernel_time_ns", _I),
         ("busy_ns", _I), ("idle_ns", _I), ("compute_ns", _I), ("exposed_communication_ns", _I)]
    ),
    "temporal": pa.schema(
        [("rank", _I), ("kernel_time_ns", _I), ("idle_ns", _I), ("compute_ns", _I),
         ("non_compute_ns", _I), ("idle_pct", _F), ("compute_pct", _F), ("non_compute_pct", _F),
         ("idle_host_wait_ns", _I), ("idle_kernel_wait_ns", _I), ("idle_other_ns", _I)]
    ),
    "overlap": pa.schema(
        [("rank", _I), ("communication_ns", _I), ("overlapped_ns", _I), ("overlap_pct", _F)]
    ),
    "kernel_types": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("total_ns", _I), ("pct", _F)]
    ),
    "top_kernels": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("name", _S), ("names", _I), ("count", _I),
         ("total_ns", _I), ("mean_ns", _F), ("min_ns", _I), ("max_ns", _I), ("std_ns", _F)]
    ),
    "idle": pa.schema(
        [("rank", _I), ("stream", _I), ("idle_category", _S), ("idle_ns", _I), ("ratio", _F)]
    ),
    "launches": pa.schema(
        [("rank", _I), ("launches", _I)]
        + [(f"{p}_{s}_ns", _F) for p in ("call", "delay") for s in ("mean", "p50", "p95", "max")]
    ),
    "queues": pa.schema(
        [("rank", _I), ("stream", _I), ("launches", _I), ("max", _I), ("mean", _F),
         ("full_ns", _I)]
    ),
    "memory": MEMORY_SCHEMA,
    "gpu_annotations": ANNOTATIONS_SCHEMA,
    "allocator": ALLOCATOR_SCHEMA,
    "op_categories": CATEGORY_SCHEMA,
    "op_shapes": SHAPE_SCHEMA,
    "op_perf": OP_PERF_SCHEMA,
    "module_tree": MODULES_SCHEMA,
    "kernel_sequences": SEQUENCES_SCHEMA,
    "counters": COUNTERS_SCHEMA,
    **COLLECTIVE_SCHEMAS,
    "unmatched": UNMATCHED_SCHEMA,
}  # fmt: skip
