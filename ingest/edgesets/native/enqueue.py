"""CPU collectives: the c10d op that enqueued each gloo range (plain native only).

On a CPU rank a collective is a `c10d::allreduce_` (`c10d::broadcast_`, ...) on the calling
thread that returns at once, and a `gloo:all_reduce` range on one of ProcessGroupGloo's worker
threads that lasts until every rank has joined. The trace links them by nothing (no External
id, no flow), so without an edge the worker's range starts a chain of its own and a path never
goes from the work that led up to a collective into the collective. Gloo runs a process
group's work in the order it was enqueued, so the k-th enqueueing op of a kind on a rank
launched the k-th gloo range of that kind: start → start, `kernel_launch_delay` (as a CUDA
launch's: the range could not start before it was enqueued; the delay is the worker's queue).
Where the counts of a kind differ, or an order would put a range before its op, that kind gets
no edge.
"""

from __future__ import annotations

import re

import numpy as np

from .edges import KERNEL_LAUNCH_DELAY, Edges, make_edges, node_times
from .frame import Frame

GLOO_PREFIX = "gloo:"
ENQUEUE_PREFIX = "c10d::"
_NOT_ENQUEUE = ("c10d::wait",)


def collective_kind(name: str) -> str:
    """`c10d::allreduce_` and `gloo:all_reduce` both → "allreduce"."""
    for prefix in (ENQUEUE_PREFIX, GLOO_PREFIX):
        name = name.removeprefix(prefix)
    return re.sub(r"[^a-z]", "", name.lower())


def enqueue_edges(full: Frame, clip: Frame, has_node: np.ndarray) -> Edges:
    """c10d op start → the gloo range it enqueued, for rows of `clip` with nodes (paired over
    the rank's whole frame, so a window does not shift the order)."""
    pairs = _pairs(full)
    if len(pairs) == 0:
        return Edges.empty()
    op_row = clip.position_of(pairs[:, 0])
    range_row = clip.position_of(pairs[:, 1])
    both = (op_row >= 0) & (range_row >= 0)
    op_row, range_row = op_row[both], range_row[both]
    keep = has_node[op_row] & has_node[range_row]
    times = node_times(clip.ts, clip.ts + np.maximum(clip.dur, 0))
    return make_edges(2 * op_row[keep], 2 * range_row[keep], KERNEL_LAUNCH_DELAY, times)


def _pairs(frame: Frame) -> np.ndarray:
    """(op ev_idx, gloo range ev_idx) rows, kind by kind."""
    cpu = frame.stream < 0
    names = frame.name.values
    kinds: dict[str, tuple[list[int], list[int]]] = {}
    for code, name in enumerate(names):
        if name is None:
            continue
        if name.startswith(GLOO_PREFIX):
            kinds.setdefault(collective_kind(name), ([], []))[1].append(code)
        elif name.startswith(ENQUEUE_PREFIX) and not name.startswith(_NOT_ENQUEUE):
            kinds.setdefault(collective_kind(name), ([], []))[0].append(code)
    out = []
    for ops, ranges in kinds.values():
        if not ops or not ranges:
            continue
        a = np.nonzero(cpu & np.isin(frame.name.codes, ops))[0]
        b = np.nonzero(cpu & np.isin(frame.name.codes, ranges))[0]
        a = a[np.lexsort((frame.seq[a], frame.ts[a]))]
        b = b[np.lexsort((frame.seq[b], frame.ts[b]))]
        if len(a) != len(b) or (frame.ts[a] > frame.ts[b]).any():
            continue
        out.append(np.stack([frame.ev_idx[a], frame.ev_idx[b]], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), np.int64)
