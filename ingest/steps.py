"""One row per rank and ProfilerStep#N, written at ingest: step times and GPU busy time.

The explorer's overview needs, per rank and step, the step's window and how busy the GPU was in
it. Finding the annotations and reading every kernel takes seconds on millions of events, so
ingest writes them once into the `Step` node table. A rank without ProfilerStep annotations gets
one row for its whole trace (step -1).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import schema

STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = -1


def step_rows(events: pa.Table, rank: int, run: str, run_idx: int) -> pa.Table:
    """The Step rows of one rank's keyed events (as `nodes.with_keys` returns them)."""
    ops = events.select(["label", "cat", "name", "id", "ts", "dur"])
    is_step = pc.and_(
        pc.and_(pc.equal(ops["label"], "Op"), pc.equal(ops["cat"], "user_annotation")),
        pc.starts_with(ops["name"], STEP_PREFIX),
    )
    steps = ops.filter(is_step)
    numbers = pc.utf8_slice_codeunits(steps["name"], len(STEP_PREFIX))
    numeric = pc.utf8_is_digit(numbers)
    steps = steps.filter(numeric).append_column(
        "step", pc.cast(pc.filter(numbers, numeric), pa.int64())
    )
    kernels = events.select(["label", "ts", "dur"]).filter(pc.equal(events["label"], "Kernel"))
    if steps.num_rows == 0:
        timed = events.select(["label", "ts", "dur"]).filter(pc.is_valid(events["label"]))
        start = pc.min(timed["ts"]).as_py() or 0
        end = pc.max(pc.add(timed["ts"], pc.fill_null(timed["dur"], 0))).as_py() or start
        steps = pa.table(
            {
                "name": ["whole trace"],
                "id": [schema.event_key(run_idx, rank, schema.MAX_EV)],
                "ts": [start],
                "dur": [end - start],
                "step": [WHOLE_TRACE],
            }
        )
    windows = pa.table(
        {
            "rank": pa.repeat(pa.scalar(rank, pa.int64()), steps.num_rows),
            "step": steps["step"],
            "ts": steps["ts"],
            "dur": pc.fill_null(steps["dur"], 0),
        }
    )
    kernel_rows = pa.table(
        {
            "rank": pa.repeat(pa.scalar(rank, pa.int64()), kernels.num_rows),
            "ts": kernels["ts"],
            "dur": pc.fill_null(kernels["dur"], 0),
        }
    )
    busy = busy_in_windows(kernel_rows, windows)
    return pa.table(
        {
            "id": steps["id"],
            "run": pa.repeat(pa.scalar(run, pa.string()), steps.num_rows),
            "rank": windows["rank"],
            "step": steps["step"],
            "name": steps["name"],
            "ts": steps["ts"],
            "dur": windows["dur"],
            "gpu_busy_ns": busy["busy_ns"],
            "kernel_count": busy["kernels"],
        }
    )


def busy_in_windows(kernels: pa.Table, times: pa.Table) -> pa.Table:
    """Union of kernel intervals clipped to each (rank, step) window of `times`."""
    w_rank, w_step = times["rank"].to_numpy(), times["step"].to_numpy()
    w_ts = times["ts"].to_numpy()
    w_end = w_ts + times["dur"].to_numpy()
    busy = np.zeros(len(w_ts), dtype=np.int64)
    counts = np.zeros(len(w_ts), dtype=np.int64)
    k_rank = kernels["rank"].to_numpy()
    k_ts = kernels["ts"].to_numpy()
    k_end = k_ts + kernels["dur"].to_numpy()
    order = np.lexsort((w_ts, w_rank))
    for rank in np.unique(w_rank):
        windows = order[w_rank[order] == rank]
        mine = k_rank == rank
        starts, ends = k_ts[mine], k_end[mine]
        if len(starts) == 0:
            continue
        # each kernel belongs to the last window starting at or before it
        slot = np.searchsorted(w_ts[windows], starts, side="right") - 1
        keep = slot >= 0
        slot, starts, ends = slot[keep], starts[keep], ends[keep]
        win = windows[slot]
        starts = np.maximum(starts, w_ts[win])
        ends = np.minimum(ends, w_end[win])
        keep = ends > starts
        busy_by_window = _union_lengths(slot[keep], starts[keep], ends[keep], len(windows))
        busy[windows] += busy_by_window
        counts[windows] += np.bincount(slot, minlength=len(windows))
    durs = times["dur"].to_numpy()
    share = np.divide(busy, durs, out=np.zeros(len(durs)), where=durs > 0)
    return pa.table(
        {
            "rank": pa.array(w_rank, pa.int64()),
            "step": pa.array(w_step, pa.int64()),
            "busy_ns": pa.array(busy, pa.int64()),
            "share": pa.array(share, pa.float64()),
            "kernels": pa.array(counts, pa.int64()),
        }
    )


def _union_lengths(group: np.ndarray, starts: np.ndarray, ends: np.ndarray, n: int) -> np.ndarray:
    """Total length of the union of intervals per group (groups 0..n-1)."""
    out = np.zeros(n, dtype=np.int64)
    if len(starts) == 0:
        return out
    base = starts.min()
    span = int(ends.max() - base) + 1
    # one running maximum over all groups: offset each group past the previous one's times
    offset = group.astype(np.int64) * span
    s, e = starts - base + offset, ends - base + offset
    order = np.lexsort((s, group))
    s, e, g = s[order], e[order], group[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate(([np.iinfo(np.int64).min], reach[:-1]))
    prev[np.r_[True, g[1:] != g[:-1]]] = np.iinfo(np.int64).min
    covered = np.maximum(0, e - np.maximum(s, prev))
    np.add.at(out, g, covered)
    return out
