"""The native builder's results as rows and JSON: DEP tables, the EdgeSet node's summaries,
the cross-rank edge set, inferred SYNCS."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ... import schema
from ..records import RankOutcome, edge_set_row
from .crossrank import CrossRankPath, PathEdge
from .edges import TYPE_NAMES
from .options import NativeOptions
from .rank_build import RankBuild, WindowResult
from .segments import step_segments
from .step_graph import StepGraph
from .store import first_of_each_edge, inferred_sync_rows, window_rows
from .window import Window

TOOL_VERSION = "0.1.0"
CROSS_RANK_SUFFIX = ":cross-rank"


def edge_tables(
    builds: list[RankBuild], run_idx: int, name: str
) -> tuple[list[pa.Table], list[RankOutcome]]:
    tables: list[pa.Table] = []
    summaries: list[RankOutcome] = []
    for b in builds:
        offset, skipped, length = 0, 0, 0
        windows = []
        by_type: dict[str, int] = {}
        on_path: dict[str, int] = {}
        skewed: dict[str, int] = {}
        back = over = past = 0
        first_break = ""
        for w in b.windows:
            windows.append(_window_entry(w, offset))
            if w.graph is None:
                continue
            for kind, n in w.graph.skewed.items():
                skewed[kind] = skewed.get(kind, 0) + n
            br = w.graph.breaks
            back, over = back + br.backward_edges, over + br.overweight_edges
            past += 1 if br.path_over_span_ns else 0
            first_break = first_break or br.first
            table, dropped = window_rows(w.graph, run_idx, name, offset)
            tables.append(table)
            skipped += dropped
            offset += len(w.graph.path.edges)
            length += int(w.graph.path.length) * w.graph.unit_ns
            _count(by_type, w.graph.edges.kind)
            _count(on_path, w.graph.edges.kind[w.graph.path.edges])
        ok = any(w.ok for w in b.windows)
        message = b.message or "; ".join(sorted({w.message for w in b.windows if not w.ok}))
        summaries.append(
            RankOutcome(
                b.rank,
                "ok" if ok else "failed",
                message,
                length if ok else None,
                tuple(windows),
                by_type,
                on_path,
                skipped,
                {k: round(v, 4) for k, v in b.seconds.items()},
                skewed,
                _breaks_text(back, over, past, first_break),
                len(b.inferred) if b.inferred is not None else 0,
            )
        )
    return tables, summaries


def _breaks_text(back: int, over: int, past: int, first: str) -> str:
    if not (back or over or past):
        return ""
    return (
        f"HTA's graph breaks tracegraph's invariants: {back:,} edges back in time, {over:,} "
        f"weighing more than their Δt, {past} window(s) with a path longer than the window; "
        f"first: {first}"
    )


def _count(into: dict[str, int], kinds: np.ndarray) -> None:
    for kind, n in zip(*np.unique(kinds, return_counts=True), strict=True):
        into[TYPE_NAMES[int(kind)]] = into.get(TYPE_NAMES[int(kind)], 0) + int(n)


def _window_entry(w: WindowResult, path_from: int) -> dict[str, object]:
    entry: dict[str, object] = {
        "annotation": w.window.annotation,
        "instance": w.window.instance,
        "step": w.step,
        "status": "ok" if w.ok else "failed",
        "message": w.message,
    }
    if w.graph is not None:
        g = w.graph
        start = (int(g.bounds[0]) + g.clip.origin) * g.unit_ns
        last_end = int(g.clip.end.max(initial=0))
        # the step's CPU range, and past it the GPU work launched inside it (CPU rows are cut
        # at the range's end: `window.clip`)
        end = max(g.bounds[1], last_end) if np.isfinite(g.bounds[1]) else last_end
        entry.update(
            start_ns=start,
            end_ns=(int(end) + g.clip.origin) * g.unit_ns,
            path_length_ns=int(g.path.length) * g.unit_ns,
            breaks=g.breaks.as_dict() if g.breaks.any else None,
            path_order=[path_from, path_from + len(g.path.edges)],
            seconds=round(w.seconds, 4),
            segments=[
                seg.to_json() for seg in step_segments(StepGraph.of_window(w.step, g), g.path.edges)
            ],
        )
    return entry


def window_json(
    window: Window, all_steps: bool, summaries: list[RankOutcome], paths: list[CrossRankPath]
) -> dict[str, object]:
    return {
        "annotation": window.annotation if not all_steps else "ProfilerStep",
        "instance": window.instance if not all_steps else "all",
        "whole_trace": window.whole_trace and not all_steps,
        "all_steps": all_steps,
        "ranks": {str(s.rank): list(s.windows) for s in summaries},
        "cross_rank": [path_summary(p) for p in paths],
    }


def path_summary(p: CrossRankPath) -> dict[str, object]:
    """A cross-rank path as stored in the EdgeSet's window JSON (what the read side shows)."""
    st = p.straggler
    return {
        "step": p.step,
        "length_ns": p.length_ns,
        "span_ns": p.span_ns,
        "edges": len(p.edges),
        "rank_ns": {str(r): ns for r, ns in sorted(p.rank_ns.items())},
        "wait_ns": {str(r): ns for r, ns in sorted(p.wait_ns.items())},
        "clock_offset_ns": {str(r): ns for r, ns in sorted(p.clock_offset_ns.items())},
        "stragglers": list(p.stragglers),
        "straggler": None
        if st is None
        else {
            "rank": st.rank,
            "last_at": st.last_at,
            "collectives": st.collectives,
            "lateness_ns": st.lateness_ns,
            "at": st.at,
            "caused_wait_ns": st.caused_wait_ns,
            "ev_idx": st.ev_idx,
        },
        "bound_by_rank": p.bound_by_rank,
        "bound_by_op": p.bound_by_op,
        "hotspot": p.hotspot,
        "hotspot_ns": p.hotspot_ns,
        "segments": [seg.to_json() for seg in p.segments],
        "summary_ranks": list(p.summarised),
    }


def options_json(options: NativeOptions) -> dict[str, object]:
    return json.loads(options.to_json())


def _path_table(edges: list[PathEdge], run_idx: int, name: str, order: list[int]) -> pa.Table:
    keep = [
        (e, o)
        for e, o in zip(edges, order, strict=True)
        if e.src_label is not None and e.dst_label is not None
    ]
    rows = [e for e, _ in keep]
    return pa.table(
        {
            "from_id": pa.array(
                [schema.event_key(run_idx, e.src_rank, e.src_ev_idx) for e in rows], pa.int64()
            ),
            "to_id": pa.array(
                [schema.event_key(run_idx, e.dst_rank, e.dst_ev_idx) for e in rows], pa.int64()
            ),
            "edge_set": pa.array([name] * len(rows), pa.string()),
            "type": pa.array([TYPE_NAMES[e.kind] for e in rows], pa.string()),
            "src_boundary": pa.array(
                ["start" if e.src_start else "end" for e in rows], pa.string()
            ),
            "dst_boundary": pa.array(
                ["start" if e.dst_start else "end" for e in rows], pa.string()
            ),
            "weight_ns": pa.array([e.weight_ns for e in rows], pa.int64()),
            "on_critical_path": pa.array([o >= 0 for _, o in keep], pa.bool_()),
            "path_order": pa.array([o for _, o in keep], pa.int64()),
            "from_label": pa.array([e.src_label for e in rows], pa.string()),
            "to_label": pa.array([e.dst_label for e in rows], pa.string()),
        }
    )


def collective_rows(paths: list[CrossRankPath], run_idx: int, name: str) -> pa.Table:
    """The collective edges of every step, in the main edge set (off the per-rank paths)."""
    edges = [e for p in paths for e in p.collective_edges]
    return _path_table(edges, run_idx, name, [-1] * len(edges))


def cross_rank_set(
    run: str,
    run_idx: int,
    name: str,
    options: NativeOptions,
    window: Window,
    all_steps: bool,
    paths: list[CrossRankPath],
) -> tuple[dict[str, object], pa.Table]:
    """The cross-rank paths as an edge set of their own (path edges only, in order)."""
    set_name = name + CROSS_RANK_SUFFIX
    tables, offset = [], 0
    for p in paths:
        order = list(range(offset, offset + len(p.edges)))
        tables.append(_path_table(list(p.edges), run_idx, set_name, order))
        offset += len(p.edges)
    ranks = sorted({e.dst_rank for p in paths for e in p.edges})
    row = edge_set_row(
        run,
        set_name,
        "tracegraph",
        TOOL_VERSION,
        {
            **options_json(options),
            "annotation": window.annotation,
            "instance": window.instance,
            "all_steps": all_steps,
            "kind": "cross_rank_path",
        },
        {"all_steps": all_steps, "cross_rank": [path_summary(p) for p in paths]},
        {str(r): {"rank": r, "status": "ok", "path_length_ns": None} for r in ranks},
    )
    return row, first_of_each_edge(pa.concat_tables(tables))


def inferred_rows(builds: list[RankBuild], run_idx: int) -> pa.Table:
    tables = [
        inferred_sync_rows(b.frame, b.inferred, run_idx)
        for b in builds
        if b.inferred is not None and b.frame is not None
    ]
    if not tables:
        return inferred_sync_rows_empty()
    return pa.concat_tables(tables)


def inferred_sync_rows_empty() -> pa.Table:
    fields = list(schema.arrow_schema(schema.SYNCS))
    fields += [pa.field("from_label", pa.string()), pa.field("to_label", pa.string())]
    return pa.schema(fields).empty_table()
