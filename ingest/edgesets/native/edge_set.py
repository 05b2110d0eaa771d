"""Build a native edge set: tracegraph's own dependency graph and critical path, per rank.

`build_native_edge_set(db, run=..., options=..., window=..., all_steps=...)` reads each rank's
source columns from the run's archive (`sources`; the events HTA's semantics need include some
that are not nodes: cuda_sync events, GPU annotations), builds every window's graph with
whole-array passes (`rank_build`), joins the ranks of each step through their collectives
(`crossrank`, plain native only), and swaps the edge set into the database in one write. With
`emulate(version)` options the edge set is named `native:<version>` and equals that HTA
release's own edge set edge for edge.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

from ...archive import RunArchive, run_archive
from ...store import GraphStore
from ..errors import EdgeSetError
from ..records import (
    RankOutcome,
    RunSource,
    edge_set_row,
    pid_ranks,
    rank_hosts,
    refuse_empty,
    run_source,
    write_edge_sets,
)
from .crossrank import (
    CrossRankPath,
    Instance,
    Participants,
    clock_offsets,
    cross_rank_path,
    last_arrivals,
    never_completed,
)
from .frame import Frame
from .options import NativeOptions
from .rank_build import RankBuild, build_rank
from .report import (
    TOOL_VERSION,
    collective_rows,
    cross_rank_set,
    edge_tables,
    inferred_rows,
    options_json,
    window_json,
)
from .segments import STORED_DEPTH
from .sources import rank_sources
from .stand_in import StandIn, summary_ranks
from .store import (
    collective_instances,
    first_of_each_edge,
)
from .window import Window

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class NativeEdgeSetResult:
    """The edge set written: its name, per-rank summaries, cross-rank paths, load counts."""

    name: str
    run: str
    options: NativeOptions
    window: Window
    all_steps: bool
    ranks: tuple[RankOutcome, ...]
    cross_rank: tuple[CrossRankPath, ...]
    edges_loaded: int
    inferred_syncs: int
    seconds: dict[str, float]
    cross_rank_left_out: tuple[str, ...] = ()  # steps with no cross-rank path, and why


def build_native_edge_set(
    db: Path,
    *,
    run: str | None = None,
    options: NativeOptions | None = None,
    window: Window | None = None,
    all_steps: bool = False,
    progress: Progress | None = None,
    allow_empty: bool = False,
) -> NativeEdgeSetResult:
    """Build and (re)place the native edge set of `run` in `db`; see the module docstring."""
    options = options or NativeOptions()
    window = window or Window()
    report = progress or (lambda stage, done, total: None)
    began = time.perf_counter()
    built_run = build_run(
        db, run=run, options=options, window=window, all_steps=all_steps, progress=progress
    )
    source, builds, paths = built_run.source, built_run.builds, built_run.paths
    run, run_idx = source.run, source.run_idx
    built = time.perf_counter()
    name = options.edge_set_name
    tables, summaries = edge_tables(builds, run_idx, name)
    extra = collective_rows(paths, run_idx, name)
    edges = first_of_each_edge(pa.concat_tables([*tables, extra]))
    inferred = inferred_rows(builds, run_idx) if options.infer_syncs else None
    row = edge_set_row(
        run,
        name,
        "tracegraph",
        TOOL_VERSION,
        {
            **options_json(options),
            "annotation": window.annotation,
            "instance": window.instance,
            "all_steps": all_steps,
        },
        window_json(window, all_steps, summaries, paths),
        {str(s.rank): s.to_json() for s in summaries},
    )
    rank_edges = [(s.rank, sum(s.edges_by_type.values()), s.message) for s in summaries]
    refuse_empty(db, name, rank_edges, allow_empty)
    sets = [(row, edges)]
    if paths:
        sets.append(cross_rank_set(run, run_idx, name, options, window, all_steps, paths))
    report(f"loading {name} edges", 0, 1)
    loaded = write_edge_sets(Path(db), source, sets, inferred)
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
        tuple(built_run.left_out),
    )


@dataclass(frozen=True)
class BuiltRun:
    """A run's native graphs, built in memory from its archive: every rank's windows and each
    step's path across ranks (what an edge set stores, and what `path` reads)."""

    source: RunSource
    builds: list[RankBuild]
    paths: list[CrossRankPath]
    left_out: list[str]  # steps with no cross-rank path, and why


def build_run(
    db: Path,
    *,
    run: str | None = None,
    options: NativeOptions | None = None,
    window: Window | None = None,
    all_steps: bool = False,
    progress: Progress | None = None,
    depth: int = STORED_DEPTH,
    store: GraphStore | None = None,
) -> BuiltRun:
    """Build every rank's window graphs of `run` and join each step's across ranks (plain
    native options; the paths' segments `depth` levels deep), writing nothing. The run is
    read through `store` when given (the database `db` already open), else `db` is opened."""
    options = options or NativeOptions()
    window = window or Window()
    report = progress or (lambda stage, done, total: None)
    if store is None:
        if not Path(db).exists():
            raise EdgeSetError(f"{db}: no such database")
        with GraphStore(Path(db), read_only=True) as opened:
            inputs = _run_inputs(db, opened, run, options)
    else:
        inputs = _run_inputs(db, store, run, options)
    source = inputs.source
    files, counts = source.files, source.counts
    if not files:
        raise EdgeSetError(f"{db}: run '{source.run}' has no ranks")
    builds: list[RankBuild] = []
    stage = f"building {options.edge_set_name} edges"
    report(stage, 0, len(files))
    for rank_source in rank_sources(Path(db), files, counts, inputs.pids, inputs.folder):
        builds.append(build_rank(rank_source, options, window, all_steps))
        report(stage, len(builds), len(files))
    paths, left_out = _cross_rank(builds, inputs, options, depth)
    return BuiltRun(source, builds, paths, left_out)


@dataclass(frozen=True)
class _RunInputs:
    """What building a run reads from the database: its source, collectives and hosts, its
    archive, (a merged file without one) which pid is which rank, and its summary ranks'
    stand-ins with their collective participants."""

    source: RunSource
    members: dict[int, Instance]
    hosts: dict[int, str | None]
    folder: RunArchive | None
    pids: dict[int, int]
    stand_ins: list[StandIn]
    summary_members: dict[int, Instance]


def _run_inputs(db: Path, store: GraphStore, run: str | None, options: NativeOptions) -> _RunInputs:
    source = run_source(store, run)
    source.events_needed(db, "a dependency graph")
    members = collective_instances(store, source.run) if options.cross_rank else {}
    hosts = rank_hosts(store, source.run) if options.cross_rank else {}
    folder = run_archive(Path(db), store, source.run_idx)
    pids = {}
    if folder is None and len(set(source.files.values())) < len(source.files):
        pids = pid_ranks(store, source.run_idx)
    stand_ins, summary_members = (
        summary_ranks(store, source.run, source.summarised) if options.cross_rank else ([], {})
    )
    return _RunInputs(source, members, hosts, folder, pids, stand_ins, summary_members)


def build_each_step(
    db: Path,
    *,
    run: str | None = None,
    depth: int = STORED_DEPTH,
    store: GraphStore | None = None,
    builds: list[RankBuild] | None = None,
) -> BuiltRun:
    """`build_run` over every ProfilerStep; a run without any: over the whole trace. `builds`:
    every rank's `build_rank(..., all_steps=True)` with plain options, where the caller has
    them (it read the ranks already): only joined across ranks here."""
    if builds is not None and store is not None:
        built = _joined(db, store, run, builds, NativeOptions(), depth)
    else:
        built = build_run(db, run=run, all_steps=True, depth=depth, store=store)
    if any(w.ok for b in built.builds for w in b.windows):
        return built
    return build_run(db, run=run, depth=depth, store=store)


def _joined(
    db: Path,
    store: GraphStore,
    run: str | None,
    builds: list[RankBuild],
    options: NativeOptions,
    depth: int,
) -> BuiltRun:
    """Rank builds made elsewhere, joined across ranks as `build_run` joins its own."""
    inputs = _run_inputs(db, store, run, options)
    if sorted(b.rank for b in builds) != sorted(inputs.source.files):
        raise EdgeSetError(f"{db}: the builds are not of every rank of the run")
    paths, left_out = _cross_rank(builds, inputs, options, depth)
    return BuiltRun(inputs.source, builds, paths, left_out)


def _cross_rank(
    builds: list[RankBuild],
    inputs: _RunInputs,
    options: NativeOptions,
    depth: int = STORED_DEPTH,
) -> tuple[list[CrossRankPath], list[str]]:
    """Each step's path across the ranks that have it (summary ranks through their
    stand-ins), and the steps left out, with why."""
    stand_ins = inputs.stand_ins
    if not options.cross_rank or len(builds) + len(stand_ins) < 2:
        return [], []
    instances = _merged(inputs.members, inputs.summary_members)
    participants = Participants.of(instances)
    hung = never_completed(instances)
    frames: list[Frame] = [b.frame for b in builds if b.frame is not None]
    every_frame = [*frames, *(s.frame for s in stand_ins)]
    offsets = clock_offsets(every_frame, participants, inputs.hosts)
    last_of = last_arrivals(every_frame, participants, offsets)
    steps: dict[str, list] = {}
    for b in builds:
        for w in b.windows:
            if w.graph is not None:
                steps.setdefault(w.step or w.window.label(), []).append(w.graph)
    summarised = {s.rank for s in stand_ins}
    for s in stand_ins:  # only into steps a rank with events has
        for step, graph in s.graphs.items():
            if step in steps:
                steps[step].append(graph)
    out, left_out = [], []
    ranks = len(builds) + len(stand_ins)
    for step, graphs in steps.items():
        have = sorted(g.rank for g in graphs)
        if len(graphs) < 2:
            left_out.append(f"{step}: only rank {have[0]} has a graph of it")
            continue
        path = cross_rank_path(step, graphs, participants, offsets, depth, last_of, hung)
        if path is not None:
            joined = tuple(r for r in have if r in summarised)
            out.append(replace(path, summarised=joined) if joined else path)
        if len(graphs) < ranks:
            left_out.append(f"{step}: joined over ranks {have} only (the others have no graph)")
    return out, left_out


def _merged(*parts: dict[int, Instance]) -> dict[int, Instance]:
    """Collective instances with the members of every part (the same collective's
    participants with events and those of summary ranks)."""
    out: dict[int, Instance] = {}
    for part in parts:
        for cid, inst in part.items():
            have = out.get(cid)
            both = inst.members if have is None else (*have.members, *inst.members)
            out[cid] = Instance(inst.label, tuple(sorted(set(both))), inst.group)
    return out
