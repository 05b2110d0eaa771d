"""CPU-side edges of a window: HTA's call-stack pass and 0.6.1's CUDA runtime-lock pass.

Call stacks (`_construct_graph_from_call_stack`): on every CPU thread, consecutive nodes of the
DFS over the call stack are joined: start → first child's start, child end → next child's start,
last child's end → parent's end, a leaf's start → its end (operator_kernel, weight Δt; 0 into the
end of a blocking call), and the end of a top-level op → the next top-level op's start
(dependency). Events without nodes (annotations, python functions) shape the stack but add no
edges. With `merge_backward_thread` (0.6.1), the one thread with "autograd" ops is renumbered as
the one thread with "forward" ops first, so the backward pass joins the forward stack.

Plain native (`nesting="time"`): HTA's stack walk pops whatever is on top at an end, so ranges
that do not nest cleanly (python stacks, `record_function` ranges closed out of order) put a
range's end before a start that lies earlier in time, and a nested range is counted twice. The
time chain instead joins each thread's node boundaries in time order (ends before starts at one
instant, so a child closes before its sibling opens): for properly nested ranges this is exactly
HTA's DFS order, and for any input every edge goes forward in time and no instant of a thread is
counted twice.

Runtime lock (0.6.1, `_construct_graph_from_cuda_runtime_events`): cudaHostAlloc,
cudaLaunchKernel and cudaMemcpyAsync hold one lock, across threads. Walking their nodes in time
order, an end closes every pending start (its own: operator_kernel with the full span, never
zeroed; others: dependency) and follows the previous end (dependency); the call-stack pass then
skips edges between two such nodes unless they are an (end, start) pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .edges import DEPENDENCY, OPERATOR_KERNEL, Edges, make_edges, node_times
from .frame import Frame
from .stacks import euler_tour, sorted_events, stack_tree, thread_ids

BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
BLOCKING_CALLS_ANY = BLOCKING_CALLS | {
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventQuery",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyAsync",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
}
RUNTIME_LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})


@dataclass(frozen=True)
class StackRules:
    """What differs between the versions in the CPU passes."""

    merge_backward_thread: bool
    runtime_lock: bool
    exact_ties: bool = True  # HTA's sort order among ambiguous equal-time events
    time_chain: bool = False  # plain native: boundaries joined in time order (see module doc)


def thread_of_pass(clip: Frame, name: str) -> int | None:
    """The one thread with cpu_op/user_annotation events whose name contains `name` (HTA)."""
    names = [s for s in clip.symbols if name in s]
    sel = clip.name_in(names) & clip.cat_in(("cpu_op", "user_annotation"))
    tids = np.unique(clip.tid[sel])
    return int(tids[0]) if len(tids) == 1 else None


def call_stack_edges(
    clip: Frame, has_node: np.ndarray, rules: StackRules, lock: np.ndarray
) -> Edges:
    """Edges of HTA's call-stack pass, thread by thread in (pid, tid) order."""
    tid = _merged_tids(clip) if rules.merge_backward_thread else clip.tid
    if rules.time_chain:
        return time_chain_edges(clip, has_node, tid)
    thread, _ = thread_ids(clip.pid, tid)
    if len(thread) == 0:
        return Edges.empty()
    max_stream = np.full(int(thread.max()) + 1, np.iinfo(np.int64).min)
    np.maximum.at(max_stream, thread, clip.stream)
    rows = np.nonzero(max_stream[thread] < 0)[0]
    if len(rows) == 0:
        return Edges.empty()
    ev_local, ev_start = sorted_events(
        thread[rows], clip.ts[rows], clip.dur[rows], clip.ev_idx[rows], rules.exact_ties
    )
    ev_thread = thread[rows][ev_local]
    _, depth = stack_tree(ev_thread, ev_start)
    tour = euler_tour(rows[ev_local], ev_start, ev_thread, depth)
    keep = has_node[tour.row]
    row, enter, thr = tour.row[keep], tour.enter[keep], tour.thread[keep]
    if len(row) < 2:
        return Edges.empty()
    blocking = clip.name_in(BLOCKING_CALLS if rules.exact_ties else BLOCKING_CALLS_ANY)
    step, depth_after, a, b = _walk(enter, thr)
    node = 2 * row + np.where(enter, 0, 1)
    zero = ~enter[b] & blocking[row[b]]
    times = node_times(clip.ts, clip.end)
    if rules.runtime_lock:
        depth_before_b = depth_after[b] - step[b]
        kind = np.where(enter[b] & (depth_before_b == 0), DEPENDENCY, OPERATOR_KERNEL)
        shares = lock[row[a]] & lock[row[b]] & (enter[a] | ~enter[b])
        a, b, kind, zero = a[~shares], b[~shares], kind[~shares], zero[~shares]
        return make_edges(node[a], node[b], kind, times, zero)
    top_exit = ~enter[a] & (depth_after[a] == 0)
    kind = np.where(top_exit, DEPENDENCY, OPERATOR_KERNEL)
    return make_edges(node[a], node[b], kind, times, zero & ~top_exit)


def _walk(
    enter: np.ndarray, thread: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Over boundaries grouped by thread (enter: a start): +1/-1 per boundary, the stack depth
    after each, and the consecutive pairs (a, b = a + 1) within one thread."""
    step = np.where(enter, 1, -1)
    first = np.ones(len(enter), bool)
    first[1:] = thread[1:] != thread[:-1]
    csum = np.cumsum(step)
    seg = np.maximum.accumulate(np.where(first, np.arange(len(enter)), 0))
    depth_after = csum - (csum - step)[seg]
    a = np.nonzero(~first[1:])[0]
    return step, depth_after, a, a + 1


def _merged_tids(clip: Frame) -> np.ndarray:
    fwd, bwd = thread_of_pass(clip, "forward"), thread_of_pass(clip, "autograd")
    if fwd is not None and bwd is not None and fwd != bwd:
        return np.where(clip.tid == bwd, fwd, clip.tid)
    return clip.tid


def time_chain_edges(clip: Frame, has_node: np.ndarray, tid: np.ndarray) -> Edges:
    """Each CPU thread's node boundaries joined in time order (plain native's call stacks).

    At one instant: ends of spans (shorter first), then zero-length events (start, end), then
    starts of spans (longer first). An end → start between top-level ranges is a dependency;
    every other edge is operator_kernel with weight Δt, 0 into the end of a blocking call.
    """
    rows = np.nonzero(has_node & (clip.stream < 0))[0]
    if len(rows) < 1:
        return Edges.empty()
    thread, _ = thread_ids(clip.pid[rows], tid[rows])
    ts = clip.ts[rows]
    dur = np.maximum(clip.dur[rows], 0)
    n = len(rows)
    local = np.concatenate([np.arange(n), np.arange(n)])
    is_start = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
    time = np.where(is_start, ts[local], ts[local] + dur[local])
    zero = dur[local] == 0
    cls = np.where(zero, 1, np.where(is_start, 2, 0))
    # ends: the later-started (shorter) first; starts: the longer first; zero: start first
    sub = np.where(zero, np.where(is_start, 0, 1), np.where(is_start, -dur[local], -ts[local]))
    order = np.lexsort((local, sub, cls, time, thread[local]))
    local, is_start, thr = local[order], is_start[order], thread[local][order]
    _, depth_after, a, b = _walk(is_start, thr)
    node = 2 * rows[local] + np.where(is_start, 0, 1)
    top_exit = ~is_start[a] & (depth_after[a] == 0)
    kind = np.where(top_exit, DEPENDENCY, OPERATOR_KERNEL)
    blocking = clip.name_in(BLOCKING_CALLS_ANY)[rows]
    zero_in = ~is_start[b] & blocking[local[b]]
    times = node_times(clip.ts, clip.ts + np.maximum(clip.dur, 0))
    return make_edges(node[a], node[b], kind, times, zero_in & ~top_exit)


def runtime_lock_edges(clip: Frame, has_node: np.ndarray, lock: np.ndarray) -> Edges:
    """0.6.1's lock pass over the lock calls' nodes in (time, ev_idx) order."""
    rows = np.nonzero(lock & has_node)[0]
    if len(rows) == 0:
        return Edges.empty()
    times = node_times(clip.ts, clip.end)
    nodes = np.concatenate([2 * rows, 2 * rows + 1])
    is_end = np.concatenate([np.zeros(len(rows), bool), np.ones(len(rows), bool)])
    ev = np.concatenate([clip.seq[rows], clip.seq[rows]])
    order = np.lexsort((ev, times[nodes].astype(np.float64)))
    nodes, is_end = nodes[order], is_end[order]
    seq = np.arange(len(nodes))
    end_pos = seq[is_end]
    start_pos = seq[~is_end]
    popper = np.searchsorted(end_pos, start_pos)  # first end after each start
    popped = popper < len(end_pos)
    start_pos, popper = start_pos[popped], end_pos[popper[popped]]
    # within one end, pending starts pop last-in first-out
    pop_order = np.lexsort((-start_pos, popper))
    start_pos, popper = start_pos[pop_order], popper[pop_order]
    same_event = (nodes[start_pos] // 2) == (nodes[popper] // 2)
    pops = make_edges(
        nodes[start_pos], nodes[popper], np.where(same_event, OPERATOR_KERNEL, DEPENDENCY), times
    )
    chain_at = end_pos[(end_pos > 0)]
    chain_at = chain_at[is_end[chain_at - 1]]
    chain = make_edges(nodes[chain_at - 1], nodes[chain_at], DEPENDENCY, times)
    key1 = np.concatenate([popper, chain_at])
    key2 = np.concatenate([np.zeros(len(popper)), np.ones(len(chain_at))])
    edges = Edges.concat([pops, chain])
    return edges.take(np.lexsort((np.arange(len(key1)), key2, key1)))
