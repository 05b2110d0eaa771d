"""Structural edges of one rank's keyed events, as Arrow tables (from_id, to_id, props...).

Every function here takes the events of ONE rank, so no edge can join two ranks; collectives,
the one cross-rank structure, are matched in `collectives.py`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import ints

# Tie-break for ranges with identical bounds: the outer one comes first.
_NESTING_PRIORITY = {
    "user_annotation": 0,
    "python_function": 1,
    "cpu_op": 2,
    "Operator": 2,
    "overhead": 3,
    "cuda_runtime": 4,
    "Runtime": 4,
    "mtia_runtime": 4,
    "cuda_driver": 5,
}
_NO_CALLS = pa.table(
    {
        "from_id": pa.array([], pa.int64()),
        "to_id": pa.array([], pa.int64()),
        "from_label": pa.array([], pa.string()),
        "to_label": pa.array([], pa.string()),
    }
)
LAUNCH_FLOW_CATEGORIES = ("ac2g", "async", "async_cpu_to_gpu")


def rows_of(events: pa.Table, labels: tuple[str, ...], columns: list[str]) -> pa.Table:
    """The given columns of the rows with these labels (selected first: filtering copies)."""
    narrow = events.select(list(dict.fromkeys([*columns, "label"])))
    label = narrow["label"]
    wanted = pc.equal(label, labels[0]) if len(labels) == 1 else pc.is_in(label, pa.array(labels))
    return narrow.filter(wanted).select(columns)


def call_edges(events: pa.Table) -> pa.Table:
    """CALLS: each CPU range → the ranges directly nested in it on the same (pid, tid).

    The parent of a range is the nearest earlier range (by start, longer first) on its thread
    that ends no earlier than it does; found for all ranges at once by pointer jumping.
    """
    cpu = rows_of(events, ("Op", "Runtime"), [*_RANGE_COLUMNS, "label"])
    n = cpu.num_rows
    if n < 2:
        return _NO_CALLS
    order, parent = _nesting(_thread_keys(cpu), np.ones(n, dtype=bool))
    child = np.flatnonzero(parent >= 0)
    ids = cpu["id"].to_numpy()[order]
    labels = cpu["label"].to_numpy(zero_copy_only=False)[order]
    return pa.table(
        {
            "from_id": ids[parent[child]],
            "to_id": ids[child],
            "from_label": labels[parent[child]],
            "to_label": labels[child],
        }
    )


def enclosing_ranges(events: pa.Table, points: pa.Table) -> np.ndarray:
    """For each of `points` (pid, tid, ts, ev_idx: instants of the rank), the id of the
    innermost CPU range of `events` on its thread that holds its time (start <= ts <= end),
    -1 where none does. Ranges nest as in `call_edges`; a point comes after every range that
    starts when it happens."""
    if points.num_rows == 0:
        return np.zeros(0, np.int64)
    cpu = rows_of(events, ("Op", "Runtime"), _RANGE_COLUMNS)
    at = innermost_holding(cpu, points)
    return np.where(at >= 0, cpu["id"].to_numpy()[np.maximum(at, 0)] if cpu.num_rows else -1, -1)


def innermost_holding(ranges: pa.Table, points: pa.Table) -> np.ndarray:
    """For each of `points` (pid, tid, ts, ev_idx), the position in `ranges` (cat, pid, tid,
    ts, dur, ev_idx: CPU ranges of one rank) of the innermost one on its thread that holds
    its time (start <= ts <= end), -1 where none does; nesting as in `call_edges`."""
    if points.num_rows == 0:
        return np.zeros(0, np.int64)
    instants = points.select(["pid", "tid", "ts", "ev_idx"])
    keys = [
        np.concatenate(pair)
        for pair in zip(_thread_keys(ranges), _point_keys(instants), strict=True)
    ]
    is_range = np.arange(len(keys[0])) < ranges.num_rows
    order, parent = _nesting(keys, is_range)
    found = np.where(parent >= 0, order[np.maximum(parent, 0)], -1)  # positions in `keys`
    out = np.empty(len(order), np.int64)
    out[order] = found
    return out[ranges.num_rows :]


def range_parents(ranges: pa.Table) -> np.ndarray:
    """For each of `ranges` (cat, pid, tid, ts, dur, ev_idx: CPU ranges of one rank), the
    position of the range it is directly nested in (-1: none), as `call_edges` nests them."""
    n = ranges.num_rows
    if n == 0:
        return np.zeros(0, np.int64)
    order, parent = _nesting(_thread_keys(ranges), np.ones(n, dtype=bool))
    out = np.empty(n, np.int64)
    out[order] = np.where(parent >= 0, order[np.maximum(parent, 0)], -1)
    return out


def nesting_depths(parent: np.ndarray) -> np.ndarray:
    """Each range's depth under `parent` (`range_parents`): 0 at the top, by array sweeps."""
    depth = np.zeros(len(parent), np.int64)
    level = parent.copy()
    while (up := level >= 0).any():
        depth[up] += 1
        level = np.where(up, parent[np.maximum(level, 0)], -1)
    return depth


def ancestor_paths(names: list[str], parent: np.ndarray, separator: str) -> list[str]:
    """Each range's names from its outermost ancestor down to it, joined by `separator`."""
    paths: list[str | None] = [None] * len(names)
    for i in range(len(names)):
        chain = []
        j = i
        while j >= 0 and paths[j] is None:
            chain.append(j)
            j = int(parent[j])
        prefix = paths[j] if j >= 0 else None
        for k in reversed(chain):
            prefix = names[k] if prefix is None else prefix + separator + names[k]
            paths[k] = prefix
    return [p or "" for p in paths]


_RANGE_COLUMNS = ["id", "cat", "pid", "tid", "ts", "dur", "ev_idx"]
_POINT_PRIORITY = 99  # after every range of the same bounds


def _thread_keys(cpu: pa.Table) -> list[np.ndarray]:
    """pid, tid, start, end, nesting priority and ev_idx of CPU ranges."""
    start = cpu["ts"].to_numpy()
    end = start + ints(cpu["dur"], 0)
    priority = ints(_map_priority(cpu["cat"]), 9)
    return [ints(cpu["pid"]), ints(cpu["tid"]), start, end, priority, ints(cpu["ev_idx"])]


def _point_keys(points: pa.Table) -> list[np.ndarray]:
    start = ints(points["ts"])
    priority = np.full(points.num_rows, _POINT_PRIORITY, np.int64)
    return [ints(points["pid"]), ints(points["tid"]), start, start, priority,
            ints(points["ev_idx"])]  # fmt: skip


def _nesting(keys: list[np.ndarray], is_range: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows' order (thread, start, longer first, priority, ev_idx) and, in that order,
    each row's parent position: the nearest earlier range on its thread that ends no earlier
    than it does (-1: none). Only ranges are parents."""
    pid, tid, start, end, priority, ev_idx = keys
    order = np.lexsort((ev_idx, priority, -end, start, tid, pid))
    pid, tid, end, is_range = pid[order], tid[order], end[order], is_range[order]
    n = len(order)
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    parent = np.arange(n, dtype=np.int64) - 1
    parent[new_thread] = -1
    pending = np.flatnonzero(parent >= 0)
    while pending.size:
        candidate = parent[pending]
        encloses = (end[candidate] >= end[pending]) & is_range[candidate]
        unresolved = pending[~encloses]
        parent[unresolved] = parent[parent[unresolved]]
        pending = unresolved[parent[unresolved] >= 0]
    return order, parent


def _map_priority(cats: pa.ChunkedArray) -> pa.Array:
    keys = pa.array(list(_NESTING_PRIORITY), pa.string())
    values = pa.array(list(_NESTING_PRIORITY.values()), pa.int64())
    return pc.take(values, pc.index_in(cats, value_set=keys))


def launch_edges(events: pa.Table) -> pa.Table:
    """LAUNCHES: runtime call → GPU activity with its correlation id (one call may launch many
    kernels: graph launches); where the correlation finds no call, the launch flow
    (ac2g / async) that ends on the activity."""
    runtime = rows_of(events, ("Runtime",), ["id", "cat", "correlation", "ts", "pid", "tid"])
    gpu = rows_of(events, ("Kernel",), ["id", "correlation", "ts", "pid", "tid"])
    by_corr, found = launches_by_correlation(runtime, gpu)
    unmatched = gpu.filter(pa.array(~found))
    by_flow = _flow_launches(events, runtime, unmatched)
    return pa.concat_tables([by_corr, by_flow])


def launches_by_correlation(runtime: pa.Table, gpu: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The LAUNCHES edges by correlation of the GPU rows `gpu` (id, correlation) from the
    runtime calls `runtime` (id, cat, correlation, ts), and which GPU rows have one."""
    launcher = one_call_per_correlation(runtime)
    corr = launcher["correlation"].to_numpy()
    gpu_corr = ints(gpu["correlation"], 0)
    valid = pc.is_valid(gpu["correlation"]).to_numpy(zero_copy_only=False)
    at = np.minimum(np.searchsorted(corr, gpu_corr), max(len(corr) - 1, 0))
    found = valid & (corr[at] == gpu_corr) if len(corr) else np.zeros(len(gpu_corr), bool)
    by_corr = pa.table(
        {
            "from_id": launcher["from_id"].take(pa.array(at[found])),
            "to_id": gpu["id"].take(pa.array(np.nonzero(found)[0])),
            "via": pa.array(["correlation"] * int(found.sum()), pa.string()),
        }
    )
    return by_corr, found


def one_call_per_correlation(runtime: pa.Table) -> pa.Table:
    """correlation → the runtime call that owns it (cuda_runtime before cuda_driver, then first)."""
    rt = runtime.filter(pc.is_valid(runtime["correlation"]))
    if rt.num_rows == 0:
        return pa.table(
            {"correlation": pa.array([], pa.int64()), "from_id": pa.array([], pa.int64())}
        )
    corr = rt["correlation"].to_numpy()
    driver = pc.equal(rt["cat"], "cuda_driver").to_numpy(zero_copy_only=False).astype(np.int8)
    order = np.lexsort((rt["ts"].to_numpy(), driver, corr))
    _, first = np.unique(corr[order], return_index=True)
    pick = order[first]
    return pa.table({"correlation": corr[pick], "from_id": rt["id"].to_numpy()[pick]})


def _flow_launches(events: pa.Table, runtime: pa.Table, gpu: pa.Table) -> pa.Table:
    empty = pa.table(
        {
            "from_id": pa.array([], pa.int64()),
            "to_id": pa.array([], pa.int64()),
            "via": pa.array([], pa.string()),
        }
    )
    if gpu.num_rows == 0:
        return empty
    flows = rows_of(events, ("flow",), ["cat", "ph", "pid", "tid", "ts", "flow_id"])
    flows = flows.filter(pc.is_in(flows["cat"], pa.array(LAUNCH_FLOW_CATEGORIES)))
    keys = ["pid", "tid", "ts"]
    starts = flows.filter(pc.equal(flows["ph"], "s")).select([*keys, "flow_id"])
    finishes = flows.filter(pc.equal(flows["ph"], "f")).select([*keys, "flow_id"])
    src = starts.join(runtime.select([*keys, "id"]), keys, join_type="inner")
    dst = finishes.join(gpu.select([*keys, "id"]), keys, join_type="inner")
    src = src.select(["flow_id", "id"]).rename_columns(["flow_id", "from_id"])
    dst = dst.select(["flow_id", "id"]).rename_columns(["flow_id", "to_id"])
    pairs = dst.join(src, "flow_id", join_type="inner").select(["from_id", "to_id"])
    if pairs.num_rows == 0:
        return empty
    # One launch per activity even if several flow starts share a slice.
    pairs = pairs.group_by("to_id").aggregate([("from_id", "min")])
    pairs = pairs.rename_columns(["to_id", "from_id"]).select(["from_id", "to_id"])
    return pairs.append_column("via", pa.array(["flow"] * pairs.num_rows, pa.string()))


def stream_edges(events: pa.Table) -> pa.Table:
    """NEXT_ON_STREAM: each GPU activity → the next one on its (device, stream), with the gap."""
    gpu = rows_of(events, ("Kernel",), ["id", "device", "stream", "ts", "dur", "ev_idx"])
    device, stream = ints(gpu["device"]), ints(gpu["stream"])
    start = gpu["ts"].to_numpy()
    end = start + ints(gpu["dur"], 0)
    order = np.lexsort((gpu["ev_idx"].to_numpy(), start, stream, device))
    device, stream, start, end = device[order], stream[order], start[order], end[order]
    ids = gpu["id"].to_numpy()[order]
    same = (device[1:] == device[:-1]) & (stream[1:] == stream[:-1])
    prev = np.flatnonzero(same)
    return pa.table(
        {
            "from_id": ids[prev],
            "to_id": ids[prev + 1],
            "gap_ns": start[prev + 1] - end[prev],
        }
    )
