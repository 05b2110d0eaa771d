"""Build a native edge set: tracegraph's own dependency graph and critical path, per rank.

`build_native_edge_set(db, run=..., options=..., window=..., all_steps=...)` re-reads each
rank's trace file (the events HTA's semantics need include some that are not nodes: cuda_sync
events, GPU annotations), builds every window's graph with whole-array passes
(`native_build`), joins the ranks of each step through their collectives (`native_crossrank`,
plain native only), and swaps the edge set into the database in one write. With
`emulate(version)` options the edge set is named `native:<version>` and equals that HTA
release's own edge set edge for edge.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import TraceFormatError
from ..parse import ParseOptions, RankTrace, parse_file
from ..store import GraphStore
from .errors import EdgeSetError
from .native_build import RankBuild, WindowResult, build_rank
from .native_cache import load_sources, store_sources
from .native_crossrank import CrossRankPath, PathEdge, cross_rank_path
from .native_edges import TYPE_NAMES
from .native_frame import FrameSource, frame_source
from .native_options import NativeOptions
from .native_store import (
    collective_members,
    edge_set_row,
    first_of_each_edge,
    inferred_sync_rows,
    replace_edge_sets,
    run_ranks,
    window_rows,
)
from .native_window import Window

Progress = Callable[[str, int, int], None]
TOOL_VERSION = "0.1.0"
CROSS_RANK_SUFFIX = ":cross-rank"


@dataclass(frozen=True)
class RankSummary:
    """What the builder gave for one rank."""

    rank: int
    status: str  # "ok" | "failed" (no window has a path)
    message: str
    path_length_ns: int | None  # summed over the rank's windows
    windows: tuple[dict[str, object], ...]
    edges_by_type: dict[str, int]
    critical_path_by_type: dict[str, int]
    inferred_syncs: int
    skipped_edges: int
    seconds: dict[str, float]


@dataclass(frozen=True)
class NativeEdgeSetResult:
    """The edge set written: its name, per-rank summaries, cross-rank paths, load counts."""

    name: str
    run: str
    options: NativeOptions
    window: Window
    all_steps: bool
    ranks: tuple[RankSummary, ...]
    cross_rank: tuple[CrossRankPath, ...]
    edges_loaded: int
    inferred_syncs: int
    seconds: dict[str, float]


def build_native_edge_set(
    db: Path,
    *,
    run: str | None = None,
    options: NativeOptions | None = None,
    window: Window | None = None,
    all_steps: bool = False,
    progress: Progress | None = None,
) -> NativeEdgeSetResult:
    """Build and (re)place the native edge set of `run` in `db`; see the module docstring."""
    options = options or NativeOptions()
    window = window or Window()
    report = progress or (lambda stage, done, total: None)
    began = time.perf_counter()
    if not Path(db).exists():
        raise EdgeSetError(f"{db}: no such database")
    with GraphStore(Path(db), read_only=True) as store:
        run, run_idx, files, counts = run_ranks(store, run)
        members = collective_members(store, run) if options.cross_rank else {}
        pid_ranks = _pid_ranks(store, run_idx) if len(set(files.values())) < len(files) else {}
    if not files:
        raise EdgeSetError(f"{db}: run '{run}' has no ranks")
    builds: list[RankBuild] = []
    stage = f"building {options.edge_set_name} edges"
    report(stage, 0, len(files))
    for source in _rank_sources(Path(db), files, counts, pid_ranks):
        builds.append(build_rank(source, options, window, all_steps))
        report(stage, len(builds), len(files))
    built = time.perf_counter()
    name = options.edge_set_name
    paths = _cross_rank(builds, members) if options.cross_rank and len(builds) > 1 else []
    tables, summaries = _edge_tables(builds, run_idx, name)
    extra = _collective_rows(paths, run_idx, name)
    edges = first_of_each_edge(pa.concat_tables([*tables, extra]))
    inferred = _inferred_rows(builds, run_idx) if options.infer_syncs else None
    row = edge_set_row(
        run,
        name,
        TOOL_VERSION,
        {
            **_options_json(options),
            "annotation": window.annotation,
            "instance": window.instance,
            "all_steps": all_steps,
        },
        _window_json(window, all_steps, summaries, paths),
        {str(s.rank): _rank_json(s) for s in summaries},
    )
    sets = [(row, edges)]
    if paths:
        sets.append(_cross_rank_set(run, run_idx, name, options, window, all_steps, paths))
    report(f"loading {name} edges", 0, 1)
    loaded = replace_edge_sets(Path(db), run_idx, sets, inferred)
    report(f"loading {name} edges", 1, 1)
    return NativeEdgeSetResult(
        name,
        run,
        options,
        window,
        all_steps,
        tuple(summaries),
        tuple(paths),
        loaded,
        int(inferred.num_rows) if inferred is not None else 0,
        {"build": built - began, "total": time.perf_counter() - began},
    )


def _rank_sources(
    db: Path, files: dict[int, str], counts: dict[int, int], pid_ranks: dict[int, int]
) -> list[FrameSource]:
    """Each rank's frame source: from the cache, else re-read from its file (and cached)."""
    by_file: dict[str, list[int]] = {}
    for rank, file in sorted(files.items()):
        by_file.setdefault(file, []).append(rank)
    out: list[FrameSource] = []
    for file, ranks in by_file.items():
        path = Path(file)
        if not path.is_file():
            raise EdgeSetError(f"{file}: source trace of rank(s) {ranks} is gone")
        sources = load_sources(db, path)
        if sources is None:
            sources = [frame_source(t) for t in _reread(path, ranks, counts, pid_ranks)]
            store_sources(db, path, sources)
        found = {s.rank: s for s in sources}
        if len(ranks) == 1 and len(sources) == 1:
            found = {ranks[0]: replace(sources[0], rank=ranks[0])}
        for rank in ranks:
            if rank not in found:
                raise EdgeSetError(f"{file}: re-reading it found no events of rank {rank}")
            out.append(found[rank])
    return out


def _reread(
    path: Path, ranks: list[int], counts: dict[int, int], pid_ranks: dict[int, int]
) -> list[RankTrace]:
    """The file's ranks as at ingest; a rank whose event count changed fails the build."""
    try:
        traces = parse_file(path)
    except TraceFormatError:
        traces = parse_file(path, ParseOptions(rank_of_pid=pid_ranks))
    if len(ranks) == 1 and len(traces) == 1:
        traces = [_as_rank(traces[0], ranks[0])]
    for trace in traces:
        labels = trace.events["label"].to_numpy(zero_copy_only=False)
        n = int(np.isin(labels, ["Op", "Runtime", "Kernel"]).sum())
        if trace.rank in counts and n != counts[trace.rank]:
            raise EdgeSetError(
                f"{trace.file}: re-reading it gave {n} events for rank {trace.rank}, the "
                f"database holds {counts[trace.rank]}; re-ingest the run"
            )
    return traces


def _as_rank(trace: RankTrace, rank: int) -> RankTrace:
    if trace.rank == rank:
        return trace
    return RankTrace(
        trace.file,
        rank,
        trace.events,
        trace.world_size,
        trace.schema_version,
        trace.base_time_ns,
        trace.device,
        trace.distributed_info,
    )


def _pid_ranks(store: GraphStore, run_idx: int) -> dict[int, int]:
    """CPU pid → rank as ingested (for re-reading merged files whose pids name no rank)."""
    from .. import schema

    lo = int(schema.event_key(run_idx, 0, 0))
    hi = lo + (1 << (schema.RANK_BITS + schema.EV_BITS))
    pairs: dict[int, set[int]] = {}
    for label in ("Op", "Runtime"):
        table = store.run(
            f"MATCH (n:{label}) WHERE n.id >= {lo} AND n.id < {hi} "
            "RETURN DISTINCT n.pid AS pid, n.rank AS rank"
        ).table
        for pid, rank in zip(table["pid"].to_pylist(), table["rank"].to_pylist(), strict=True):
            if pid is not None:
                pairs.setdefault(int(pid), set()).add(int(rank))
    return {pid: next(iter(r)) for pid, r in pairs.items() if len(r) == 1}


def _edge_tables(
    builds: list[RankBuild], run_idx: int, name: str
) -> tuple[list[pa.Table], list[RankSummary]]:
    tables: list[pa.Table] = []
    summaries: list[RankSummary] = []
    for b in builds:
        offset, skipped, length = 0, 0, 0
        windows = []
        by_type: dict[str, int] = {}
        on_path: dict[str, int] = {}
        for w in b.windows:
            windows.append(_window_entry(w, offset))
            if w.graph is None:
                continue
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
            RankSummary(
                b.rank,
                "ok" if ok else "failed",
                message,
                length if ok else None,
                tuple(windows),
                by_type,
                on_path,
                len(b.inferred) if b.inferred is not None else 0,
                skipped,
                {k: round(v, 4) for k, v in b.seconds.items()},
            )
        )
    return tables, summaries


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
        end = g.bounds[1] if np.isfinite(g.bounds[1]) else last_end
        entry.update(
            start_ns=start,
            end_ns=(int(end) + g.clip.origin) * g.unit_ns,
            path_length_ns=int(g.path.length) * g.unit_ns,
            path_order=[path_from, path_from + len(g.path.edges)],
            seconds=round(w.seconds, 4),
        )
    return entry


def _rank_json(s: RankSummary) -> dict[str, object]:
    return {
        "rank": s.rank,
        "status": s.status,
        "message": s.message,
        "path_length_ns": s.path_length_ns,
        "edges": s.edges_by_type,
        "critical_path_edges": s.critical_path_by_type,
        "inferred_syncs": s.inferred_syncs,
        "skipped_edges": s.skipped_edges,
        "windows": len(s.windows),
        "seconds": s.seconds,
    }


def _window_json(
    window: Window, all_steps: bool, summaries: list[RankSummary], paths: list[CrossRankPath]
) -> dict[str, object]:
    return {
        "annotation": window.annotation if not all_steps else "ProfilerStep",
        "instance": window.instance if not all_steps else "all",
        "whole_trace": window.whole_trace and not all_steps,
        "all_steps": all_steps,
        "ranks": {str(s.rank): list(s.windows) for s in summaries},
        "cross_rank": [_path_summary(p) for p in paths],
    }


def _path_summary(p: CrossRankPath) -> dict[str, object]:
    return {
        "step": p.step,
        "length_ns": p.length_ns,
        "edges": len(p.edges),
        "rank_ns": {str(r): ns for r, ns in sorted(p.rank_ns.items())},
        "stragglers": list(p.stragglers),
        "bound_by_rank": p.bound_by_rank,
        "bound_by_op": p.bound_by_op,
    }


def _options_json(options: NativeOptions) -> dict[str, object]:
    import json

    return json.loads(options.to_json())


def _cross_rank(
    builds: list[RankBuild], members: dict[int, list[tuple[int, int]]]
) -> list[CrossRankPath]:
    steps: dict[str, list] = {}
    for b in builds:
        for w in b.windows:
            if w.graph is not None:
                steps.setdefault(w.step or w.window.label(), []).append(w.graph)
    out = []
    for step, graphs in steps.items():
        if len(graphs) > 1:
            path = cross_rank_path(step, graphs, members)
            if path is not None:
                out.append(path)
    return out


def _path_table(edges: list[PathEdge], run_idx: int, name: str, order: list[int]) -> pa.Table:
    from .. import schema

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


def _collective_rows(paths: list[CrossRankPath], run_idx: int, name: str) -> pa.Table:
    """The collective edges of every step, in the main edge set (off the per-rank paths)."""
    edges = [e for p in paths for e in p.collective_edges]
    return _path_table(edges, run_idx, name, [-1] * len(edges))


def _cross_rank_set(
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
        TOOL_VERSION,
        {
            **_options_json(options),
            "annotation": window.annotation,
            "instance": window.instance,
            "all_steps": all_steps,
            "kind": "cross_rank_path",
        },
        {"all_steps": all_steps, "cross_rank": [_path_summary(p) for p in paths]},
        {str(r): {"rank": r, "status": "ok", "path_length_ns": None} for r in ranks},
    )
    return row, first_of_each_edge(pa.concat_tables(tables))


def _inferred_rows(builds: list[RankBuild], run_idx: int) -> pa.Table:
    tables = [
        inferred_sync_rows(b.frame, b.inferred, run_idx)
        for b in builds
        if b.inferred is not None and b.frame is not None
    ]
    if not tables:
        return inferred_sync_rows_empty()
    return pa.concat_tables(tables)


def inferred_sync_rows_empty() -> pa.Table:
    from .. import schema

    fields = list(schema.arrow_schema(schema.SYNCS))
    fields += [pa.field("from_label", pa.string()), pa.field("to_label", pa.string())]
    return pa.schema(fields).empty_table()
