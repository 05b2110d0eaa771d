"""Longest (critical) path over a dependency DAG: a topological DP in numpy, pure and headless.

Edges are given in the order they were added, each (src, dst) pair once. Ties are broken as
`networkx.dag_longest_path` does on a DiGraph built by adding those edges in that order, which is
what HTA calls: a node's best predecessor is the first-added edge among the longest ones, and the
path ends at the first node, in networkx's topological order (Kahn generations over nodes in
first-appearance order, successors in insertion order), with the greatest distance. A node whose
best incoming distance is negative starts a new path (networkx does the same).

Most nodes of a trace graph have one incoming edge: their distances are resolved for all of them
at once by pointer jumping to the nearest node with several incoming edges (or none); only those
junctions are visited one by one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


class CycleError(ValueError):
    """The graph has a cycle, so it has no longest path."""


@dataclass(frozen=True)
class LongestPath:
    """Path nodes (ids), the indices of its edges in the input, its length, every distance."""

    nodes: np.ndarray
    edges: np.ndarray
    length: int
    distance: np.ndarray  # per node id (0 for nodes no edge touches)


def longest_path(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n_nodes: int | None = None
) -> LongestPath:
    """The longest path, with networkx's tie-breaking (see the module docstring)."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    weight = np.asarray(weight, np.int64)
    n = int(n_nodes if n_nodes is not None else max(src.max(initial=-1), dst.max(initial=-1)) + 1)
    if len(src) == 0:
        return LongestPath(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, np.zeros(n, np.int64))
    if (weight < 0).any():
        return _reference(src, dst, weight, n)
    dag = _Dag(src, dst, n)
    dist, best_edge = dag.distances(weight)
    touched = dag.touched
    top = dist[touched].max()
    candidates = touched[dist[touched] == top]
    end = candidates[0] if len(candidates) == 1 else dag.first_in_topological_order(candidates)
    nodes, edges = dag.backtrack(int(end), best_edge)
    return LongestPath(nodes, edges, int(top), dist)


class PathLengths:
    """One DAG's longest-path length under many weightings (the what-if DP: a segment's or a
    finding's work set to take no time). The structure is compressed once; each `length`
    costs one pass over the graph's junctions. Weights must be non-negative."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, n_nodes: int) -> None:
        self._dag = _Dag(np.asarray(src, np.int64), np.asarray(dst, np.int64), int(n_nodes))

    def length(self, weight: np.ndarray) -> int:
        if len(self._dag.src) == 0:
            return 0
        dist, _ = self._dag.distances(np.asarray(weight, np.int64))
        return int(dist[self._dag.touched].max())


class _Dag:
    """Incoming-edge structure, junction order and chain compression of one edge list."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, n: int) -> None:
        self.src, self.dst, self.n = src, dst, n
        indeg = np.bincount(dst, minlength=n)
        self.indeg = indeg
        seen = np.zeros(n, bool)
        seen[src] = True
        seen[dst] = True
        self.touched = np.nonzero(seen)[0]
        # the single incoming edge of each one-predecessor node (edge indices per dst, in order)
        self.in_order = np.argsort(dst, kind="stable")
        self.in_start = np.concatenate([[0], np.cumsum(indeg)])
        single = indeg == 1
        self.up_edge = np.full(n, -1, np.int64)
        self.up_edge[dst[single[dst]]] = np.nonzero(single[dst])[0]
        self.junctions = np.nonzero(indeg >= 2)[0]
        self.has_up = self.up_edge >= 0
        self.anchor, self.jumps = self._compress()
        self.junction_order = self._junction_order()
        # each junction's incoming edges, junction by junction in that order (in in_order's
        # order within one): what every weighting reads at the junctions, gathered once
        order = np.array(self.junction_order, np.int64)
        counts = self.in_start[order + 1] - self.in_start[order]
        into = (
            self.in_order[
                np.concatenate([np.arange(self.in_start[j], self.in_start[j + 1]) for j in order])
            ]
            if len(order)
            else np.zeros(0, np.int64)
        )
        self.into_junctions = into
        self.into_src = src[into]
        self._into = into.tolist()
        self._into_anchor = self.anchor[self.into_src].tolist()
        self._into_counts = counts.tolist()

    def _compress(self) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Nearest junction-or-source above every node along single incoming edges, by pointer
        jumping; and each jump's (nodes that moved, where from): what sums a weighting's
        offsets along the chains in the same jumps (`distances`)."""
        anchor = np.arange(self.n)
        anchor[self.has_up] = self.src[self.up_edge[self.has_up]]
        stop = self.indeg != 1
        jumps: list[tuple[np.ndarray, np.ndarray]] = []
        for _ in range(64):
            moving = np.nonzero(~stop[anchor])[0]
            if len(moving) == 0:
                return anchor, jumps
            above = anchor[moving]
            jumps.append((moving, above))
            anchor[moving] = anchor[above]
        raise CycleError("the dependency graph has a cycle")

    def _junction_order(self) -> list[int]:
        """Junctions in a topological order (Kahn over junctions and sources)."""
        junctions = self.junctions
        if len(junctions) == 0:
            return []
        is_junction = np.zeros(self.n, bool)
        is_junction[junctions] = True
        incoming = self.in_order[
            np.concatenate([np.arange(self.in_start[j], self.in_start[j + 1]) for j in junctions])
        ]
        heads = self.anchor[self.src[incoming]]
        tails = self.dst[incoming]
        dep = is_junction[heads]
        pending = np.zeros(self.n, np.int64)
        np.add.at(pending, tails[dep], 1)
        children: dict[int, list[int]] = {}
        for h, t in zip(heads[dep].tolist(), tails[dep].tolist(), strict=True):
            children.setdefault(h, []).append(t)
        left = pending.tolist()
        ready = deque(int(j) for j in junctions if left[j] == 0)
        order: list[int] = []
        while ready:
            j = ready.popleft()
            order.append(j)
            for c in children.get(j, ()):
                left[c] -= 1
                if left[c] == 0:
                    ready.append(c)
        if len(order) != len(junctions):
            raise CycleError("the dependency graph has a cycle")
        return order

    def distances(self, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Longest distance to every node and the edge it came by (-1 at path starts)."""
        n = self.n
        off = np.zeros(n, np.int64)  # distance from the node's anchor
        has_up = self.has_up
        off[has_up] = weight[self.up_edge[has_up]]
        for moving, above in self.jumps:
            off[moving] += off[above]  # the right side is read whole before any is written
        best_edge = np.where(has_up, self.up_edge, -1)
        base = np.zeros(n, np.int64)  # distance of junctions (sources stay 0)
        if self.junction_order:
            w_l = weight[self.into_junctions].tolist()
            off_l = off[self.into_src].tolist()
            anchors, into = self._into_anchor, self._into
            reached: dict[int, int] = {}  # junction → its distance (a source's is 0)
            chosen: list[int] = []
            i = 0
            for j, count in zip(self.junction_order, self._into_counts, strict=True):
                best: int | None = None
                by = -1
                for k in range(i, i + count):
                    value = reached.get(anchors[k], 0) + off_l[k] + w_l[k]
                    if best is None or value > best:
                        best, by = value, into[k]
                i += count
                reached[j] = best if best is not None else 0
                chosen.append(by)
            base[self.junction_order] = list(reached.values())
            best_edge[self.junction_order] = chosen
        return base[self.anchor] + off, best_edge

    def backtrack(self, end: int, best_edge: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        edges: list[int] = []
        node = end
        src_l, be = self.src.tolist(), best_edge.tolist()
        while be[node] >= 0:
            e = be[node]
            edges.append(e)
            node = src_l[e]
        edges.reverse()
        e_arr = np.array(edges, np.int64)
        nodes = np.concatenate([[node], self.dst[e_arr]]) if len(edges) else np.array([end])
        return nodes.astype(np.int64), e_arr

    def first_in_topological_order(self, candidates: np.ndarray) -> int:
        """The candidate networkx's `topological_sort` yields first."""
        order = _KahnOrder(self)
        best = int(candidates[0])
        for c in candidates[1:].tolist():
            if order.before(c, best):
                best = c
        return best


class _KahnOrder:
    """Pairwise order of nodes in networkx's topological sort, computed lazily."""

    def __init__(self, dag: _Dag) -> None:
        self.dag = dag
        ones = np.ones(len(dag.src), np.int64)
        self.gen, _ = dag.distances(ones)
        first = np.full(dag.n, np.iinfo(np.int64).max)
        pos = np.arange(len(dag.src))
        np.minimum.at(first, dag.src, 2 * pos)
        np.minimum.at(first, dag.dst, 2 * pos + 1)
        self.first = first  # networkx node order: first appearance, u before v
        self.releaser: dict[int, tuple[int, int]] = {}

    def _release(self, v: int) -> tuple[int, int]:
        """The predecessor whose processing released v, and the edge from it."""
        if v in self.releaser:
            return self.releaser[v]
        dag, g = self.dag, self.gen[v]
        edges = dag.in_order[dag.in_start[v] : dag.in_start[v + 1]].tolist()
        best: tuple[int, int] | None = None
        for e in edges:
            u = int(dag.src[e])
            if self.gen[u] != g - 1:
                continue
            if best is None or self.before(best[0], u):
                best = (u, e)
        assert best is not None
        self.releaser[v] = best
        return best

    def before(self, x: int, y: int) -> bool:
        """Does networkx's topological sort yield x before y?"""
        while True:
            if x == y:
                return False
            if self.gen[x] != self.gen[y]:
                return bool(self.gen[x] < self.gen[y])
            if self.gen[x] == 0:
                return bool(self.first[x] < self.first[y])
            (px, ex), (py, ey) = self._release(x), self._release(y)
            if px == py:
                return ex < ey
            x, y = px, py


def _reference(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int) -> LongestPath:
    """networkx's algorithm step by step (used when some weights are negative)."""
    succ: dict[int, list[int]] = {}
    pred: dict[int, list[tuple[int, int]]] = {}
    nodes: dict[int, None] = {}
    for e, (u, v) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        nodes.setdefault(u)
        nodes.setdefault(v)
        succ.setdefault(u, []).append(v)
        pred.setdefault(v, []).append((u, e))
    indeg = {v: len(pred.get(v, ())) for v in nodes}
    order: list[int] = []
    layer = [v for v in nodes if indeg[v] == 0]
    while layer:
        order.extend(layer)
        nxt: list[int] = []
        for u in layer:
            for v in succ.get(u, ()):
                indeg[v] -= 1
                if indeg[v] == 0:
                    nxt.append(v)
        layer = nxt
    if len(order) != len(nodes):
        raise CycleError("the dependency graph has a cycle")
    w = weight.tolist()
    dist: dict[int, tuple[int, int, int]] = {}
    for v in order:
        best: tuple[int, int, int] | None = None
        for u, e in pred.get(v, ()):
            value = dist[u][0] + w[e]
            if best is None or value > best[0]:
                best = (value, u, e)
        dist[v] = best if best is not None and best[0] >= 0 else (0, v, -1)
    end = max(dist, key=lambda x: dist[x][0])
    path_edges: list[int] = []
    v = end
    while dist[v][2] >= 0:
        path_edges.append(dist[v][2])
        v = dist[v][1]
    path_edges.reverse()
    e_arr = np.array(path_edges, np.int64)
    path = np.concatenate([[v], dst[e_arr]]) if len(path_edges) else np.array([end])
    distance = np.zeros(n, np.int64)
    for v_, d in dist.items():
        distance[v_] = d[0]
    return LongestPath(path.astype(np.int64), e_arr, int(dist[end][0]), distance)
