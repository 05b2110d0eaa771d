"""`Graph`: one tracegraph database and the verbs a user runs on it, each returning Arrow tables
or typed results (never printed text). The CLI and notebooks call these; they hold no state
beyond the database's path, so each call sees what the last write left.

Writes (`ingest`, `edges`) are atomic: a failure leaves the database as it was. Reads open the
database read-only for the call, so several processes may read while none writes.

A verb imports the layers it uses when it runs (ingest, the edge-set builders, the report): a
script that only queries never pays for the rest.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .ingest.errors import TracegraphError
from .ingest.outputs import written
from .ingest.store import DEFAULT_TIMEOUT_MS, GraphStore, unused_parameters
from .queries.catalog import canned_query, check_run, coerce_params
from .queries.guard import check_read_only, read_only_check
from .queries.runs import list_runs
from .queries.usable import file_problem, store_problem

if TYPE_CHECKING:
    from .ingest.edgesets.hta.edge_set import EdgeSetResult as HtaEdgeSetResult
    from .ingest.edgesets.native.edge_set import NativeEdgeSetResult
    from .ingest.edgesets.native.options import NativeOptions
    from .ingest.full_ranks import FullRanks
    from .ingest.pipeline import IngestResult
    from .queries.crossrank import StepVerdict
    from .queries.diff import EdgeSetDiff
    from .queries.path import StepStory
    from .queries.report import Report
    from .queries.report.compare import RunComparison
    from .queries.summary import DatabaseInfo

Progress = Callable[[str, int, int], None]
NATIVE = "native"


class Graph:
    """The database at `path`: `tracegraph.open(path)`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"tracegraph.open({str(self.path)!r})"

    # ---- writes ------------------------------------------------------------------------
    def ingest(
        self,
        *paths: str | Path,
        run: str | None = None,
        rank: int | None = None,
        rank_of_pid: Mapping[int, int] | None = None,
        recursive: bool = False,
        max_json_bytes: int | None = None,
        max_gzip_ratio: float | None = None,
        jobs: int | None = None,
        ray: str | None = None,
        replace: bool = False,
        summary: bool = False,
        full_ranks: Sequence[int] | str | None = None,
        keep_going: bool = False,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Ingest trace files or folders (per rank, or merged) as one run; all or nothing.

        `rank` names the rank of a single-rank file that does not say it; `rank_of_pid` the
        ranks of a merged file's pids that name none; `max_json_bytes` and `max_gzip_ratio`
        raise the limits on what a file may hold (see `ParseOptions`); `jobs` worker processes
        parse files in parallel (None: the cores, where there are several large files); `ray`
        ("auto", "local" or a cluster's address) parses them as Ray tasks instead (a Ray the
        caller initialized is used as it is); `replace` replaces a run of the same name (in
        the same all-or-nothing write); `summary` keeps of each rank a summary (its steps,
        collective arrivals, per-rank figures and findings), not its events (the fleet tier:
        `queries.report.summary_tier`), and then loads the events of `full_ranks` ("auto":
        those the summary points at and a typical one; or a list) in the same write;
        `keep_going` passes over a file that is no readable trace (listed in the result's
        `skipped`) rather than fail the whole ingest."""
        from .ingest.parse_options import ParseOptions
        from .ingest.pipeline import IngestOptions
        from .ingest.pipeline import ingest as ingest_files

        if not paths:
            raise TracegraphError("ingest: name at least one trace file or folder")
        parse = ParseOptions(
            rank=rank,
            rank_of_pid=dict(rank_of_pid or {}),
            max_json_bytes=max_json_bytes,
            max_gzip_ratio=max_gzip_ratio,
        )
        summarise = None
        if summary:
            from .queries.report.summary_tier import SUMMARY_TIER

            summarise = SUMMARY_TIER
        options = IngestOptions(
            run=run,
            parse=parse,
            recursive=recursive,
            jobs=jobs,
            ray=ray,
            replace=replace,
            summarise=summarise,
            keep_going=keep_going,
        )
        if full_ranks is None:
            return ingest_files([Path(p) for p in paths], self.path, options, progress)
        if not summary:
            raise TracegraphError("--full-ranks: with --summary (a full ingest loads every rank)")
        from .ingest.full_ranks import load_full_ranks

        loaded = []

        def then_full(result: IngestResult, store: GraphStore) -> None:
            ranks = [r.rank for r in result.ranks]
            chosen = self._full_choice(store, result.run, ranks, full_ranks)
            loaded.append(load_full_ranks(self.path, store, result.run, chosen, progress))

        result = ingest_files([Path(p) for p in paths], self.path, options, progress, then_full)
        return dataclasses.replace(result, full=loaded[0])

    def load_full_ranks(
        self,
        ranks: Sequence[int] | str = "auto",
        *,
        run: str | None = None,
        progress: Progress | None = None,
    ) -> FullRanks:
        """Load the events of summary ranks of a summary run (`ingest(summary=True)`) from their
        trace files: `ranks`, or "auto": those its report points at (the ranks that stand out
        in a step, each step's straggler) and a typical one as a baseline; all or nothing."""
        from .ingest.full_ranks import make_full

        def choose(store: GraphStore, name: str, summary: list[int]) -> Sequence[int]:
            return self._full_choice(store, name, summary, ranks)

        return make_full(self.path, run, choose, progress)

    def _full_choice(
        self, store: GraphStore, run: str, summary: list[int], ranks: Sequence[int] | str
    ) -> list[int]:
        if not isinstance(ranks, str):
            return sorted(set(int(r) for r in ranks))
        if ranks != "auto":
            raise TracegraphError(f"full_ranks={ranks!r}: 'auto', or a list of ranks ([0, 5, 7])")
        from .queries.report.report import build_report
        from .queries.report.summary_tier import auto_full_ranks

        report = build_report(self.path, store, run)
        return auto_full_ranks(report.tables, summary)

    def edges(
        self,
        producer: str = NATIVE,
        *,
        run: str | None = None,
        emulate_version: str | None = None,
        native_options: NativeOptions | None = None,
        annotation: str | None = None,
        instance: int | None = None,
        all_steps: bool = False,
        allow_empty: bool = False,
        cache_root: str | Path | None = None,
        progress: Progress | None = None,
    ) -> NativeEdgeSetResult | HtaEdgeSetResult:
        """Build (or rebuild) a run's dependency edge set and its critical paths.

        `producer` is "native" (tracegraph's own graph, or with `emulate_version` HTA's rules of
        that version, e.g. "traceinsight-0.6.1", or any `native_options`) or an HTA release
        spec ("HolisticTraceAnalysis==0.5.0", "traceinsight==0.6.1": edge sets "hta-0.5.0",
        "traceinsight-0.6.1"), run in its own cached environment. The window is
        the whole trace, an `annotation` (its `instance`, default the first) or, native only,
        `all_steps`."""
        from .ingest.edgesets.hta.edge_set import build_hta_edge_set
        from .ingest.edgesets.hta.env import default_cache_root
        from .ingest.edgesets.native.edge_set import build_native_edge_set
        from .ingest.edgesets.native.options import NativeOptions, emulate
        from .ingest.edgesets.native.window import Window

        if producer == NATIVE:
            options = native_options or (
                emulate(emulate_version) if emulate_version else NativeOptions()
            )
            window = Window(annotation, instance or 0) if annotation else Window()
            return build_native_edge_set(
                self.path,
                run=run,
                options=options,
                window=window,
                all_steps=all_steps,
                progress=progress,
                allow_empty=allow_empty,
            )
        if emulate_version or native_options or all_steps:
            raise TracegraphError(
                f"{producer}: emulate_version, native_options and all_steps go with 'native'"
            )
        return build_hta_edge_set(
            self.path,
            producer,
            run=run,
            annotation=annotation or "",
            instance=instance,
            cache_root=Path(cache_root) if cache_root else default_cache_root(),
            progress=progress,
            allow_empty=allow_empty,
        )

    # ---- reads -------------------------------------------------------------------------
    @contextmanager
    def reading(
        self, timeout_ms: int = DEFAULT_TIMEOUT_MS, *, allow_files: bool = False
    ) -> Iterator[GraphStore]:
        """The database open read-only, for several queries in one open. Its `run` takes what
        `query` takes: a statement that writes, loads files (unless `allow_files`) or manages
        the database is refused before it reaches Kuzu, and so is every write method. A path
        that holds no tracegraph database is a one-line TracegraphError."""
        problem = file_problem(self.path)
        if problem is not None:
            raise TracegraphError(problem)
        check = read_only_check(allow_files)
        store = GraphStore(self.path, read_only=True, timeout_ms=timeout_ms, check=check)
        try:
            problem, _ = store_problem(self.path, store)
            if problem is not None:
                raise TracegraphError(problem)
            yield store
        finally:
            store.close()

    def remove_runs(self, *runs: str) -> None:
        """Remove these runs (their events, edges, edge sets and archives), all or none."""
        from .ingest.remove import remove_runs

        if not runs:
            raise TracegraphError("runs rm: name at least one run")
        remove_runs(self.path, list(runs))

    def runs(self) -> pa.Table:
        """One row per run, in ingest order: name, world_size, ranks, events (of the ranks with
        events loaded), summary_ranks (those kept as summaries: `ingest(summary=True)`)."""
        with self.reading() as store:
            refs = list_runs(store)
        return pa.table(
            {
                "name": pa.array([r.name for r in refs], pa.string()),
                "world_size": pa.array([r.world_size for r in refs], pa.int64()),
                "ranks": pa.array([list(r.ranks) for r in refs], pa.list_(pa.int64())),
                "events": pa.array([r.events for r in refs], pa.int64()),
                "summary_ranks": pa.array([list(r.summarised) for r in refs], pa.list_(pa.int64())),
            }
        )

    def info(self) -> DatabaseInfo:
        """Every run with its ranks, counts and sources, and every edge set."""
        from .queries.summary import database_info

        with self.reading() as store:
            return database_info(store)

    def edge_sets(self) -> pa.Table:
        """One row per edge set and run: run, name, producer, version, window."""
        return self.info().edge_sets

    def query(
        self,
        cypher: str,
        /,
        *,
        allow_files: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_MS / 1000,
        **params: object,
    ) -> pa.Table:
        """A read-only Cypher query with `$name` parameters as keywords; statements that write,
        load files (unless `allow_files`) or manage the database are refused before they run."""
        unused = unused_parameters(cypher, params)
        if unused:
            warnings.warn(
                f"ignoring parameter(s) {unused}: the query does not use them", stacklevel=2
            )
            params = {k: v for k, v in params.items() if k not in unused}
        check_read_only(cypher, allow_files=allow_files, params=params)  # before the open
        with self.reading(timeout_ms=int(timeout_s * 1000), allow_files=allow_files) as store:
            return store.run(cypher, params).table

    def canned(self, name: str, /, **params: object) -> pa.Table:
        """A canned query by name (`tracegraph queries` lists them), its parameters typed by
        its header."""
        query = canned_query(name)
        typed = coerce_params(query, params)
        with self.reading() as store:
            check_run(store, typed)
            return store.run(query.cypher, typed).table

    def diff(
        self,
        a: str,
        b: str,
        *,
        run: str | None = None,
        edge_type: str | None = None,
        rank: int | None = None,
    ) -> EdgeSetDiff:
        """Edge sets `a` and `b` of one run compared: counts by rank and type, path lengths, and
        each differing edge with why it differs."""
        from .queries.diff import diff_edge_sets

        with self.reading() as store:
            return diff_edge_sets(store, a, b, run=run, edge_type=edge_type, rank=rank)

    def step_paths(
        self,
        *,
        run: str | None = None,
        step: int | None = None,
        rank: int | None = None,
        depth: int = 2,
    ) -> list[StepStory]:
        """Each step's (or ProfilerStep#`step`'s) critical path in segments, with what fixing
        each would save: across ranks, or `rank`'s own (see queries/path.py)."""
        from .queries.path import step_stories

        with self.reading() as store:
            return step_stories(self.path, run=run, step=step, rank=rank, depth=depth, store=store)

    def dependencies(
        self,
        edge_set: str,
        *,
        run: str | None = None,
        rank: int | None = None,
        step: int | None = None,
    ) -> pa.Table:
        """The DEP edges of `edge_set` for the run (or one `rank` of it) as Arrow: both
        endpoints (event id, label, name, boundary, time in ns), type, weight, critical flag;
        with `step` N, those whose source is in ProfilerStep#N's window (a set built with
        `all_steps` holds every step's graph)."""
        from .ingest.edgesets.records import rank_outcomes
        from .queries.dependencies import StepGraph, dependency_edges

        with self.reading() as store:
            name, run_idx = self._run_with(store, run, edge_set)
            windows = None
            if step is not None:  # the window that step's graph was built over, per rank
                windows = {
                    r: StepGraph(
                        int(w["start_ns"]), int(w["end_ns"]),  # type: ignore[call-overload]
                        *(int(x) for x in w["path_order"]),  # type: ignore[attr-defined]
                    )
                    for r, outcome in rank_outcomes(store, edge_set, name).items()
                    for w in outcome.windows
                    if w.get("step") == f"ProfilerStep#{step}" and w.get("path_order")
                    and rank in (None, r)
                }  # fmt: skip
                if not windows:
                    raise TracegraphError(
                        f"{self.path}: run '{name}' has no ProfilerStep#{step}"
                        + ("" if rank is None else f" on rank {rank}")
                    )
            return dependency_edges(store, edge_set, run_idx, rank, windows)

    def dependency_graph(
        self,
        edge_set: str,
        *,
        run: str | None = None,
        rank: int | None = None,
        step: int | None = None,
    ) -> Any:
        """`dependencies` as a networkx DiGraph (networkx must be installed): nodes are
        (event id, "start" | "end") with `name`, `label` and `time_ns`; edges carry `weight`
        (ns), `type` and `on_critical_path`. For a set built over one window (the whole trace,
        or one annotation) its critical path is the longest weighted path of the graph
        (`networkx.dag_longest_path_length(g, weight="weight")`); a set built with `all_steps`
        holds every step's graph, each step's path is the longest within its window: `step` N
        gives that step's graph alone."""
        try:
            import networkx as nx
        except ImportError as exc:
            raise TracegraphError("dependency_graph needs networkx (pip install networkx)") from exc
        table = self.dependencies(edge_set, run=run, rank=rank, step=step)
        graph = nx.DiGraph(edge_set=edge_set)
        columns = {name: table[name].to_pylist() for name in table.column_names}
        for i in range(table.num_rows):
            src = (columns["src_id"][i], columns["src_boundary"][i])
            dst = (columns["dst_id"][i], columns["dst_boundary"][i])
            for node, side in ((src, "src"), (dst, "dst")):
                if node not in graph:
                    graph.add_node(
                        node,
                        name=columns[f"{side}_name"][i],
                        label=columns[f"{side}_label"][i],
                        time_ns=columns[f"{side}_time"][i],
                    )
            graph.add_edge(
                src,
                dst,
                weight=columns["weight_ns"][i],
                type=columns["type"][i],
                on_critical_path=bool(columns["on_critical_path"][i]),
            )
        return graph

    def report(
        self,
        run: str | None = None,
        *,
        ranks: Sequence[int] | None = None,
        step: int | None = None,
        hta_compatible: bool = False,
        top: int = 10,  # queries/report/report.py DEFAULT_TOP (held by a test)
        gpu: str | None = None,
        sequence_op: str | None = None,
    ) -> Report:
        """HTA's standard analyses of every rank of the run (or of `ranks`), from its archive:
        temporal breakdown, comm/comp overlap, kernel types and top kernels, idle time by
        stream, launch statistics, per-step figures, and the findings (faults with their cost
        per step and the events that show them); `step` N reports only ProfilerStep#N's GPU
        work. `hta_compatible` reproduces HTA 0.5.0's figures (its µs
        rounding, its window without the last ProfilerStep) and gives no findings. `gpu`
        (`h100`, `mi300x`, ...) names the GPU of every rank for the operators' roofline,
        where the traces do not name it. `sequence_op` names the calls whose kernel sequences
        `kernel_sequences` counts (names holding it; else the CPU ops Python called)."""
        from .queries.report import build_report

        with self.reading() as store:
            return build_report(
                self.path,
                store,
                run,
                ranks=ranks,
                step=step,
                hta_compatible=hta_compatible,
                top=top,
                gpu=gpu,
                sequence_op=sequence_op,
            )

    def memory_timeline(self, run: str | None = None, *, rank: int | None = None) -> pa.Table:
        """The caching allocator's series from the run's `[memory]` events (traces profiled
        with `profile_memory=True`), of every rank or of `rank`: rank, device (`cuda:0`,
        `cpu`), ts (ns), bytes (+ allocated, - freed), the device's allocated and reserved
        bytes after it, and op_id (the innermost Op or Runtime holding it; -1: none). A
        summary rank has none (its events are not loaded); the report's `allocator` table has
        its figures."""
        from .queries.report.allocator import memory_timeline

        with self.reading() as store:
            return memory_timeline(store, run, rank)

    def queue_length_series(
        self, run: str | None = None, *, rank: int | None = None, hta_compatible: bool = False
    ) -> pa.Table:
        """Per rank and stream, the kernels launched and not yet started over time (rank,
        stream, ts, queued: one row where the count changes; HTA's
        `get_queue_length_time_series`), of every loaded rank or of `rank`; `hta_compatible`:
        in HTA 0.5.0's reading (ts in whole µs from the trace's start, the last ProfilerStep
        left out)."""
        from .queries.report.series import run_series

        with self.reading() as store:
            return run_series(store, run, rank, "queue", hta_compatible)

    def memory_bandwidth_series(
        self, run: str | None = None, *, rank: int | None = None
    ) -> pa.Table:
        """Per rank and copy kind, the summed bandwidth of the copies running over time (rank,
        kind, ts, gbps: one row where it changes; each copy its recorded bytes over its
        duration; HTA's `get_memory_bw_time_series`), of every loaded rank or of `rank`."""
        from .queries.report.series import run_series

        with self.reading() as store:
            return run_series(store, run, rank, "bandwidth")

    def compare(
        self, other: str, *, run: str | None = None, rows: int = 30, rank: int | None = None
    ) -> RunComparison:
        """Run `run` (the only other run when None) against run `other`: step times matched by
        order, the `rows` ops and kernels whose time per rank and step changed most, and
        `rank`'s call trees (each run's first rank when None) matched op by op."""
        from .queries.report.compare import compare_runs

        with self.reading() as store:
            return compare_runs(store, run, other, rows, rank)

    def export_perfetto(
        self,
        out: str | Path,
        *,
        run: str | None = None,
        rank: int | None = None,
        edge_set: str | None = None,
        findings: bool = True,
    ) -> dict[str, int]:
        """Write the run (or one `rank`) as Chrome trace JSON to `out` (for ui.perfetto.dev):
        its events, `edge_set`'s critical path (its events marked, a flow arrow where it
        changes track), the report's findings as instant events. Written whole or not at all;
        the counts of what was written (events, path_edges, flows, segments, findings)."""
        from .ingest.edgesets.records import run_source
        from .queries.perfetto import write_chrome_trace
        from .queries.report import build_report

        target = Path(out)
        with self.reading() as store:
            name, run_idx = self._run_with(store, run, edge_set)
            source = run_source(store, name)
            source.events_needed(self.path, "a Perfetto trace")
            if rank is not None and rank in source.summarised:
                raise TracegraphError(
                    f"{self.path}: rank {rank} of run '{name}' is a summary (ingest --summary): "
                    "no events to export; load it with `tracegraph ingest --db DB --full-ranks "
                    f"{rank}`"
                )
            ranks = None if rank is None else [rank]
            shown = build_report(self.path, store, name, ranks=ranks).findings if findings else ()
            try:
                with written(target) as f:
                    counts = write_chrome_trace(f, store, name, run_idx, rank=rank,
                                                edge_set=edge_set, findings=shown)  # fmt: skip
            except OSError as exc:
                problem = exc.strerror or exc
                raise TracegraphError(f"{target}: cannot write the trace ({problem})") from exc
        return counts

    def sync_dependencies(
        self, edge_set: str, *, run: str | None = None, critical_only: bool = False
    ) -> dict[str, Any]:
        """`edge_set`'s sync dependencies keyed as Chakra's linker keys events (rank, ev_idx,
        External id), all of them or those on the critical path, with both counts per rank."""
        from .queries.syncdeps import sync_dependencies

        with self.reading() as store:
            name, run_idx = self._run_with(store, run, edge_set)
            return sync_dependencies(store, name, run_idx, edge_set, critical_only)

    def _run_with(
        self, store: GraphStore, run: str | None, edge_set: str | None
    ) -> tuple[str, int]:
        """The run (see `resolve_run`), refused when it lacks `edge_set` (None: any)."""
        from .ingest.runs import resolve_run
        from .queries.step import edge_set_names

        name, run_idx = resolve_run(store, run)
        known = edge_set_names(store, name)
        if edge_set is not None and edge_set not in known:
            raise TracegraphError(
                f"{self.path}: run '{name}' has no edge set '{edge_set}' (it has: "
                f"{', '.join(known) or 'none'})"
            )
        return name, run_idx

    def stragglers(self, run: str, edge_set: str = NATIVE) -> list[StepVerdict]:
        """Per step of `run`, what bounds it across ranks (from the edge set's cross-rank
        paths): the rank that arrived last at the collectives, how long the others waited."""
        from .queries.crossrank import step_verdicts

        with self.reading() as store:
            return step_verdicts(store, run, edge_set)
