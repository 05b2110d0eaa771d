"""Segments and savings (ingest/edgesets/native/segments.py, savings.py) hold on every shared
trace and step: segments sum exactly to the path at every level, no level has more than 15, the
path lies inside its step's window on every CPU thread, a saving equals networkx's longest path
recomputed with that work's time taken out, and the rank that bound a step is its straggler
wherever the straggler caused more than half of the step's wait."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tracegraph.ingest.edgesets.native.edge_set import build_each_step
from tracegraph.ingest.edgesets.native.invariants import node_time_of
from tracegraph.ingest.edgesets.native.savings import Savings
from tracegraph.ingest.edgesets.native.segments import (
    MAX_LINES,
    SMALL_SHARE,
    Segment,
    flatten,
    path_segments,
    step_segments,
)
from tracegraph.ingest.edgesets.native.step_graph import StepGraph

from ...conftest import TracePool

NETWORKX_EDGES = 40_000  # graphs up to this size get the networkx oracle (seconds each)


def _first_of_unit(traces: TracePool, shared_trace: Path) -> bool:
    return traces.paths(traces.unit_of(shared_trace))[0] == shared_trace


def _stories(db: Path) -> list[tuple[StepGraph, np.ndarray, object]]:
    """Every step graph of the run (across ranks where joined, else each rank's window) with
    its path's edges, and the cross-rank path (or None)."""
    built = build_each_step(db)
    out: list[tuple[StepGraph, np.ndarray, object]] = []
    for p in built.paths:
        assert p.graph is not None and p.path_edges is not None
        out.append((p.graph, p.path_edges, p))
    for b in built.builds:
        for w in b.windows:
            if w.graph is not None:
                out.append((StepGraph.of_window(w.step, w.graph), w.graph.path.edges, None))
    return out


def _check_sums(segments: tuple[Segment, ...] | list[Segment], total: int, small_ns: int) -> None:
    """Each level sums to its parent, holds at most MAX_LINES, and has no two consecutive
    segments under `small_ns` unless all of it is (a folded line's parts)."""
    assert len(segments) <= MAX_LINES
    assert sum(s.ns for s in segments) == total
    small = [s.ns < small_ns for s in segments]
    if not all(small):
        assert not any(a and b for a, b in zip(small, small[1:], strict=False)), [
            (s.name, s.ns) for s in segments
        ]
    for s in segments:
        if s.children:
            _check_sums(s.children, s.ns, small_ns)


def test_segments_windows_savings_and_verdicts_hold(traces: TracePool, shared_trace: Path) -> None:
    if not _first_of_unit(traces, shared_trace):
        pytest.skip("checked with the first file of its job")
    db = traces.db_of(shared_trace).db
    stories = _stories(db)
    for graph, path, crossing in stories:
        length = int(graph.weight[path].sum())
        assert length == graph.longest().length
        segments = path_segments(graph, path, depth=4)
        _check_sums(segments, length, int(length * SMALL_SHARE))
        for w in graph.graphs:  # every CPU thread's nodes inside the step's window
            c = w.clip
            if np.isfinite(w.bounds[1]):
                cpu = c.stream < 0
                t = node_time_of(c)
                assert (t[1::2][cpu] <= w.bounds[1]).all() and (c.ts[cpu] >= w.bounds[0]).all()
        if crossing is not None:
            _check_verdict(crossing)
    _check_savings(stories)


def _check_verdict(path: object) -> None:
    st = path.straggler  # type: ignore[attr-defined]
    waited = sum(path.wait_ns.values())  # type: ignore[attr-defined]
    if st is not None and waited and st.caused_wait_ns > 0.5 * waited:
        assert path.bound_by_rank == st.rank, (path.step, st)  # type: ignore[attr-defined]


def _check_savings(stories: list[tuple[StepGraph, np.ndarray, object]]) -> None:
    """Top-level savings against networkx's longest path over the same cut weights."""
    nx = pytest.importorskip("networkx")
    checked = 0
    for graph, path, _ in stories:
        if len(graph.src) > NETWORKX_EDGES or checked >= 6:
            continue
        savings = Savings(graph)
        segments = step_segments(graph, path, depth=1)
        for seg in sorted(segments, key=lambda s: -s.ns)[:3]:
            if seg.saving_ns is None:
                continue
            if seg.rows:
                cut = np.zeros(len(graph.weight), np.int64)
                for g, row in seg.rows:
                    cut = np.maximum(cut, savings.cut_ranges(g, np.array([row])))
                cut_weight = np.maximum(graph.weight - cut, 0)
            else:
                cut_weight = graph.weight.copy()
                cut_weight[path[seg.first : seg.last]] = 0
            before = _networkx_length(nx, graph, graph.weight)
            after = _networkx_length(nx, graph, cut_weight)
            assert seg.saving_ns == before - after, (graph.step, seg.name)
            assert 0 <= seg.saving_ns <= before
            checked += 1


def _networkx_length(nx: object, graph: StepGraph, weight: np.ndarray) -> int:
    g = nx.DiGraph()  # type: ignore[attr-defined]
    for s, d, w in zip(graph.src.tolist(), graph.dst.tolist(), weight.tolist(), strict=True):
        if g.has_edge(s, d):  # parallel edges: the heavier (the longest path takes it)
            w = max(w, g.edges[s, d]["weight"])
        g.add_edge(s, d, weight=w)
    return int(nx.dag_longest_path_length(g, weight="weight"))  # type: ignore[attr-defined]


def test_a_folded_line_and_a_coalesced_run_open_into_their_parts() -> None:
    """Past MAX_LINES consecutive small segments fold into one line whose parts they are; the
    top level holds at most MAX_LINES and still sums to the path."""
    from tracegraph.ingest.edgesets.native.segments import _fold

    parts = [Segment(0, f"op{i}", "range", 10 + (i == 3) * 1000, i, i + 1) for i in range(40)]
    folded = _fold(parts)
    assert len(folded) <= MAX_LINES
    assert sum(s.ns for s in folded) == sum(s.ns for s in parts)
    assert [s.name for s in flatten(folded) if s.kind != "folded"] == [p.name for p in parts]
