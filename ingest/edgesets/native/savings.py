"""What fixing a piece of work would save: the step's path length again, over the same graph,
with that work taking no time (the what-if DP), against the path as it is.

Work is given as ranges (rows of one rank's window graph): on a CPU thread, every edge of that
thread loses the part of its time the ranges cover (an op's own span, the gaps inside it, a
python frame inside a gap: `gc.collect()` between two ops); GPU work launched from inside them
(the kernel's span, its launch, the stream's gap before it) takes no time at all. Or as edges
(a collective's time on the path). A saving is never more than the work's path time could be
replaced by: another rank or thread, no longer waited for, bounds the step instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ...intervals import covered_between, merged
from .edges import KERNEL_KERNEL_DELAY, KERNEL_LAUNCH_DELAY
from .frame import KIND_KERNEL, KIND_SYNC
from .stacks import thread_ids
from .step_graph import StepGraph


class Savings:
    """One step graph's path length with pieces of work taken out."""

    def __init__(self, graph: StepGraph, path: np.ndarray | None = None) -> None:
        """`path`: the graph's critical path (edge indices), where the caller has it: work off
        it saves nothing (the path keeps its length), so no what-if runs for that work."""
        self.graph = graph
        self._lengths = graph.lengths()
        self.length = self._lengths.length(graph.weight)
        longest = path is not None and int(graph.weight[path].sum()) == self.length
        self._path = path if longest else None
        g = graph
        owner = g.graph_of(g.src)
        self._same = owner == g.graph_of(g.dst)
        self._owner = owner
        self._local: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._of_ranges: dict[frozenset[tuple[int, int]], int] = {}  # a segment and its one part

    def of_edges(self, edges: np.ndarray) -> int:
        """Saving with these edges (indices) weighing nothing."""
        if self._path is not None and not np.isin(edges, self._path).any():
            return 0
        weight = self.graph.weight.copy()
        weight[edges] = 0
        return self.length - self._lengths.length(weight)

    def of_cut(self, cut: np.ndarray) -> int:
        """Saving with each edge's weight less `cut` (never below 0)."""
        if not cut.any() or (self._path is not None and not cut[self._path].any()):
            return 0
        return self.length - self._lengths.length(np.maximum(self.graph.weight - cut, 0))

    def of_ranges(self, ranges: Iterable[tuple[int, int]]) -> int:
        """Saving with the work of these (graph index, row) ranges taking no time."""
        key = frozenset(ranges)
        if key not in self._of_ranges:
            self._of_ranges[key] = self._cut_of_ranges(key)
        return self._of_ranges[key]

    def _cut_of_ranges(self, ranges: Iterable[tuple[int, int]]) -> int:
        cut = np.zeros(len(self.graph.weight), np.int64)
        by_graph: dict[int, list[int]] = {}
        for g, row in ranges:
            by_graph.setdefault(g, []).append(row)
        for g, rows in by_graph.items():
            self.cut_ranges(g, np.asarray(rows, np.int64), out=cut)
        return self.of_cut(cut)

    def cut_gpu(
        self, parts: Sequence[tuple[int, np.ndarray]], idle_only: bool = False
    ) -> np.ndarray:
        """GPU rows taking no time (their spans, their launch delays and the stream's gap before
        them, a collective's time into their end), or with `idle_only` only the wait before
        them: the launch delay and the stream's gap. `parts`: (graph index, rows), any number
        of ranks' at once (one pass over the step's edges)."""
        graph = self.graph
        nodes = np.zeros(graph.n_nodes, bool)
        for g, rows in parts:
            lo = int(graph.base[g])
            nodes[lo + 2 * rows] = True
            if not idle_only:
                nodes[lo + 2 * rows + 1] = True
        into = nodes[graph.dst]
        if idle_only:
            into &= np.isin(graph.kind, (KERNEL_LAUNCH_DELAY, KERNEL_KERNEL_DELAY))
        return np.where(into, graph.weight, 0)

    def cut_times(
        self, g: int, lo_ns: np.ndarray, hi_ns: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Every CPU edge of graph g losing its time inside [lo, hi) (trace ns, the rank's own
        clock); into `out` (the larger of what it holds and this), where given."""
        graph, lo = self.graph, int(self.graph.base[g])
        clip = graph.graphs[g].clip
        offset = (int(clip.ts[0]) + clip.origin) * clip.unit_ns - int(graph.times[lo])
        union = merged(np.asarray(lo_ns) - offset, np.asarray(hi_ns) - offset)
        thread, gpu, _, mine = self._parts(g)
        on_cpu = ~gpu[(graph.src[mine] - lo) // 2] & ~gpu[(graph.dst[mine] - lo) // 2]
        j = mine[on_cpu]
        if out is None:
            out = np.zeros(len(graph.weight), np.int64)
        covered = covered_between(graph.times[graph.src[j]], graph.times[graph.dst[j]], union)
        out[j] = np.maximum(out[j], covered)
        return out

    def cut_rank(self, g: int) -> np.ndarray:
        """All of graph g's own edges taking no time: the rank infinitely fast (its waits, and
        the collectives' time across ranks, stay)."""
        _, _, _, mine = self._parts(g)
        out = np.zeros(len(self.graph.weight), np.int64)
        out[mine] = self.graph.weight[mine]
        return out

    def cut_ranges(self, g: int, rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """How much each edge of graph g loses when these rows take no time; into `out` (the
        larger of what it holds and this), where given: one array for many ranks' work."""
        if out is None:
            out = np.zeros(len(self.graph.weight), np.int64)
        self._cut(g, rows, out)
        return out

    def _cut(self, g: int, rows: np.ndarray, out: np.ndarray) -> None:
        graph, lo, t = self.graph, int(self.graph.base[g]), self.graph.times
        thread, gpu, launcher, mine = self._parts(g)
        src_row, dst_row = (graph.src[mine] - lo) // 2, (graph.dst[mine] - lo) // 2
        on_cpu = ~gpu[src_row] & ~gpu[dst_row]
        gpu_rows = np.nonzero(gpu & (launcher >= 0))[0]
        calls = launcher[gpu_rows]
        launched = np.zeros(len(gpu), bool)
        for th in np.unique(thread[rows]).tolist():
            sel = rows[thread[rows] == th]
            union = merged(t[lo + 2 * sel], t[lo + 2 * sel + 1])
            j = mine[on_cpu & (thread[src_row] == th) & (thread[dst_row] == th)]
            out[j] = np.maximum(out[j], covered_between(t[graph.src[j]], t[graph.dst[j]], union))
            call_t = t[lo + 2 * calls]
            from_here = (thread[calls] == th) & (covered_between(call_t, call_t + 1, union) > 0)
            launched[gpu_rows[from_here]] = True
        k = mine[launched[dst_row]]  # into GPU work launched from inside: all of it
        out[k] = np.maximum(out[k], graph.weight[k])

    def _parts(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if g not in self._local:
            clip = self.graph.graphs[g].clip
            thread, _ = thread_ids(clip.pid, clip.tid)
            gpu = (clip.kind == KIND_KERNEL) | (clip.kind == KIND_SYNC) | (clip.stream >= 0)
            launcher = np.where(gpu, clip.position_of(clip.index_correlation), -1)
            mine = np.nonzero(self._same & (self._owner == g))[0]
            self._local[g] = (thread, gpu, launcher, mine)
        return self._local[g]
