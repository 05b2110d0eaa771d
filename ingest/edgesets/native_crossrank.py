"""The job's critical path for one step: every rank's graph joined through its collectives.

A collective ends on every rank no earlier than its last participant arrives. For each
collective instance (the `Collective` nodes and their `PART_OF` participants), the participant
that started last, L, is the one the others waited for: an edge from L's start to every other
participant's end carries what remains after L arrived (`P.end - L.start`), and each waiting
participant's own span counts only that part (the rest was waiting, not work). The longest
path through the union of the ranks' graphs then crosses to the rank that held everyone up,
so the straggler and the op that bound the step show on the path.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..critical_path import longest_path
from .native_edges import COLLECTIVE_DEPENDENCY, OPERATOR_KERNEL
from .native_frame import NODE_LABEL
from .native_graph import WindowGraph


@dataclass(frozen=True)
class PathEdge:
    """One edge of a cross-rank path: endpoints as (rank, ev_idx, is_start), type, weight."""

    src_rank: int
    src_ev_idx: int
    src_start: bool
    dst_rank: int
    dst_ev_idx: int
    dst_start: bool
    kind: int
    weight_ns: int
    src_label: str | None  # graph node label of each end (None: not a node of ours)
    dst_label: str | None


@dataclass(frozen=True)
class CrossRankPath:
    """The job's critical path through one step, and where its time went."""

    step: str
    length_ns: int
    edges: tuple[PathEdge, ...]
    rank_ns: dict[int, int]  # path time spent on each rank
    stragglers: tuple[int, ...]  # ranks every other participant waited for, along the path
    bound_by_rank: int
    bound_by_op: str
    collective_edges: tuple[PathEdge, ...]  # every collective edge of the step (not only on path)


def cross_rank_path(
    step: str, graphs: list[WindowGraph], participants: dict[int, list[tuple[int, int]]]
) -> CrossRankPath | None:
    """Join the graphs (one per rank, same step) through the collectives and find the path."""
    if not graphs:
        return None
    offsets = np.cumsum([0] + [2 * g.clip.n for g in graphs])
    by_rank = {g.rank: i for i, g in enumerate(graphs)}
    src, dst, kind, weight = [], [], [], []
    node_rank = np.concatenate([np.full(2 * g.clip.n, g.rank, np.int64) for g in graphs])
    for i, g in enumerate(graphs):
        src.append(g.edges.src + offsets[i])
        dst.append(g.edges.dst + offsets[i])
        kind.append(g.edges.kind.astype(np.int64))
        weight.append(g.path_weight * g.unit_ns)
    s, d = np.concatenate(src), np.concatenate(dst)
    k, w = np.concatenate(kind), np.concatenate(weight)
    span_index = {(int(a), int(b)): j for j, (a, b) in enumerate(zip(s, d, strict=True))}
    extra_src, extra_dst, extra_w = [], [], []
    for members in participants.values():
        present = []
        for rank, ev in members:
            if rank not in by_rank:
                continue
            i = by_rank[rank]
            g = graphs[i]
            row = int(g.clip.position_of(np.array([ev]))[0])
            if row < 0 or (2 * row, 2 * row + 1) not in _span_pairs(g):
                continue
            start = (int(g.clip.ts[row]) + g.clip.origin) * g.unit_ns
            end = (int(g.clip.end[row]) + g.clip.origin) * g.unit_ns
            present.append((start, rank, int(offsets[i]) + 2 * row, end))
        if len(present) < 2:
            continue
        last = max(present, key=lambda p: (p[0], -p[1]))
        for start, _rank, node, end in present:
            if node == last[2]:
                continue
            remaining = max(0, end - last[0])
            j = span_index.get((node, node + 1))
            if j is not None and k[j] == OPERATOR_KERNEL and start < last[0]:
                w[j] = remaining
            extra_src.append(last[2])
            extra_dst.append(node + 1)
            extra_w.append(remaining)
    s = np.concatenate([s, np.array(extra_src, np.int64)])
    d = np.concatenate([d, np.array(extra_dst, np.int64)])
    k = np.concatenate([k, np.full(len(extra_src), COLLECTIVE_DEPENDENCY, np.int64)])
    w = np.concatenate([w, np.array(extra_w, np.int64)])
    path = longest_path(s, d, w, int(offsets[-1]))
    edges = tuple(_edge(graphs, offsets, node_rank, s, d, k, w, j) for j in path.edges.tolist())
    coll = tuple(
        _edge(graphs, offsets, node_rank, s, d, k, w, j)
        for j in range(len(s) - len(extra_src), len(s))
    )
    rank_ns: dict[int, int] = defaultdict(int)
    for e in edges:
        rank_ns[e.dst_rank] += e.weight_ns
    stragglers = tuple(e.src_rank for e in edges if e.kind == COLLECTIVE_DEPENDENCY)
    bound_rank = max(rank_ns, key=rank_ns.__getitem__) if rank_ns else graphs[0].rank
    bound_op = _heaviest_op(graphs[by_rank[bound_rank]], edges, bound_rank)
    return CrossRankPath(
        step, int(path.length), edges, dict(rank_ns), stragglers, bound_rank, bound_op, coll
    )


def _span_pairs(graph: WindowGraph) -> set[tuple[int, int]]:
    cached = getattr(graph, "_spans", None)
    if cached is None:
        e = graph.edges
        cached = {(int(a), int(b)) for a, b in zip(e.src, e.dst, strict=True) if b == a + 1}
        object.__setattr__(graph, "_spans", cached)
    return cached


def _edge(
    graphs: list[WindowGraph],
    offsets: np.ndarray,
    node_rank: np.ndarray,
    s: np.ndarray,
    d: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    j: int,
) -> PathEdge:
    def locate(node: int) -> tuple[int, int, bool, str | None]:
        i = int(np.searchsorted(offsets, node, side="right")) - 1
        local = node - int(offsets[i])
        clip = graphs[i].clip
        label = NODE_LABEL.get(int(clip.kind[local // 2]))
        return int(node_rank[node]), int(clip.ev_idx[local // 2]), local % 2 == 0, label

    a, b = locate(int(s[j])), locate(int(d[j]))
    return PathEdge(a[0], a[1], a[2], b[0], b[1], b[2], int(k[j]), int(w[j]), a[3], b[3])


def _heaviest_op(graph: WindowGraph, edges: tuple[PathEdge, ...], rank: int) -> str:
    """Name of the event with the most path time on that rank."""
    time: dict[int, int] = defaultdict(int)
    for e in edges:
        if e.dst_rank == rank:
            time[e.dst_ev_idx] += e.weight_ns
    if not time:
        return ""
    ev = max(time, key=time.__getitem__)
    row = int(graph.clip.position_of(np.array([ev]))[0])
    return graph.clip.name.at(row) if row >= 0 else ""
