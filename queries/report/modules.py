"""Where the time goes by `nn.Module` (`module_tree`): the python frames PyTorch names
`nn.Module: Linear_0` (traces profiled with `with_stack=True`) nest into a tree per thread; each
module's path is its ancestors' names (`MLP_0 > Linear_0`), and per path: how many calls, their
CPU time (inclusive), and the GPU work launched inside them: kernels whose launching call a
module holds, their busy time inclusive of the module's children (as TraceLens's
`build_nn_module_latency_tree` counts it, per call, summed over calls) and the part launched
outside any child (`self_gpu_ns`). Work of the backward pass, launched from autograd's threads,
is under no module. With `--step`, the calls that start in the step's window.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.link import ancestor_paths, innermost_holding, range_parents

from .analyses import Row
from .launchers import LaunchedKernels, busy_times, launched_kernels
from .steps import StepWindow

PREFIX = "nn.Module: "
SEPARATOR = " > "


def module_rows(
    rank: int, rows: pa.Table, window: StepWindow | None, kernels: LaunchedKernels | None = None
) -> list[Row]:
    """The rank's rows, one per module path, depth first (children after their parent, in the
    order their first calls start)."""
    name = pc.fill_null(rows["name"], "")
    is_module = pc.and_(
        pc.equal(pc.fill_null(rows["cat"], ""), "python_function"), pc.starts_with(name, PREFIX)
    )
    modules = rows.select(["ev_idx", "cat", "name", "pid", "tid", "ts", "dur"]).filter(is_module)
    n = modules.num_rows
    if n == 0:
        return []
    parent = range_parents(modules)
    names = [s[len(PREFIX) :] for s in pc.fill_null(modules["name"], "").to_pylist()]
    paths = ancestor_paths(names, parent, SEPARATOR)
    ts = modules["ts"].to_numpy()
    dur = pc.fill_null(modules["dur"], 0).to_numpy()
    if kernels is None:  # each launched kernel: its call, start and end
        kernels = launched_kernels(rows)
    innermost = innermost_holding(modules, kernels.calls) if kernels.n else np.zeros(0, np.int64)
    inclusive = _busy_by_module(innermost, parent, kernels.ts, kernels.end, n, every_ancestor=True)
    own = _busy_by_module(innermost, parent, kernels.ts, kernels.end, n, every_ancestor=False)
    counted = np.zeros(n, np.int64)
    np.add.at(counted, _ancestors_of(innermost[innermost >= 0], parent)[0], 1)
    keep = np.flatnonzero(
        np.ones(n, bool) if window is None else (ts >= window.ts) & (ts < window.end)
    )
    if not len(keep):
        return []
    distinct, code = np.unique(
        np.array([paths[i] for i in keep.tolist()], object), return_inverse=True
    )
    code = code.reshape(-1)

    def total(values: np.ndarray) -> list[int]:
        out = np.zeros(len(distinct), np.int64)
        np.add.at(out, code, values[keep].astype(np.int64))
        return out.tolist()

    first = np.full(len(distinct), np.iinfo(np.int64).max)
    np.minimum.at(first, code, ts[keep])  # each path's first call
    calls = np.bincount(code, minlength=len(distinct)).tolist()
    figures = zip(calls, total(dur), total(counted), total(inclusive), total(own), strict=True)
    rows = [
        {"rank": rank, "module": path, "depth": path.count(SEPARATOR), "calls": c, "cpu_ns": cpu,
         "kernels": k, "gpu_ns": gpu, "self_gpu_ns": mine}
        for path, (c, cpu, k, gpu, mine) in zip(distinct.tolist(), figures, strict=True)
    ]  # fmt: skip
    first_of = dict(zip(distinct.tolist(), first.tolist(), strict=True))
    return sorted(rows, key=lambda row: _tree_key(row["module"], first_of))


def _tree_key(path: str, first: dict[str, int]) -> tuple[int, ...]:
    """Depth-first order: each ancestor's first call, then the module's own (a module first
    seen in a later step still comes under its parent)."""
    parts = path.split(SEPARATOR)
    prefixes = (SEPARATOR.join(parts[: k + 1]) for k in range(len(parts)))
    return tuple(first.get(prefix, first[path]) for prefix in prefixes)


def _ancestors_of(modules: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(module, item) pairs: each item's module and every ancestor of it."""
    level = modules.copy()
    items = np.arange(len(modules))
    out_modules, out_items = [], []
    while len(level):
        out_modules.append(level)
        out_items.append(items)
        up = parent[level]
        has = up >= 0
        level, items = up[has], items[has]
    if not out_modules:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_modules), np.concatenate(out_items)


def _busy_by_module(
    innermost: np.ndarray,
    parent: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    n: int,
    every_ancestor: bool,
) -> np.ndarray:
    """Per module, the busy time of the kernels launched inside it: in it or any descendant
    (`every_ancestor`), else in it outside its child modules."""
    inside = np.flatnonzero(innermost >= 0)
    if every_ancestor:
        module, item = _ancestors_of(innermost[inside], parent)
        kernel = inside[item]
    else:
        module, kernel = innermost[inside], inside
    out = np.zeros(n, np.int64)
    if not len(module):
        return out
    busy, groups = busy_times(module, ts[kernel], end[kernel])
    out[groups] = busy
    return out


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("module", pa.string()), ("depth", pa.int64()), ("calls", pa.int64()),
     ("cpu_ns", pa.int64()), ("kernels", pa.int64()), ("gpu_ns", pa.int64()),
     ("self_gpu_ns", pa.int64())]
)  # fmt: skip
