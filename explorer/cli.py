"""The `tracegraph` command: thin argument parsing over tracegraph.ingest and tracegraph.queries.

Results go to stdout, progress and errors to stderr; any error is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.edgesets.hta import RankStatus, build_hta_edge_set
from tracegraph.ingest.edgesets.native import build_native_edge_set
from tracegraph.ingest.edgesets.native_options import NativeOptions, OptionsError, emulate
from tracegraph.ingest.edgesets.native_report import RankSummary
from tracegraph.ingest.edgesets.native_window import Window
from tracegraph.ingest.errors import IngestError, TraceFormatError
from tracegraph.ingest.parse import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, IngestResult, ingest
from tracegraph.ingest.store import GraphStore, QueryError
from tracegraph.queries.catalog import CatalogError, canned_queries, canned_query, coerce_params
from tracegraph.queries.diff import EDGE_VIEW, DiffError, chakra_view, diff_edge_sets
from tracegraph.queries.summary import database_info
from tracegraph.queries.whatif import Scaling, WhatIfError, compare_what_if, what_if

from . import output
from .progress import stderr_progress


class UsageError(Exception):
    """Bad command-line input that argparse cannot catch."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (
        TraceFormatError,
        IngestError,
        QueryError,
        CatalogError,
        DiffError,
        WhatIfError,
        UsageError,
    ) as exc:
        print(f"tracegraph: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tracegraph: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: stop quietly, as other CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracegraph",
        description="PyTorch profiler traces of distributed training as a graph database.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="load trace files or folders (per-rank or merged) as one run")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--db", type=Path, required=True, help="database file (created if missing)")
    p.add_argument("--run", help="run name (default: the folder or file name)")
    p.add_argument("--rank", type=int, help="rank of a single-rank file without distributedInfo")
    p.add_argument(
        "--rank-of-pid",
        action="append",
        default=[],
        metavar="PID=RANK",
        help="rank of a pid in a merged file whose events do not say it (repeatable)",
    )
    p.set_defaults(handler=_ingest)

    p = sub.add_parser("info", help="runs, ranks, counts by label and edge set")
    p.add_argument("db", type=Path)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_info)

    p = sub.add_parser("query", help="run ad-hoc or canned Cypher")
    p.add_argument("db", type=Path)
    p.add_argument("cypher", nargs="?", help="a Cypher statement")
    p.add_argument("--canned", metavar="NAME", help="a canned query (see `tracegraph queries`)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="query parameter")
    p.add_argument("--format", choices=output.FORMATS, default="table")
    p.add_argument("--timeout-s", type=float, default=60.0, help="query timeout (0: none)")
    p.set_defaults(handler=_query)

    p = sub.add_parser("edges", help="build a dependency edge set: HTA's graph, or native")
    p.add_argument("db", type=Path)
    producer = p.add_mutually_exclusive_group(required=True)
    producer.add_argument(
        "--hta",
        metavar="SPEC",
        help="HolisticTraceAnalysis==0.5.0 or traceinsight==0.6.1 (own env)",
    )
    producer.add_argument("--native", action="store_true", help="tracegraph's own builder")
    p.add_argument(
        "--emulate",
        metavar="VERSION",
        help="with --native: HTA's semantics of hta-0.5.0 or traceinsight-0.6.1",
    )
    p.add_argument(
        "--kernel-gap-cutoff-us",
        type=float,
        metavar="US",
        help="with --native: no kernel→kernel edge across a gap this long",
    )
    p.add_argument(
        "--merge-backward-thread",
        action="store_true",
        help="with --native: the autograd thread joins the forward thread",
    )
    p.add_argument(
        "--runtime-lock",
        action="store_true",
        help="with --native: CUDA runtime calls serialize on the runtime lock",
    )
    p.add_argument(
        "--all-steps",
        action="store_true",
        help="with --native: one window per ProfilerStep#N of every rank",
    )
    p.add_argument("--run", help="the run (needed when the database holds several)")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--annotation", help="window: the annotation HTA looks for (substring)")
    window.add_argument("--whole-trace", action="store_true", help="window: the whole trace")
    p.add_argument("--instance", type=int, help="which instance of the annotation (default 0)")
    p.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="where HTA environments are cached (default ~/.cache/tracegraph/hta)",
    )
    p.set_defaults(handler=_edges)

    p = sub.add_parser("whatif", help="critical-path lengths with scaled durations or cut edges")
    p.add_argument("db", type=Path)
    p.add_argument("edge_set", metavar="EDGE_SET")
    p.add_argument("--run", help="the run (needed when several runs hold the edge set)")
    p.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="KIND=FACTOR",
        help="kernel, cpu or collective durations times FACTOR (repeatable)",
    )
    p.add_argument(
        "--remove",
        action="append",
        default=[],
        metavar="TYPE",
        help="drop edges of this type, e.g. sync_dependency (repeatable)",
    )
    p.add_argument(
        "--compare",
        metavar="EDGE_SET",
        help="another edge set, or critical-sync-only (only the sync edges on the "
        "profiled path, what Chakra keeps), under the same scaling",
    )
    p.add_argument("--format", choices=output.FORMATS, default="table")
    p.set_defaults(handler=_whatif)

    p = sub.add_parser("diff", help="compare two edge sets of a run")
    p.add_argument("db", type=Path)
    p.add_argument("set_a", metavar="SET_A")
    p.add_argument("set_b", metavar="SET_B")
    p.add_argument("--run", help="the run (needed when several runs hold both edge sets)")
    p.add_argument("--type", dest="edge_type", help="only this edge type, e.g. sync_dependency")
    p.add_argument("--rank", type=int, help="only this rank")
    p.add_argument("--limit", type=int, default=50, help="differing edges to list (table format)")
    p.add_argument("--format", choices=output.FORMATS, default="table")
    p.set_defaults(handler=_diff)

    p = sub.add_parser("explore", help="the TUI: overview, steps, inspector, diff, console")
    p.add_argument("db", type=Path)
    p.set_defaults(handler=_explore)

    p = sub.add_parser("queries", help="list canned queries with their parameters")
    p.set_defaults(handler=_queries)

    p = sub.add_parser("demo", help="synthetic multi-rank trace → database → summary (or TUI)")
    p.add_argument("--db", type=Path, default=Path("tracegraph-demo.kuzu"))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--no-tui", action="store_true", help="print the summary instead of the TUI")
    p.set_defaults(handler=_demo)
    return parser


def _ingest(args: argparse.Namespace) -> int:
    options = IngestOptions(
        run=args.run,
        parse=ParseOptions(rank=args.rank, rank_of_pid=_pid_ranks(args.rank_of_pid)),
    )
    with stderr_progress() as progress:
        result = ingest(args.paths, args.db, options, progress)
    _print_ingest(result, args.db)
    return 0


def _pid_ranks(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        pid, sep, rank = item.partition("=")
        if not sep or not pid.strip().lstrip("-").isdigit() or not rank.strip().isdigit():
            raise UsageError(f"--rank-of-pid expects PID=RANK with integers, got '{item}'")
        out[int(pid)] = int(rank)
    return out


def _print_ingest(result: IngestResult, db: Path) -> None:
    totals = {"Op": 0, "Runtime": 0, "Kernel": 0}
    for rank in result.ranks:
        for label in totals:
            totals[label] += rank.counts[label]
    nodes = ", ".join(f"{n:,} {label}" for label, n in totals.items())
    edges = ", ".join(f"{n:,} {label}" for label, n in result.edges.items())
    print(f"ingested run '{result.run}' into {db}: {len(result.ranks)} rank(s); {nodes}")
    print(f"edges: {edges}; {result.collectives:,} Collective")


def _info(args: argparse.Namespace) -> int:
    with _open(args.db) as store:
        info = database_info(store)
    if args.format == "json":
        print(json.dumps(_info_json(info), indent=1))
        return 0
    if not info.runs:
        print(f"{info.path}: no runs")
    for run in info.runs:
        print(
            f"run '{run.name}': world size {run.world_size}, {run.ranks.num_rows} rank(s) "
            f"ingested, {run.collectives:,} collectives, at {run.ingested_at}"
        )
        edges = ", ".join(f"{label} {n:,}" for label, n in sorted(run.edges.items()))
        print(f"  edges: {edges}")
        print(_indent(output.render(run.ranks, "table", max_width=48)))
    if info.edge_sets.num_rows:
        print("edge sets:")
        print(_indent(output.render(info.edge_sets)))
    return 0


def _info_json(info: object) -> dict[str, object]:
    runs = [
        {
            "name": r.name,
            "world_size": r.world_size,
            "ingested_at": r.ingested_at,
            "tool_version": r.tool_version,
            "sources": r.sources,
            "edges": r.edges,
            "collectives": r.collectives,
            "ranks": r.ranks.to_pylist(),
        }
        for r in info.runs  # type: ignore[attr-defined]
    ]
    edge_sets = info.edge_sets.to_pylist()  # type: ignore[attr-defined]
    return {"path": info.path, "runs": runs, "edge_sets": edge_sets}  # type: ignore[attr-defined]


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.rstrip("\n").split("\n"))


def _query(args: argparse.Namespace) -> int:
    params = _parse_params(args.param)
    if args.canned and args.cypher:
        raise UsageError("give either a Cypher statement or --canned NAME, not both")
    if args.canned:
        canned = canned_query(args.canned)
        cypher, params = canned.cypher, coerce_params(canned, params)
    elif args.cypher:
        cypher = args.cypher
    else:
        raise UsageError("query needs a Cypher statement or --canned NAME")
    with _open(args.db, timeout_ms=int(args.timeout_s * 1000)) as store:
        result = store.run(cypher, params)
    sys.stdout.write(output.render(result.table, args.format))
    print(f"{result.table.num_rows} row(s) in {result.elapsed_s * 1000:.0f} ms", file=sys.stderr)
    return 0


def _parse_params(items: list[str]) -> dict[str, object]:
    params: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param expects K=V, got '{item}'")
        params[key] = _param_value(raw)
    return params


def _param_value(raw: str) -> object:
    """Integers, floats, true/false and JSON lists as such; anything else as a string."""
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith("["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            pass
    return raw


def _edges(args: argparse.Namespace) -> int:
    if args.instance is not None and not args.annotation:
        raise UsageError("--instance needs --annotation")
    native_flags = (
        args.emulate
        or args.kernel_gap_cutoff_us is not None
        or args.all_steps
        or args.merge_backward_thread
        or args.runtime_lock
    )
    if args.hta and native_flags:
        raise UsageError("--emulate, --all-steps and the heuristic flags go with --native")
    return _native_edges(args) if args.native else _hta_edges(args)


def _hta_edges(args: argparse.Namespace) -> int:
    annotation = "" if args.whole_trace or not args.annotation else args.annotation
    with stderr_progress() as progress:
        result = build_hta_edge_set(
            args.db,
            args.hta,
            run=args.run,
            annotation=annotation,
            instance=args.instance,
            cache_root=args.cache or _cache_root() / "hta",
            progress=progress,
        )
    window = (
        f"'{result.annotation}' instance {result.instance or 0}"
        if result.annotation
        else ("the whole trace")
    )
    print(
        f"edge set '{result.name}' of run '{result.run}' ({result.spec}, {window}): "
        f"{result.edges_loaded:,} edges"
    )
    _print_rank_status(result.ranks)
    return 0


def _native_edges(args: argparse.Namespace) -> int:
    try:
        options = emulate(args.emulate) if args.emulate else NativeOptions()
        changes: dict[str, object] = {}
        if args.kernel_gap_cutoff_us is not None:
            changes["kernel_gap_cutoff_ns"] = int(round(args.kernel_gap_cutoff_us * 1000))
        if args.merge_backward_thread:
            changes["merge_backward_thread"] = True
        if args.runtime_lock:
            changes["runtime_lock"] = True
        if changes:
            options = options.with_changes(**changes)
    except OptionsError as exc:
        raise UsageError(str(exc)) from exc
    window = Window(args.annotation, args.instance or 0) if args.annotation else Window()
    with stderr_progress() as progress:
        result = build_native_edge_set(
            args.db,
            run=args.run,
            options=options,
            window=window,
            all_steps=args.all_steps,
            progress=progress,
        )
    print(
        f"edge set '{result.name}' of run '{result.run}': {result.edges_loaded:,} edges"
        + (
            f", {result.inferred_syncs:,} sync edges inferred from runtime calls"
            if result.inferred_syncs
            else ""
        )
    )
    _print_rank_status(result.ranks)
    for path in result.cross_rank:
        print(
            f"  {path.step}: across ranks {path.length_ns / 1e3:,.0f} µs, bound by rank "
            f"{path.bound_by_rank} ({path.bound_by_op})"
            + (f"; stragglers {list(path.stragglers)}" if path.stragglers else "")
        )
    return 0


def _print_rank_status(ranks: Sequence[RankStatus | RankSummary]) -> None:
    for rank in ranks:
        if rank.status == "ok":
            by_type = ", ".join(f"{t} {n:,}" for t, n in sorted(rank.edges_by_type.items()))
            length = (rank.path_length_ns or 0) / 1e3
            print(f"  rank {rank.rank}: critical path {length:,.0f} µs; {by_type}")
        else:
            print(f"  rank {rank.rank}: failed: {rank.message}")


def _whatif(args: argparse.Namespace) -> int:
    scaling = Scaling.parse(args.scale)
    with _open(args.db) as store:
        if args.compare:
            table = compare_what_if(
                store, args.edge_set, args.compare, run=args.run, scaling=scaling
            )
        else:
            table = what_if(
                store, args.edge_set, run=args.run, scaling=scaling, remove_types=tuple(args.remove)
            ).lengths
    sys.stdout.write(output.render(table, args.format))
    return 0


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracegraph"


def _diff(args: argparse.Namespace) -> int:
    with _open(args.db) as store:
        diff = diff_edge_sets(store, args.set_a, args.set_b, args.run, args.edge_type, args.rank)
        chakra = chakra_view(store, diff.run, [args.set_a, args.set_b])
    if args.format == "json":
        print(
            json.dumps(
                {
                    "run": diff.run,
                    "a": diff.a,
                    "b": diff.b,
                    "counts": diff.counts.to_pylist(),
                    "path_lengths": diff.path_lengths.to_pylist(),
                    "sync_edges": chakra.to_pylist(),
                    "edges": diff.edges.to_pylist(),
                },
                indent=1,
                default=str,
            )
        )
        return 0
    if args.format == "csv":
        sys.stdout.write(output.render(diff.edges, "csv"))
        return 0
    print(f"run '{diff.run}': A = {diff.a}, B = {diff.b}")
    print("edges by rank and type:")
    print(_indent(output.render(diff.counts)))
    print("critical path length (µs) and status per rank:")
    lengths = diff.path_lengths
    print(
        _indent(
            output.render(
                pa.table(
                    {
                        "rank": lengths["rank"],
                        "a_us": pc.divide(pc.cast(lengths["a_ns"], pa.float64()), 1e3),
                        "b_us": pc.divide(pc.cast(lengths["b_ns"], pa.float64()), 1e3),
                        "b_minus_a_us": pc.divide(
                            pc.cast(pc.subtract(lengths["b_ns"], lengths["a_ns"]), pa.float64()),
                            1e3,
                        ),
                        "a_status": lengths["a_status"],
                        "b_status": lengths["b_status"],
                    }
                )
            )
        )
    )
    print("sync edges: whole graph vs on the critical path (what Chakra keeps):")
    print(_indent(output.render(chakra)) if chakra.num_rows else "  none in either edge set")
    shown = diff.edges.select([*EDGE_VIEW, "src_ts", "dst_ts"])
    if diff.edges.num_rows == 0:
        print("no differing edges: the two edge sets are identical")
        return 0
    print(f"differing edges ({diff.edges.num_rows}, first {min(args.limit, shown.num_rows)}):")
    print(_indent(output.render(shown.slice(0, args.limit), max_width=40)))
    return 0


def _queries(args: argparse.Namespace) -> int:
    for name, query in canned_queries().items():
        params = ", ".join(f"{p} ({t})" for p, t in query.params.items()) or "none"
        print(f"{name}\n  {query.description}\n  params: {params}")
        if query.columns:
            print(f"  columns: {', '.join(query.columns)}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank

    config = SyntheticConfig(ranks=args.ranks, steps=args.steps, layers=args.layers)
    traces = args.db.with_name(args.db.name.split(".")[0] + "-traces")
    shutil.rmtree(traces, ignore_errors=True)
    files = write_per_rank(config, traces, gzip=True)
    for stale in (args.db, args.db.with_name(args.db.name + ".wal")):
        stale.unlink(missing_ok=True)
    with stderr_progress() as progress:
        result = ingest(files, args.db, IngestOptions(run="demo"), progress)
    print(f"synthetic traces of {config.ranks} ranks x {config.steps} steps in {traces}/")
    _print_ingest(result, args.db)
    # three native edge sets: HTA 0.5.0's and 0.6.1's semantics, and tracegraph's own
    with stderr_progress() as progress:
        for version in ("hta-0.5.0", "traceinsight-0.6.1"):
            build_native_edge_set(args.db, run="demo", options=emulate(version), progress=progress)
        native = build_native_edge_set(args.db, run="demo", all_steps=True, progress=progress)
    if not args.no_tui:
        return _explore(argparse.Namespace(db=args.db))
    print()
    _info(argparse.Namespace(db=args.db, format="table"))
    with _open(args.db) as store:
        for name, title in (("step-times", "step times"), ("collective-skew", "collectives")):
            rows = store.run(canned_query(name).cypher, {"run": "demo"}, limit=8)
            print(f"{title} (tracegraph query {args.db} --canned {name} --param run=demo):")
            print(_indent(output.render(rows.table)))
        diff = diff_edge_sets(store, "native:hta-0.5.0", "native:traceinsight-0.6.1", run="demo")
    print(
        f"HTA 0.5.0 vs 0.6.1 semantics (tracegraph diff {args.db} native:hta-0.5.0 "
        "native:traceinsight-0.6.1):"
    )
    print(_indent(output.render(diff.counts)))
    print("the job's critical path per step, across ranks (edge set 'native'):")
    for path in native.cross_rank:
        print(
            f"  {path.step}: {path.length_ns / 1e3:,.0f} µs, bound by rank {path.bound_by_rank}"
            f" ({path.bound_by_op})"
        )
    return 0


def _explore(args: argparse.Namespace) -> int:
    from .app import run_app  # textual loads only for the TUI

    return run_app(_existing(args.db))


def _existing(db: Path) -> Path:
    if not db.exists():
        raise UsageError(f"{db}: no such database")
    return db


def _open(db: Path, timeout_ms: int = 60_000) -> GraphStore:
    return GraphStore(_existing(db), read_only=True, timeout_ms=timeout_ms)


Handler = Callable[[argparse.Namespace], int]

if __name__ == "__main__":
    sys.exit(main())
