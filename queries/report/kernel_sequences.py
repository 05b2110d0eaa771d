"""Frequent kernel sequences (`kernel_sequences`), as HTA's `get_frequent_cuda_kernel_sequences`
finds them: each call of an operator, the kernels launched inside it (their launching call is
held by the call or a call nested in it) in start order, and how often each sequence repeats,
with the kernels' summed time and the calls' CPU time.

The calls are the outermost ones whose name holds `op` (any CPU range: op, annotation, python
frame), or without `op` the outermost CPU ops (those Python called: `aten::linear`, not the
`aten::addmm` inside it; in the 2021 format, whose `Operator` ranges hold annotations and
ProfilerSteps too, those named `ns::op`); calls with fewer than `min_kernels` kernels are left
out. HTA starts from the calls at the shallowest depth any of them has, so that a call nested
deeper than the shallowest is not counted, and HTA 0.5.0 and traceinsight 0.6.1 stop with
"Unexpected case" on most traces with zero-length events (9 of the 12 shared GPU traces
tried).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.link import innermost_holding, nesting_depths, range_parents

from .analyses import Row
from .launchers import LaunchedKernels, launched_kernels
from .steps import StepWindow

MIN_KERNELS = 2  # a sequence (HTA's min_pattern_len defaults to 3)
CPU_RANGES = ("cpu_op", "user_annotation", "python_function", "Operator")
SEPARATOR = "|"  # between kernel names, as HTA writes a pattern

SCHEMA = pa.schema(
    [("rank", pa.int64()), ("op", pa.string()), ("sequence", pa.string()),
     ("kernels", pa.int64()), ("count", pa.int64()), ("kernel_ns", pa.int64()),
     ("cpu_ns", pa.int64()), ("first_ev_idx", pa.int64())]
)  # fmt: skip


def sequence_rows(
    rank: int,
    rows: pa.Table,
    window: StepWindow | None,
    top: int | None,
    op: str | None = None,
    min_kernels: int = MIN_KERNELS,
    kernels: LaunchedKernels | None = None,
    shallowest: bool = False,
) -> list[Row]:
    """The rank's `top` most frequent sequences (every one when None), most frequent first
    (then the most kernel time); with `window`, of the calls that start in it."""
    ranges = rows.select(["ev_idx", "cat", "name", "pid", "tid", "ts", "dur"]).filter(
        pc.is_in(pc.fill_null(rows["cat"], ""), value_set=pa.array(CPU_RANGES))
    )
    if ranges.num_rows == 0:
        return []
    kernels = launched_kernels(rows) if kernels is None else kernels
    if not kernels.n:
        return []
    names = pc.fill_null(ranges["name"], "")
    if op is None:  # the CPU ops: the 2021 format's `Operator` holds annotations too (no `::`)
        old_format_op = pc.and_(
            pc.equal(ranges["cat"], "Operator"), pc.match_substring(names, "::")
        )
        chosen = pc.or_(pc.equal(ranges["cat"], "cpu_op"), old_format_op)
    else:
        chosen = pc.match_substring(names, op)
    candidate = pc.fill_null(chosen, False).to_numpy(zero_copy_only=False)
    parent = range_parents(ranges)
    if shallowest:  # HTA's: only the candidates at the smallest depth any candidate has
        depth = nesting_depths(parent)
        candidate &= depth == depth[candidate].min(initial=np.iinfo(np.int64).max)
    # each kernel's call: the outermost candidate holding its launch (walking up from the
    # innermost range that holds it)
    level = innermost_holding(ranges, kernels.calls)
    call = np.full(kernels.n, -1, np.int64)
    while (held := level >= 0).any():
        call = np.where(held & candidate[np.maximum(level, 0)], level, call)
        level = np.where(held, parent[np.maximum(level, 0)], -1)
    ts = ints(ranges["ts"], 0)
    mine = call >= 0
    if window is not None:
        mine &= (ts[np.maximum(call, 0)] >= window.ts) & (ts[np.maximum(call, 0)] < window.end)
    if not mine.any():
        return []
    which = np.flatnonzero(mine)
    order = which[np.lexsort((which, kernels.ts[which], call[which]))]
    calls, first, counts = np.unique(call[order], return_index=True, return_counts=True)
    keep = counts >= min_kernels
    spent = (kernels.end - kernels.ts)[order]
    kernel_ns = np.add.reduceat(spent, first) if len(first) else np.zeros(0, np.int64)
    kernel_names = kernels.name[order].tolist()
    op_names = names.to_numpy(zero_copy_only=False)
    dur = ints(ranges["dur"], 0)
    ev_idx = ranges["ev_idx"].to_numpy()
    groups: dict[tuple[str, str], list[int]] = {}
    for k in np.flatnonzero(keep).tolist():
        c, f, n = int(calls[k]), int(first[k]), int(counts[k])
        key = (str(op_names[c]), SEPARATOR.join(kernel_names[f : f + n]))
        group = groups.setdefault(key, [n, 0, 0, 0, int(ev_idx[c]), int(ts[c])])
        group[1] += 1
        group[2] += int(kernel_ns[k])
        group[3] += int(dur[c])
        if int(ts[c]) < group[5]:
            group[4], group[5] = int(ev_idx[c]), int(ts[c])
    out = [
        {"rank": rank, "op": name, "sequence": sequence, "kernels": n, "count": count,
         "kernel_ns": spent_ns, "cpu_ns": cpu_ns, "first_ev_idx": first_idx}
        for (name, sequence), (n, count, spent_ns, cpu_ns, first_idx, _) in groups.items()
    ]  # fmt: skip
    out.sort(key=lambda r: (-r["count"], -r["kernel_ns"], r["op"], r["sequence"]))
    return out if top is None else out[:top]
