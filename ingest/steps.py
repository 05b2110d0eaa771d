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
from .columns import MEMORY_LABEL

STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = -1
# ProfilerStep#N is a user_annotation; the 2021 trace format writes it as an `Operator`
STEP_CATEGORIES = ("user_annotation", "Operator")


def step_rows(events: pa.Table, rank: int, run: str, run_idx: int) -> pa.Table:
    """The Step rows of one rank's keyed events (as `nodes.with_keys` returns them)."""
    ops = events.select(["label", "cat", "name", "id", "ts", "dur"])
    is_step = pc.and_(
        pc.and_(
            pc.equal(ops["label"], "Op"),
            pc.is_in(ops["cat"], value_set=pa.array(STEP_CATEGORIES)),
        ),
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
        # the allocator's instants lie inside the work they serve: not what bounds a trace
        timed = events.select(["label", "ts", "dur"]).filter(
            pc.not_equal(events["label"], MEMORY_LABEL)  # null labels drop out too
        )
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
    """Per (rank, step) window of `times`: GPU busy time, the union of every kernel interval
    clipped to the window (a kernel running across a step boundary counts in both steps, each
    for its own part), and the step's kernels, those starting at or after its start and before
    the rank's next step starts (the GPU runs behind the CPU)."""
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
        slot = np.searchsorted(w_ts[windows], starts, side="right") - 1
        counts[windows] += np.bincount(slot[slot >= 0], minlength=len(windows))
        busy[windows] = _covered(starts, ends, w_ts[windows], w_end[windows])
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


def _covered(
    starts: np.ndarray, ends: np.ndarray, w_start: np.ndarray, w_end: np.ndarray
) -> np.ndarray:
    """Length of the union of the intervals inside each window [w_start, w_end]."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum(ends[order], starts[order])
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]  # a gap before it: a new merged interval
    first = np.nonzero(new)[0]
    a = s[first]
    b = reach[np.append(first[1:] - 1, len(s) - 1)]
    cum = np.concatenate([[0], np.cumsum(b - a)])
    i = np.searchsorted(b, w_start, side="right")  # first merged interval ending after start
    j = np.searchsorted(a, w_end, side="left") - 1  # last merged interval starting before end
    out = np.zeros(len(w_start), np.int64)
    hit = j >= i
    ii, jj = i[hit], j[hit]
    out[hit] = (
        cum[jj + 1]
        - cum[ii]
        - np.maximum(0, w_start[hit] - a[ii])
        - np.maximum(0, b[jj] - w_end[hit])
    )
    return out
