"""`tracegraph report`: HTA's standard analyses of every rank of a run, and the findings.

Read from the run's archive a rank at a time (never the traces), computed by whole-array sweeps
(`analyses`, `collectives`), checked where computed (a share never exceeds its whole), and
returned as Arrow tables. `hta_compatible` reads the rows as HTA 0.5.0 does, to check figures
against HTA's own (no findings, no collectives: HTA has neither).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest import schema
from tracegraph.ingest.archive import read_rank, run_archive
from tracegraph.ingest.edgesets.native.crossrank import CrossRankPath
from tracegraph.ingest.edgesets.native.edge_set import build_each_step
from tracegraph.ingest.edgesets.native.frame import FrameSource
from tracegraph.ingest.edgesets.native.options import NativeOptions
from tracegraph.ingest.edgesets.native.rank_build import RankBuild, build_rank
from tracegraph.ingest.edgesets.native.segments import heaviest_on, step_segments
from tracegraph.ingest.edgesets.native.sources import rank_sources
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.edgesets.records import RunSource, pid_ranks, rank_hosts, run_source
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.store import GraphStore

from . import analyses, collectives
from .activity import exact_activity, hta_activity
from .allocations import factory_calls, large_allocations
from .contract import report_json
from .cpu import CpuEvents
from .cpu_findings import RankEvents, cpu_findings
from .dtypes import dtype_casts
from .findings import Finding, Ids, rank_findings
from .memory import SCHEMA as MEMORY_SCHEMA
from .memory import memory_rows
from .savings import (
    folded,
    ranked,
    step_graphs,
    straggler_findings,
    transfer_only,
    with_savings,
)
from .spread import SCHEMA as SPREAD_SCHEMA
from .spread import spread_rows, step_medians
from .steps import StepWindow, rows_in, step_figures, step_windows

DEFAULT_TOP = 10
HTA_MODE = "hta-compatible"


class ReportError(TracegraphError):
    """A report that cannot be made (no such rank or step, a step with --hta-compatible)."""


@dataclass(frozen=True)
class Report:
    """The analyses of one run, a table each (see `TABLES`), and the findings, most costly
    first; `bound_by` per step: the rank and op that bound it, its path's length and top-level
    segments (the native path, across ranks where the step joins them)."""

    run: str
    mode: str  # "exact" | HTA_MODE
    ranks: tuple[int, ...]
    step: int | None  # the one ProfilerStep reported (None: every step)
    tables: Mapping[str, pa.Table]
    findings: tuple[Finding, ...]
    bound_by: Mapping[int, dict[str, object]]

    def __getattr__(self, name: str) -> pa.Table:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    def to_json(self) -> dict[str, Any]:
        """The report's JSON (its contract is in the README)."""
        return report_json(self)


def build_report(
    db: Path,
    store: GraphStore,
    run: str | None = None,
    *,
    ranks: Sequence[int] | None = None,
    step: int | None = None,
    hta_compatible: bool = False,
    top: int = DEFAULT_TOP,
) -> Report:
    """The report of `run` (the database's only run when None), of every rank or of `ranks`,
    over every step or the GPU work of ProfilerStep#`step` (see `steps`)."""
    if step is not None and hta_compatible:
        raise ReportError("--step: HTA's analyses cover the whole trace; drop --hta-compatible")
    source = run_source(store, run)
    wanted = sorted(source.files) if ranks is None else sorted(set(ranks))
    unknown = [r for r in wanted if r not in source.files]
    if unknown:
        raise ReportError(
            f"{db}: run '{source.run}' has no rank(s) {unknown} (ranks: {sorted(source.files)})"
        )
    every_step = {} if hta_compatible else step_windows(store, source.run)
    windows = every_step
    if step is not None:
        windows = {r: _the_step(db, source.run, r, every_step.get(r, []), step) for r in wanted}
    read = hta_activity if hta_compatible else exact_activity
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in TABLES}
    found: list[Finding] = []
    if not hta_compatible:
        casts = dtype_casts(store, source.run, wanted)
        factories = factory_calls(store, source.run, wanted)
    # every rank's graphs, built from the rows read here (else `build_each_step` reads them
    # again), where the report is of every rank: the cross-rank paths need them all
    builds: list[RankBuild] | None = (
        [] if not hta_compatible and wanted == sorted(source.files) else None
    )
    for frame_source in _rank_sources(db, store, source, wanted):
        if builds is not None:
            builds.append(build_rank(frame_source, NativeOptions(), Window(), all_steps=True))
        gpu = whole = read(frame_source)
        mine = windows.get(gpu.rank, [])
        if step is not None:  # the step's work; `whole` still says when the GPU was busy
            gpu = whole.take(rows_in(whole, mine[0]))
        rows["steps"] += step_figures(gpu, mine)
        rows["temporal"].append(analyses.temporal_breakdown(gpu))
        rows["overlap"].append(analyses.comm_comp_overlap(gpu))
        rows["kernel_types"] += analyses.kernel_type_shares(gpu)
        rows["top_kernels"] += analyses.top_kernels(gpu, top)
        rows["idle"] += analyses.idle_breakdown(gpu)
        rows["launches"].append(analyses.launch_stats(gpu))
        if hta_compatible:
            continue
        rows["queues"] += analyses.queue_lengths(gpu)
        events = frame_source.rows if step is None else _during(frame_source.rows, mine[0])
        figures = (rows["temporal"][-1], rows["overlap"][-1])
        ids = Ids(source.run_idx, gpu.rank)
        cpu = CpuEvents.of(events)
        found += rank_findings(gpu, whole, cpu, figures, len(mine), source.run_idx)
        made = large_allocations(store, source.run, gpu.rank, cpu, factories[gpu.rank])
        rank_events = RankEvents(gpu.rank, cpu, whole, mine, ids, casts[gpu.rank], made)
        found += cpu_findings(rank_events)
    bound_by: dict[int, dict[str, object]] = {}
    if not hta_compatible:
        instances, per_rank, _, lateness = collectives.collective_rows(
            collectives.participants(store, source.run),
            every_step,
            step,
            rank_hosts(store, source.run),
        )
        rows["memory"] = memory_rows(store, source.run, wanted)
        rows["collectives"], rows["collective_ranks"] = instances, per_rank
        computed = {(r["step"], r["rank"]): r["compute_ns"] for r in rows["steps"]}
        medians = step_medians(rows["steps"])
        rows["spread"] = spread_rows("compute", computed, medians) + spread_rows(
            "late", lateness, medians
        )
        # the story (what bound each step, who was late, what fixing each finding saves) is
        # the native path's, built here in memory: the same computation `path` and `edges
        # --native` show
        built = build_each_step(db, run=source.run, depth=1, store=store, builds=builds)
        steps = step_graphs(built, step)
        paths = [p for p in built.paths if step is None or p.step == f"ProfilerStep#{step}"]
        rows["stragglers"] = _straggler_rows(paths, source.run_idx)
        bound_by = _bound_by(paths, steps)
        # folded first: a saving is a what-if over the whole step graph, so at many ranks one
        # per folded line, not one per rank
        found = with_savings(folded(transfer_only(found, paths)), steps)
        found += straggler_findings(paths, steps, source.run_idx)
    tables = {name: pa.Table.from_pylist(rows[name], schema=TABLES[name]) for name in TABLES}
    return Report(
        source.run,
        HTA_MODE if hta_compatible else "exact",
        tuple(wanted),
        step,
        tables,
        tuple(ranked(found)),
        bound_by,
    )


def _straggler_rows(paths: list[CrossRankPath], run_idx: int) -> list[dict[str, Any]]:
    """Per step, the straggler of the cross-rank verdict."""
    out = []
    for p in paths:
        st, number = p.straggler, p.step.removeprefix("ProfilerStep#")
        if st is None or not number.isdigit():
            continue
        out.append(
            {
                "step": int(number),
                "rank": st.rank,
                "wait_caused_ns": st.caused_wait_ns,
                "late_ns": st.lateness_ns,
                "collective": st.at,
                "event": schema.event_key(run_idx, st.rank, st.ev_idx),
            }
        )
    return out


def _bound_by(paths: list[CrossRankPath], steps: list[Any]) -> dict[int, dict[str, object]]:
    """Per step, the rank and op that bound it: across ranks where the step joins them, else
    the rank's own path's heaviest segment (one rank: that rank)."""
    out: dict[int, dict[str, object]] = {}
    for p in paths:
        number = p.step.removeprefix("ProfilerStep#")
        if number.isdigit():
            out[int(number)] = {
                "rank": p.bound_by_rank,
                "op": p.bound_by_op,
                "length_ns": p.length_ns,
                "segments": [seg.to_json(1) for seg in p.segments],
            }
    for s in steps:
        if s.number is None or s.number in out or len(s.index) != 1:
            continue
        (rank,) = s.index
        path = s.graph.longest()
        segments = step_segments(s.graph, path.edges, 1)
        out[s.number] = {
            "rank": rank,
            "op": heaviest_on(segments, rank),
            "length_ns": int(path.length),
            "segments": [seg.to_json(1) for seg in segments],
        }
    return out


def _during(rows: pa.Table, window: StepWindow) -> pa.Table:
    """The rows that start in the step's window."""
    ts = rows["ts"]
    return rows.filter(pc.and_(pc.greater_equal(ts, window.ts), pc.less(ts, window.end)))


def _the_step(
    db: Path, run: str, rank: int, windows: list[StepWindow], step: int
) -> list[StepWindow]:
    for w in windows:
        if w.step == step:
            return [w]
    have = ", ".join(str(w.step) for w in windows) or "none"
    raise ReportError(
        f"{db}: run '{run}' rank {rank} has no ProfilerStep#{step} (its steps: {have})"
    )


def _rank_sources(
    db: Path, store: GraphStore, source: RunSource, ranks: list[int]
) -> Iterator[FrameSource]:
    """Each rank's archived rows, one rank held at a time (a run ingested before archives:
    re-read from its traces)."""
    kept = run_archive(db, store, source.run_idx)
    if kept is not None:
        for rank in ranks:
            rows = read_rank(kept, rank)
            if rows is None:
                raise ReportError(
                    f"{kept.folder}: the run's archive lacks rank {rank}; re-ingest it"
                )
            yield FrameSource(rank, rows)
        return
    files = {r: source.files[r] for r in ranks}
    counts = {r: source.counts[r] for r in ranks}
    pids = pid_ranks(store, source.run_idx) if len(set(files.values())) < len(files) else {}
    yield from rank_sources(db, files, counts, pids, None)


_I, _F, _S = pa.int64(), pa.float64(), pa.string()
TABLES = {
    "spread": SPREAD_SCHEMA,
    "steps": pa.schema(
        [("rank", _I), ("step", _I), ("step_ns", _I), ("gpu_work", _I), ("kernel_time_ns", _I),
         ("busy_ns", _I), ("idle_ns", _I), ("compute_ns", _I), ("exposed_communication_ns", _I)]
    ),
    "temporal": pa.schema(
        [("rank", _I), ("kernel_time_ns", _I), ("idle_ns", _I), ("compute_ns", _I),
         ("non_compute_ns", _I), ("idle_pct", _F), ("compute_pct", _F), ("non_compute_pct", _F),
         ("idle_host_wait_ns", _I), ("idle_kernel_wait_ns", _I), ("idle_other_ns", _I)]
    ),
    "overlap": pa.schema(
        [("rank", _I), ("communication_ns", _I), ("overlapped_ns", _I), ("overlap_pct", _F)]
    ),
    "kernel_types": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("total_ns", _I), ("pct", _F)]
    ),
    "top_kernels": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("name", _S), ("names", _I), ("count", _I),
         ("total_ns", _I), ("mean_ns", _F), ("min_ns", _I), ("max_ns", _I), ("std_ns", _F)]
    ),
    "idle": pa.schema(
        [("rank", _I), ("stream", _I), ("idle_category", _S), ("idle_ns", _I), ("ratio", _F)]
    ),
    "launches": pa.schema(
        [("rank", _I), ("launches", _I)]
        + [(f"{p}_{s}_ns", _F) for p in ("call", "delay") for s in ("mean", "p50", "p95", "max")]
    ),
    "queues": pa.schema(
        [("rank", _I), ("stream", _I), ("launches", _I), ("max", _I), ("mean", _F)]
    ),
    "memory": MEMORY_SCHEMA,
    **collectives.SCHEMAS,
}  # fmt: skip
