"""tracegraph's own edge sets hold their invariants on every input: checked against the raw JSON.

Every edge goes forward in time, weighs no more than the time it spans, and no path is longer
than its window: on every shared trace (whole trace and each ProfilerStep), on synthetic jobs
with python stacks and nested `record_function` ranges (where HTA's stack walk sends edges back
in time), and on random nestings. The times come from the oracle reader
(`tests/ingest/oracle.py`), never from the builder's own frame.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.edgesets.native.frame import FrameSource
from tracegraph.ingest.edgesets.native.graph import WindowGraph
from tracegraph.ingest.edgesets.native.options import NativeOptions, emulate
from tracegraph.ingest.edgesets.native.rank_build import build_rank
from tracegraph.ingest.edgesets.native.report import edge_tables
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.parse import parse_file

from ...conftest import TRACES, trace_files, trace_id
from ..oracle import trace_facts

PYTHON_STACKS = SyntheticConfig(
    ranks=2, steps=3, layers=4, late_rank=1, late_us=5_000, python_stacks=True, annotate=True
)


def _oracle_times(path: Path) -> dict[int, tuple[int, int]]:
    """ev_idx → (ts, dur) in ns, read from the JSON text by the independent reader."""
    facts = trace_facts(path)
    return {e.ev_idx: (e.ts, max(e.dur or 0, 0)) for e in facts.events()}


def _check_against_json(graph: WindowGraph, times: dict[int, tuple[int, int]]) -> int:
    """Assert the invariants of one window graph with times from the JSON; its edge count."""
    c, e = graph.clip, graph.edges
    ev = c.ev_idx

    def t(nodes: np.ndarray) -> np.ndarray:
        rows = ev[nodes // 2]
        ts = np.array([times[int(r)][0] for r in rows], np.int64)
        dur = np.array([times[int(r)][1] for r in rows], np.int64)
        return np.where(nodes % 2 == 0, ts, ts + dur)

    t_src, t_dst = t(e.src), t(e.dst)
    delta = t_dst - t_src
    weight = graph.path_weight * graph.unit_ns
    back = np.nonzero(delta < 0)[0]
    assert len(back) == 0, f"{len(back)} edges back in time, e.g. ev_idx {ev[e.src[back[0]] // 2]}"
    assert (weight >= 0).all() and (weight <= delta).all()
    if len(e):
        span = int(max(t_src.max(), t_dst.max()) - min(t_src.min(), t_dst.min()))
        assert graph.path.length * graph.unit_ns <= span
    return len(e)


@pytest.mark.parametrize("path", trace_files(), ids=trace_id)
def test_plain_native_holds_its_invariants_on_every_shared_trace(path: Path) -> None:
    times = _oracle_times(path)
    checked = 0
    for trace in parse_file(path):
        for all_steps in (False, True):
            build = build_rank(trace, NativeOptions(), Window(), all_steps=all_steps)
            for w in build.windows:
                if w.graph is not None:
                    checked += _check_against_json(w.graph, times)
    assert checked > 0


def test_synthetic_python_stacks_and_nested_ranges(tmp_path: Path) -> None:
    """The pattern of the bug report (`forward` (end) → `DistributedDataParallel.forward`
    (start), earlier in time, under HTA's stack walk): the time chain holds every invariant."""
    files = write_per_rank(PYTHON_STACKS, tmp_path)
    for path in files:
        times = _oracle_times(path)
        trace = parse_file(path)[0]
        native = build_rank(trace, NativeOptions(), Window(), all_steps=True)
        assert [w.step for w in native.windows] == [f"ProfilerStep#{i}" for i in range(3)]
        for w in native.windows:
            assert w.graph is not None and _check_against_json(w.graph, times) > 0


# ---- random nestings: the time chain counts each instant of a thread once -----------------


def _source(intervals: list[tuple[int, int, int]]) -> FrameSource:
    """One rank of cpu_op rows (tid, ts ns, dur ns) and nothing else."""
    n = len(intervals)
    col = {
        "ev_idx": pa.array(range(n), pa.int64()),
        "label": pa.array(["Op"] * n),
        "cat": pa.array(["cpu_op"] * n),
        "name": pa.array([f"op{i}" for i in range(n)]),
        "pid": pa.array([1] * n, pa.int64()),
        "tid": pa.array([t for t, _, _ in intervals], pa.int64()),
        "ts": pa.array([s for _, s, _ in intervals], pa.int64()),
        "dur": pa.array([d for _, _, d in intervals], pa.int64()),
    }
    for name in ("stream", "correlation", "wait_on_stream", "wait_on_event_corr", "hta_stream"):
        col[name] = pa.array([None] * n, pa.int64())
    return FrameSource(0, pa.table(col))


def _union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


intervals = st.lists(
    st.tuples(st.integers(1, 3), st.integers(0, 60), st.integers(0, 40)), min_size=1, max_size=40
)


@settings(max_examples=300, deadline=None)
@given(intervals)
def test_time_chain_counts_each_instant_once(rows: list[tuple[int, int, int]]) -> None:
    """Any overlap pattern (nested, partial, equal, zero-length) on up to three threads: the
    path is the longest thread's covered time, never more."""
    build = build_rank(_source(rows), NativeOptions(), Window())
    graph = build.windows[0].graph
    assert graph is not None
    expected = max(
        _union_length([(s, s + d) for t, s, d in rows if t == tid and d > 0])
        for tid in {t for t, _, _ in rows}
    )
    assert graph.path.length == expected
    times = {i: (s, d) for i, (_, s, d) in enumerate(rows)}
    _check_against_json(graph, times)


def test_emulation_reports_where_htas_graph_breaks_the_invariants() -> None:
    """HTA 0.6.1 adds a kernel→kernel edge between overlapping kernels of one stream on this
    trace: the emulation keeps HTA's graph (it must equal HTA) and counts the break."""
    path = TRACES / "hta/negative_queue_length_values_check/rank0.json.gz"
    if not path.is_file():
        pytest.skip(f"real traces not at {TRACES}")
    times = _oracle_times(path)
    build = build_rank(parse_file(path)[0], emulate("traceinsight-0.6.1"), Window())
    graph = build.windows[0].graph
    assert graph is not None
    ev = graph.clip.ev_idx

    def t(node: int) -> int:
        ts, dur = times[int(ev[node // 2])]
        return ts if node % 2 == 0 else ts + dur

    backward = [
        j
        for j, (a, b) in enumerate(zip(graph.edges.src, graph.edges.dst, strict=True))
        if t(int(b)) < t(int(a))
    ]
    assert len(backward) == graph.breaks.backward_edges == 1
    assert "kernel_kernel_delay" in graph.breaks.first
    summaries = edge_tables([build], 0, "native:traceinsight-0.6.1")[1]
    assert "1 edges back in time" in summaries[0].invariant_breaks
