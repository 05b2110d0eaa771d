"""One rank and window → its dependency graph and critical path, as HTA's CPGraph has them.

Passes, in HTA's order: nodes (start and end per CPU op, runtime call and GPU row), [runtime
lock], call stacks, kernels, [plain native: gloo ranges after the c10d op that enqueued them,
threads blocked on another thread (`threads`)]; then HTA's checks (a sync edge within one
stream, a cycle) and the longest path, with negative weights of a whole µs or more counted as 0
(HTA's `_validate_graph`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...critical_path import CycleError, LongestPath, longest_path
from .callstack import (
    RUNTIME_LOCK_CALLS,
    StackRules,
    call_stack_edges,
    runtime_lock_edges,
)
from .edges import SYNC_DEPENDENCY, Edges, node_times
from .enqueue import enqueue_edges
from .frame import KIND_KERNEL, KIND_OP, KIND_RUNTIME, Frame
from .invariants import Breaks, drop_skewed, enforce, find_breaks
from .kernels import HtaFails, KernelLookups, KernelRules, kernel_edges
from .syncs import InferredSyncs, inferred_edges
from .threads import thread_handoffs
from .window import Window, clip, window_bounds

NODE_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class Rules:
    """Every pass's rules (set from the options and the emulated version)."""

    stacks: StackRules
    kernels: KernelRules
    negative_floor: int  # weights <= -floor (frame units) count as 0; HTA's -1 µs


@dataclass(frozen=True)
class WindowGraph:
    """A window's graph: its rows, deduplicated edges (insertion order), weights, path."""

    rank: int
    window: Window
    bounds: tuple[float, float]
    clip: Frame
    edges: Edges  # weight = HTA's weight (negative ones kept)
    path_weight: np.ndarray  # the weight the longest path used (clamped)
    path: LongestPath
    breaks: Breaks = Breaks()  # invariant breaks (only HTA's semantics may have any)
    skewed: dict[str, int] = field(default_factory=dict)  # edges left out: back in time

    @property
    def unit_ns(self) -> int:
        return self.clip.unit_ns


def has_nodes(clip: Frame, hta: bool) -> np.ndarray:
    """Rows with start/end nodes. HTA: CPU ops, runtime and driver calls, GPU rows with a known
    launch; tracegraph: CPU ops (also the 2021 `Operator`) and user annotations, so that time
    between ops inside a step (a data-loader stall) is on the path, every runtime call and GPU
    row."""
    if hta:
        return clip.cat_in(NODE_CATEGORIES) | ((clip.stream != -1) & (clip.index_correlation >= 0))
    ops = (clip.kind == KIND_OP) & clip.cat_in(("cpu_op", "Operator", "user_annotation"))
    return ops | (clip.kind == KIND_RUNTIME) | (clip.kind == KIND_KERNEL)


def build_window(
    full: Frame,
    window: Window,
    look: KernelLookups,
    rules: Rules,
    inferred: InferredSyncs | None = None,
) -> WindowGraph:
    """HTA's CPGraph of one window (HtaFails / WindowError where HTA gives no path)."""
    hta = rules.kernels.hta
    bounds = window_bounds(full, window)
    c = clip(full, bounds, hta)
    node = has_nodes(c, hta)
    lock = (
        c.name_in(RUNTIME_LOCK_CALLS) & node if rules.stacks.runtime_lock else np.zeros(c.n, bool)
    )
    parts = []
    if rules.stacks.runtime_lock:
        parts.append(runtime_lock_edges(c, node, lock))
    parts.append(call_stack_edges(c, node, rules.stacks, lock))
    parts.append(kernel_edges(full, c, node, look, rules.kernels))
    if not hta:
        parts.append(enqueue_edges(full, c, node))
    if inferred is not None:
        parts.append(inferred_edges(full, c, node, inferred, node_times(c.ts, c.end)))
    edges = dedupe(Edges.concat(parts))
    skewed: dict[str, int] = {}
    if not hta:
        edges, skewed = drop_skewed(edges, c)
        edges = thread_handoffs(c, node, edges)
    check_syncs(c, edges)
    weight = np.where(edges.weight <= -rules.negative_floor, 0, edges.weight)
    try:
        path = longest_path(edges.src, edges.dst, weight, 2 * c.n)
    except CycleError as exc:
        raise HtaFails("This graph has cycles") from exc
    breaks = find_breaks(c, edges, weight, path.length, full.rank, clamp=not hta)
    if not hta:
        enforce(breaks)
    return WindowGraph(full.rank, window, bounds, c, edges, weight, path, breaks, skewed)


def dedupe(edges: Edges) -> Edges:
    """One edge per (src, dst): at its first position, with its last type and weight."""
    if len(edges) == 0:
        return edges
    key = edges.src * (int(edges.dst.max()) + 1) + edges.dst
    order = np.argsort(key, kind="stable")
    k = key[order]
    first = np.ones(len(k), bool)
    first[1:] = k[1:] != k[:-1]
    if first.all():
        return edges
    last = np.ones(len(k), bool)
    last[:-1] = k[1:] != k[:-1]
    keep_pos = order[first]
    take_attr = order[last]
    result = Edges(
        edges.src[keep_pos], edges.dst[keep_pos], edges.kind[take_attr], edges.weight[take_attr]
    )
    return result.take(np.argsort(keep_pos, kind="stable"))


def check_syncs(clip: Frame, edges: Edges) -> None:
    """HTA rejects a graph with a sync edge between two rows of one stream."""
    sync = edges.kind == SYNC_DEPENDENCY
    if not sync.any():
        return
    a = clip.stream[edges.src[sync] // 2]
    b = clip.stream[edges.dst[sync] // 2]
    if ((a != -1) & (a == b)).any():
        raise HtaFails("Graph is not valid: a CUDA sync between kernels on the same stream")


def node_time(graph: WindowGraph) -> np.ndarray:
    return node_times(graph.clip.ts, graph.clip.end)
