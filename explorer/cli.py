"""The `tracegraph` command: thin argument parsing over tracegraph.ingest and tracegraph.queries.

Results go to stdout, progress and errors to stderr; any error is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NoReturn, Protocol

import pyarrow as pa
import pyarrow.compute as pc

import tracegraph
from tracegraph.ingest import outputs
from tracegraph.ingest.edgesets.hta.edge_set import EdgeSetResult as HtaEdgeSetResult
from tracegraph.ingest.edgesets.native.edge_set import NativeEdgeSetResult
from tracegraph.ingest.edgesets.native.options import NativeOptions, OptionsError, emulate
from tracegraph.ingest.edgesets.native.report import path_summary
from tracegraph.ingest.edgesets.records import RankOutcome
from tracegraph.ingest.errors import TraceFormatError, TracegraphError
from tracegraph.ingest.pipeline import IngestResult
from tracegraph.ingest.schema import MAX_RANK
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.catalog import (
    INT64_MAX,
    INT64_MIN,
    canned_queries,
    canned_query,
    check_run,
    coerce_params,
)
from tracegraph.queries.crossrank import StepVerdict, describe
from tracegraph.queries.diff import (
    EDGE_VIEW,
    chakra_view,
    diff_edge_sets,
    edge_set_runs,
    edge_set_window,
    window_label,
    window_warning,
)
from tracegraph.queries.guard import QueryRefused, check_read_only
from tracegraph.queries.report.report import TABLES as REPORT_TABLES
from tracegraph.queries.summary import database_info
from tracegraph.queries.usable import file_problem
from tracegraph.queries.whatif import (
    CRITICAL_SYNC_ONLY,
    Scaling,
    check_edge_types,
    compare_what_if,
    what_if,
)

from . import options, output
from .cancellable import run_cancellable
from .progress import stderr_progress
from .report_view import write_comparison, write_report
from .serve_access import DEFAULT_MAX_CLIENTS


class UsageError(TracegraphError):
    """Bad command-line input that argparse cannot catch."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TracegraphError as exc:
        db = getattr(args, "db", None)
        # a build refused because ranks gave nothing: first what each of them gave, one line each
        for line in getattr(exc, "rank_lines", ()):
            print(f"tracegraph: error: {_error_line(UsageError(line), db)}", file=sys.stderr)
        print(f"tracegraph: error: {_error_line(exc, db)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tracegraph: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Leave now: a Ctrl-C can land while Kuzu objects are half set up, and tearing those
        # down at interpreter exit can crash. Writes are staged (a kill leaves the database as
        # it was), so there is nothing to finish.
        os._exit(130)
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: stop quietly, as other CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _error_line(exc: Exception, db: Path | None) -> str:
    """`<file or db>: <problem>` on one line: messages that name no file get the database's."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if db is None or isinstance(exc, TraceFormatError):
        return message
    head = message.split(": ", 1)[0]
    if head == str(db) or os.sep in head or head.endswith((".kuzu", ".json", ".gz")):
        return message
    return f"{db}: {message}"


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line errors (exit code 2), pointing at --help for usage."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("tracegraph").strip()
        line = " ".join(f"{where + ': ' if where else ''}{message}".split())
        self.exit(2, f"tracegraph: error: {line} (see {self.prog} --help)\n")


def _version() -> str:
    """The installed distribution's version (package metadata), with Kuzu's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{version('tracegraph')} (kuzu {version('kuzu')})"
    except PackageNotFoundError:
        return "(not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tracegraph",
        description="PyTorch profiler traces of distributed training as a graph database.",
    )
    parser.add_argument("--version", action="version", version=f"tracegraph {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="load trace files or folders (per-rank or merged) as one run")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--db", type=Path, required=True, help="database file (created if missing)")
    p.add_argument("--run", help="run name (default: the folder or file name)")
    p.add_argument("--rank", type=int, help="rank of a single-rank file without distributedInfo")
    p.add_argument(
        "--recursive",
        action="store_true",
        help="also take trace files in the subfolders of a folder (default: only those in it)",
    )
    p.add_argument(
        "--rank-of-pid",
        action="append",
        default=[],
        metavar="PID=RANK",
        help="rank of a pid in a merged file whose events do not say it (repeatable)",
    )
    p.add_argument(
        "--max-json-gb",
        type=float,
        metavar="GB",
        help="most JSON a file may hold, gunzipped, in GiB (default 8); also lifts the refusal "
        "of a .gz expanding over 200x once past 1 GiB",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace a run of the same name (in the same all-or-nothing write)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="worker processes that parse files in parallel (default: the cores, where there "
        "are several files and over 64 MiB of them; 1: none); with --ray, files in flight",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="parse files as tasks on a Ray cluster: auto (the one running here), local (a new "
        "instance on this machine) or its address; needs tracegraph[ray]",
    )
    p.set_defaults(handler=_ingest)

    p = sub.add_parser("runs", help="list the runs; `runs DB rm NAME...` removes runs")
    options.database(p)
    p.add_argument("action", nargs="?", choices=("list", "rm"), default="list")
    p.add_argument("names", nargs="*", metavar="NAME", help="with rm: the runs to remove")
    options.output_format(p)
    p.set_defaults(handler=_runs)

    p = sub.add_parser("info", help="runs, ranks, counts by label and edge set")
    options.database(p)
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler=_info)

    p = sub.add_parser("query", help="run ad-hoc or canned Cypher")
    options.database(p)
    p.add_argument("cypher", nargs="?", help="a Cypher statement")
    p.add_argument("--canned", metavar="NAME", help="a canned query (see `tracegraph queries`)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="query parameter; in ad-hoc Cypher integers, floats, true/false and JSON lists are "
        "typed, anything else is a string, and a value in double quotes is the string inside "
        """(--param 'run="2024"'); a canned query types them by its header""",
    )
    options.output_format(p)
    options.width(p)
    p.add_argument("--timeout-s", type=float, default=60.0, help="query timeout (0: none)")
    p.add_argument(
        "--allow-files",
        action="store_true",
        help="allow LOAD FROM, which reads host files (queries are read-only and confined "
        "to the database otherwise)",
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="print the first N rows only (stderr says so)"
    )
    p.set_defaults(handler=_query)

    p = sub.add_parser("edges", help="build a dependency edge set: HTA's graph, or native")
    options.database(p)
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
    options.run(p, "the database holds several")
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the edge set even where a rank gave no edges (by default such a build "
        "fails and leaves the database as it was)",
    )
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
    options.database(p)
    p.add_argument("edge_set", metavar="EDGE_SET")
    options.run(p, "several runs hold the edge set")
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
    options.output_format(p)
    p.set_defaults(handler=_whatif)

    p = sub.add_parser(
        "path",
        help="each step's critical path in segments, with what fixing each would save",
        description="The critical path of each ProfilerStep (across ranks where the step has "
        "several, else the rank's own) collapsed into segments: consecutive path time under one "
        "range (annotation, nn.Module, op, kernel), communication, idle. A segment's 'saves' is "
        "the step time gone with its work taking no time (the path recomputed over the same "
        "graph). Built from the run's archive with tracegraph's own rules; writes nothing.",
    )
    options.database(p)
    options.run(p, "the database holds several")
    p.add_argument("--step", type=int, metavar="N", help="only ProfilerStep#N")
    p.add_argument("--rank", type=int, help="this rank's own path (default: across ranks)")
    p.add_argument(
        "--depth", type=_positive, default=2, metavar="K", help="levels of segments (default 2)"
    )
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler=_path)

    p = sub.add_parser("diff", help="compare two edge sets of a run")
    options.database(p)
    p.add_argument("set_a", metavar="SET_A")
    p.add_argument("set_b", metavar="SET_B")
    options.run(p, "several runs hold both edge sets")
    p.add_argument("--type", dest="edge_type", help="only this edge type, e.g. sync_dependency")
    p.add_argument("--rank", type=int, help="only this rank")
    p.add_argument("--limit", type=int, default=50, help="differing edges to list (table format)")
    options.output_format(p)
    p.set_defaults(handler=_diff)

    p = sub.add_parser(
        "report", help="HTA's standard analyses of every rank, and findings (faults, their cost)"
    )
    options.database(p)
    options.run(p, "the database holds several")
    p.add_argument("--rank", type=int, action="append", help="only this rank (repeatable)")
    p.add_argument(
        "--step", type=_step_number, help="only the GPU work of this step: N or ProfilerStep#N"
    )
    p.add_argument(
        "--hta-compatible",
        action="store_true",
        help="HTA 0.5.0's figures (whole µs, without the last ProfilerStep), to check against HTA",
    )
    p.add_argument("--top", type=int, default=10, help="kernels named per type (default 10)")
    p.add_argument(
        "--html", type=Path, metavar="FILE", help="also write the report as one HTML page"
    )
    p.add_argument(
        "--compare",
        metavar="OTHER_RUN",
        help="instead: this run against OTHER_RUN (steps, ops and kernels side by side)",
    )
    options.output_format(p, ("table", "json", "csv"))
    options.width(p)
    p.add_argument(
        "--table",
        choices=("findings", *REPORT_TABLES, "kernels", "ops"),
        help="with --format csv: the table to print (default findings)",
    )
    p.set_defaults(handler=_report)

    p = sub.add_parser(
        "export", help="the run as Chrome trace JSON (Perfetto), or sync dependencies for Chakra"
    )
    options.database(p)
    p.add_argument("--perfetto", type=Path, metavar="OUT.json", help="Chrome trace JSON")
    p.add_argument(
        "--sync-deps",
        type=Path,
        metavar="OUT.json",
        help="the edge set's sync dependencies keyed as Chakra's linker keys events",
    )
    p.add_argument(
        "--critical-only", action="store_true", help="with --sync-deps: only those on the path"
    )
    options.run(p, "the database holds several")
    p.add_argument("--rank", type=int, help="only this rank (default: every rank)")
    p.add_argument("--edge-set", metavar="NAME", help="overlay this edge set's critical path")
    p.add_argument("--no-findings", action="store_true", help="leave the findings out")
    p.set_defaults(handler=_export)

    p = sub.add_parser("explore", help="the TUI: overview, steps, inspector, diff, console, report")
    options.database(p)
    p.add_argument(
        "--keymap",
        type=Path,
        metavar="FILE",
        help='your keys, JSON or TOML: {"console.run_query": "ctrl+j"} (ids: docs/tui.md)',
    )
    # what `serve` runs per browser tab: exports download to the browser, no history file
    p.add_argument("--served", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(handler=_explore)

    p = sub.add_parser(
        "serve",
        help="the TUI in a browser (needs tracegraph[serve]); read-only, behind a token",
        description="Serve the explorer to browsers at the printed URL, which carries a random "
        "token every request needs. Clients read, never write: a console export downloads to "
        "the browser. Requests from another web origin or to another host name are refused.",
    )
    options.database(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than loopback: anyone who reaches the port with the URL's "
        "token reads the database, over plain HTTP",
    )
    p.add_argument(
        "--max-clients",
        type=_positive,
        default=DEFAULT_MAX_CLIENTS,
        metavar="N",
        help=f"browser tabs served at once, each its own explorer of ~100 MB "
        f"(default {DEFAULT_MAX_CLIENTS})",
    )
    p.add_argument("--keymap", type=Path, metavar="FILE", help="your keys, as for explore")
    p.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers reach the server by, where that is not http://HOST:PORT "
        "(e.g. --host 0.0.0.0, or behind a proxy)",
    )
    p.set_defaults(handler=_serve)

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
    max_json, max_ratio = None, None  # the defaults
    if args.max_json_gb is not None:
        if not 0 < args.max_json_gb < 1 << 20:
            raise UsageError(f"--max-json-gb {args.max_json_gb:g}: expected a size in GiB > 0")
        max_json, max_ratio = int(args.max_json_gb * (1 << 30)), 0.0
    with stderr_progress() as progress:
        result = tracegraph.open(args.db).ingest(
            *args.paths,
            run=args.run,
            rank=args.rank,
            rank_of_pid=_pid_ranks(args.rank_of_pid),
            recursive=args.recursive,
            max_json_bytes=max_json,
            max_gzip_ratio=max_ratio,
            jobs=args.jobs,
            ray=args.ray,
            replace=args.replace,
            progress=progress,
        )
    for name, why in result.skipped:
        print(f"tracegraph: skipped {name}: {why}", file=sys.stderr)
    _print_ingest(result, args.db)
    return 0


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _pid_ranks(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        pid, sep, rank = (part.strip() for part in item.partition("="))
        if not sep or not _INTEGER.fullmatch(pid) or not _INTEGER.fullmatch(rank):
            raise UsageError(f"--rank-of-pid {item}: expected PID=RANK with integers")
        if not INT64_MIN <= int(pid) <= INT64_MAX:
            raise UsageError(f"--rank-of-pid {item}: pid {pid} is out of the 64-bit range")
        if not 0 <= int(rank) <= MAX_RANK:
            raise UsageError(f"--rank-of-pid {item}: rank {rank} is out of range 0..{MAX_RANK}")
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


def _runs(args: argparse.Namespace) -> int:
    graph = tracegraph.open(args.db)
    if args.action == "rm":
        graph.remove_runs(*args.names)
        print(f"removed {', '.join(args.names)} from {args.db}")
        return 0
    if args.names:
        raise UsageError("runs: names only with rm (runs DB rm NAME...)")
    runs = graph.runs()
    shown = runs.set_column(2, "ranks", pa.array([len(r) for r in runs["ranks"].to_pylist()]))
    output.write(sys.stdout, shown, args.format)
    return 0


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
    raw = _raw_params(args.param)
    if args.canned and args.cypher:
        raise UsageError("give either a Cypher statement or --canned NAME, not both")
    if args.canned:
        canned = canned_query(args.canned)
        texts = {key: _unquoted(text) for key, text in raw.items()}
        cypher, params = canned.cypher, coerce_params(canned, texts)
    elif args.cypher:
        cypher = args.cypher
        params = {key: _param_value(key, text) for key, text in raw.items()}
        try:
            check_read_only(cypher, allow_files=args.allow_files, params=params)
        except QueryRefused as exc:
            raise UsageError(str(exc)) from exc
    else:
        raise UsageError("query needs a Cypher statement or --canned NAME")
    if not (args.timeout_s >= 0 and math.isfinite(args.timeout_s)):
        raise UsageError(f"--timeout-s {args.timeout_s}: expected seconds >= 0")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: at least 1")
    timeout_ms = int(args.timeout_s * 1000)
    with _open(args.db, timeout_ms, allow_files=bool(args.allow_files)) as store:
        if args.canned:
            check_run(store, params)
        result = run_cancellable(store, cypher, params, args.timeout_s, args.limit)
    output.write(sys.stdout, result.table, args.format, max_width=options.max_width(args))
    rows = result.table.num_rows
    shown = (
        f"the first {rows} row(s) (--limit; there are more)"
        if result.truncated
        else (f"{rows} row(s)")
    )
    print(f"{shown} in {result.elapsed_s * 1000:.0f} ms", file=sys.stderr)
    return 0


def _raw_params(items: list[str]) -> dict[str, str]:
    """`--param K=V` items as text, by name (a canned query types them by its header)."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--param {item}: expected NAME=VALUE")
        if not key.isidentifier():
            raise UsageError(f"--param {item}: '{key}' is not a parameter name")
        params[key] = raw
    return params


def _param_value(key: str, raw: str) -> object:
    """Integers (64-bit), finite floats, true/false and JSON lists of one type as such, a JSON
    string (`"2024"`) as the string it holds; anything else as a string (so text such as
    `[param|...]` that is no JSON stays text)."""
    text = raw.strip()
    string = _json_string(text)
    if string is not None:
        return string
    if _INTEGER.fullmatch(text):
        value = int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise UsageError(f"--param {key}={raw}: integer out of the 64-bit range")
        return value
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(number):
            return number
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return raw
        problem = _list_problem(value)
        if problem:
            raise UsageError(f"--param {key}={raw}: {problem}")
        return value
    return raw


def _json_string(text: str) -> str | None:
    """The string a `--param` value in double quotes spells as JSON (`"2024"` → 2024, so a
    number can be passed as text); None for anything else."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def _unquoted(raw: str) -> str:
    """A `--param` value for a canned query, whose header types it: the text of a JSON string
    (`"2024"`), anything else as given."""
    string = _json_string(raw)
    return raw if string is None else string


def _list_problem(value: object) -> str | None:
    """Why Kuzu cannot take this JSON list as a parameter (None: it can)."""
    if not isinstance(value, list):
        return None
    items = [v for v in value if v is not None]
    if not items:
        return "an empty list (or one of nulls) has no type; give at least one value"
    kinds = set()
    for item in items:
        if isinstance(item, bool):
            kinds.add("true/false")
        elif isinstance(item, int | float):
            if isinstance(item, int) and not INT64_MIN <= item <= INT64_MAX:
                return f"{item} is out of the 64-bit range"
            kinds.add("number")
        elif isinstance(item, str):
            kinds.add("string")
        elif isinstance(item, list):
            problem = _list_problem(item)
            if problem:
                return problem
            kinds.add("list")
        else:
            return "lists hold numbers, strings, true/false or lists, not objects"
    if len(kinds) > 1:
        return f"a list mixes {', '.join(sorted(kinds))}; its values must be of one type"
    return None


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
    cutoff = args.kernel_gap_cutoff_us
    if cutoff is not None and not (math.isfinite(cutoff) and 0 <= cutoff * 1000 <= INT64_MAX):
        raise UsageError(f"--kernel-gap-cutoff-us {cutoff:g}: expected a finite number of µs >= 0")
    return _native_edges(args) if args.native else _hta_edges(args)


def _hta_edges(args: argparse.Namespace) -> int:
    annotation = "" if args.whole_trace or not args.annotation else args.annotation
    with stderr_progress() as progress:
        result = tracegraph.open(args.db).edges(
            args.hta,
            run=args.run,
            annotation=annotation,
            instance=args.instance,
            cache_root=args.cache,
            progress=progress,
            allow_empty=args.allow_empty,
        )
    assert isinstance(result, HtaEdgeSetResult)
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
    return _exit_code_for(result.ranks, args.db)


class _RankOutcome(Protocol):
    rank: int
    status: str
    message: str


def _exit_code_for(ranks: Sequence[_RankOutcome], db: Path | str | None = None) -> int:
    """2 when every rank failed (one stderr line per rank: `rank N: message`), else 0.

    Only reached with --allow-empty when a rank gave no edges (without it the builder refuses
    to write, `EmptyEdgeSetError`): a build where some ranks succeed then exits 0, its failed
    ranks reported with the others.
    `db`, when given, leads each line as in the CLI's other errors.
    """
    if not ranks or any(r.status == "ok" for r in ranks):
        return 0
    where = f"{db}: " if db is not None else ""
    for r in ranks:
        message = " ".join(str(r.message).split()) or "failed"
        print(f"tracegraph: error: {where}rank {r.rank}: {message}", file=sys.stderr)
    return 2


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
    with stderr_progress() as progress:
        result = tracegraph.open(args.db).edges(
            "native",
            run=args.run,
            native_options=options,
            annotation=args.annotation,
            instance=args.instance,
            all_steps=args.all_steps,
            progress=progress,
            allow_empty=args.allow_empty,
        )
    assert isinstance(result, NativeEdgeSetResult)
    print(
        f"edge set '{result.name}' of run '{result.run}': {result.edges_loaded:,} edges"
        + (
            f", {result.inferred_syncs:,} sync edges inferred from runtime calls"
            if result.inferred_syncs
            else ""
        )
    )
    _print_rank_status(result.ranks)
    if result.all_steps or not result.window.whole_trace:
        _print_windows(result.ranks)
    _print_skewed(result.ranks)
    for path in result.cross_rank:
        print(describe(StepVerdict.of(path_summary(path))))
    for note in result.cross_rank_left_out:
        print(f"  cross-rank: {note}")
    return _exit_code_for(result.ranks, args.db)


def _print_windows(ranks: Sequence[RankOutcome]) -> None:
    """Each window's path by rank and step (never summed), and the windows left out and why."""
    for rank in ranks:
        for w in rank.windows:
            label = w["step"] or f"{w['annotation']}[{w['instance']}]"
            if w["status"] != "ok":
                print(f"    rank {rank.rank} {label}: left out: {w['message']}")
                continue
            span = int(w["end_ns"]) - int(w["start_ns"])  # type: ignore[call-overload]
            length = int(w["path_length_ns"])  # type: ignore[call-overload]
            share = f" ({length / span:.1%} of the window)" if span > 0 else ""
            print(
                f"    rank {rank.rank} {label}: path {length / 1e3:,.0f} µs in a "
                f"{span / 1e3:,.0f} µs window{share}"
            )


def _print_skewed(ranks: Sequence[RankOutcome]) -> None:
    for rank in ranks:
        if rank.skewed_edges:
            kinds = ", ".join(f"{t} {n:,}" for t, n in sorted(rank.skewed_edges.items()))
            print(f"  rank {rank.rank}: left out edges that go back in time (clock skew): {kinds}")
        if rank.invariant_breaks:
            print(f"  rank {rank.rank}: warning: {rank.invariant_breaks}")


def _print_rank_status(ranks: Sequence[RankOutcome]) -> None:
    for rank in ranks:
        if rank.status == "ok":
            by_type = ", ".join(f"{t} {n:,}" for t, n in sorted(rank.edges_by_type.items()))
            windows = rank.windows
            if len(windows) > 1:  # one path per window, listed below: never summed
                ok = sum(1 for w in windows if w["status"] == "ok")
                print(f"  rank {rank.rank}: {ok} of {len(windows)} windows built; {by_type}")
                continue
            length = (rank.path_length_ns or 0) / 1e3
            print(f"  rank {rank.rank}: critical path {length:,.0f} µs; {by_type}")
        else:
            print(f"  rank {rank.rank}: failed: {rank.message}")


def _whatif(args: argparse.Namespace) -> int:
    scaling = Scaling.parse(args.scale)
    removed = check_edge_types(args.remove)
    with _open(args.db) as store:
        if args.compare:
            table = compare_what_if(
                store,
                args.edge_set,
                args.compare,
                run=args.run,
                scaling=scaling,
                remove_types=removed,
            )
            warning = None
            if args.compare != CRITICAL_SYNC_ONLY:
                runs = set(edge_set_runs(store, args.edge_set)) & set(
                    edge_set_runs(store, args.compare)
                )
                run = args.run or (next(iter(runs)) if len(runs) == 1 else None)
                if run is not None:
                    warning = window_warning(store, args.edge_set, args.compare, run)
            shown = _compare_table(table)
            title = [
                f"A = {args.edge_set}, B = "
                + (
                    f"{args.edge_set} with only the sync edges on its critical path"
                    if args.compare == CRITICAL_SYNC_ONLY
                    else args.compare
                )
                + f"; durations: {scaling.describe()}"
                + (f"; removed from both: {', '.join(removed)} edges" if removed else ""),
            ]
            rows = table
        else:
            result = what_if(
                store, args.edge_set, run=args.run, scaling=scaling, remove_types=removed
            )
            warning = None
            rows = result.lengths
            shown = _whatif_table(rows)
            title = [
                f"edge set '{result.edge_set}' of run '{result.run}'; durations: "
                f"{scaling.describe()}"
                + (f"; removed: {', '.join(removed)} edges" if removed else "")
            ]
    if warning:
        print(f"tracegraph: warning: {warning}", file=sys.stderr)
    if args.format != "table":
        sys.stdout.write(output.render(shown, args.format))
        return 0
    title.append("critical-path length per rank and window, µs (ratio = after / before)")
    if rows.num_rows and -1 in rows["rank"].to_pylist():
        title.append("rank -1: all ranks as one graph, joined at the collectives")
    print("\n".join(title))
    sys.stdout.write(output.render(shown) if rows.num_rows else "no edges\n")
    return 0


def _us(ns: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.divide(pc.cast(ns, pa.float64()), 1e3)


def _ratio(after: pa.ChunkedArray, before: pa.ChunkedArray) -> pa.Array:
    before_f = pc.cast(before, pa.float64())
    valid = pc.fill_null(pc.greater(before_f, 0), False)
    return pc.if_else(valid, pc.divide(pc.cast(after, pa.float64()), before_f), None)


def _lengths(table: pa.Table, prefix: str, before: str, after: str, ratio: str) -> dict:
    """µs before and after a what-if, and their ratio, from the `{prefix}baseline_ns` and
    `{prefix}scaled_ns` columns."""
    base, scaled = table[f"{prefix}baseline_ns"], table[f"{prefix}scaled_ns"]
    return {before: _us(base), after: _us(scaled), ratio: _ratio(scaled, base)}


def _whatif_table(lengths: pa.Table) -> pa.Table:
    """What-if lengths as a person reads them: µs before and after, and their ratio."""
    return pa.table(
        {
            "rank": lengths["rank"],
            "window": lengths["window"],
            **_lengths(lengths, "", "path_before_us", "path_after_us", "ratio"),
            "path_edges_changed": lengths["path_edges_changed"],
        }
    )


def _compare_table(table: pa.Table) -> pa.Table:
    return pa.table(
        {
            "rank": table["rank"],
            "window": table["window"],
            **_lengths(table, "a_", "a_before_us", "a_after_us", "a_ratio"),
            **_lengths(table, "b_", "b_before_us", "b_after_us", "b_ratio"),
        }
    )


def _path(args: argparse.Namespace) -> int:
    from .path_view import write_stories

    stories = tracegraph.open(args.db).step_paths(
        run=args.run, step=args.step, rank=args.rank, depth=args.depth
    )
    write_stories(sys.stdout, stories, args.depth, args.format)
    return 0


def _diff(args: argparse.Namespace) -> int:
    with _open(args.db) as store:
        diff = diff_edge_sets(store, args.set_a, args.set_b, args.run, args.edge_type, args.rank)
        chakra = chakra_view(store, diff.run, [args.set_a, args.set_b])
        windows = [
            window_label(edge_set_window(store, name, diff.run)) for name in (diff.a, diff.b)
        ]
        warning = window_warning(store, diff.a, diff.b, diff.run)
    if warning:
        print(f"tracegraph: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        head = {
            "run": diff.run,
            "a": diff.a,
            "b": diff.b,
            "windows": {"a": windows[0], "b": windows[1]},
            "counts": diff.counts.to_pylist(),
            "path_lengths": diff.path_lengths.to_pylist(),
            "sync_edges": chakra.to_pylist(),
        }
        # the differing edges stream out batch by batch: millions of rows never become one
        # Python list (a 2.5 M-edge diff printed whole took 19 GB)
        sys.stdout.write(json.dumps(head, indent=1, default=str)[:-2] + ',\n "edges": ')
        output.write(sys.stdout, diff.edges, "json")
        sys.stdout.write("}\n")
        return 0
    if args.format == "csv":
        sys.stdout.write(output.render(diff.edges, "csv"))
        return 0
    print(f"run '{diff.run}': A = {diff.a} ({windows[0]}), B = {diff.b} ({windows[1]})")
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


def _report(args: argparse.Namespace) -> int:
    if args.compare is not None:
        return _compare(args)
    if args.top < 1:
        raise TracegraphError(f"--top {args.top}: name at least one kernel per type")
    report = tracegraph.open(args.db).report(
        args.run,
        ranks=args.rank,
        step=args.step,
        hta_compatible=args.hta_compatible,
        top=args.top,
    )
    if args.table is not None and args.format != "csv":
        raise TracegraphError("--table: only with --format csv (table and json show them all)")
    if args.html is not None:
        from .report_html import report_html

        _write_text(args.html, report_html(report, str(args.db)))
        print(f"wrote {args.html}", file=sys.stderr)
    write_report(sys.stdout, report, args.db, args.format, args.table, options.max_width(args))
    return 0


def _compare(args: argparse.Namespace) -> int:
    comparison = tracegraph.open(args.db).compare(args.compare, run=args.run)
    write_comparison(sys.stdout, comparison, args.format, args.table, options.max_width(args))
    return 0


def _step_number(text: str) -> int:
    number = text.removeprefix("ProfilerStep#")
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a step is N or ProfilerStep#N")
    return int(number)


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
    graph = tracegraph.open(args.db)
    with stderr_progress() as progress:
        result = graph.ingest(*files, run="demo", progress=progress)
    print(f"synthetic traces of {config.ranks} ranks x {config.steps} steps in {traces}/")
    _print_ingest(result, args.db)
    # three native edge sets: HTA 0.5.0's and 0.6.1's semantics, and tracegraph's own
    with stderr_progress() as progress:
        for version in ("hta-0.5.0", "traceinsight-0.6.1"):
            graph.edges(run="demo", emulate_version=version, progress=progress)
        native = graph.edges(run="demo", all_steps=True, progress=progress)
    assert isinstance(native, NativeEdgeSetResult)
    if not args.no_tui:
        return _explore(argparse.Namespace(db=args.db))
    print()
    _info(argparse.Namespace(db=args.db, format="table"))
    with _open(args.db) as store:
        for name, title in (("step-times", "step times"), ("collective-skew", "collectives")):
            rows = store.run(canned_query(name).cypher, {"run": "demo"})
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
        print(describe(StepVerdict.of(path_summary(path))))
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.perfetto is None and args.sync_deps is None:
        raise UsageError("export: name --perfetto OUT.json and/or --sync-deps OUT.json")
    if args.sync_deps is not None:
        if args.edge_set is None:
            raise UsageError("export --sync-deps: name the edge set (--edge-set NAME)")
        deps = tracegraph.open(args.db).sync_dependencies(
            args.edge_set, run=args.run, critical_only=args.critical_only
        )
        _write_json(args.sync_deps, deps)
        total = sum(c["all"] for c in deps["counts"].values())
        critical = sum(c["critical"] for c in deps["counts"].values())
        print(f"wrote {args.sync_deps}: {total:,} sync dependencies, {critical:,} on the path")
    if args.perfetto is None:
        return 0
    counts = tracegraph.open(args.db).export_perfetto(
        args.perfetto,
        run=args.run,
        rank=args.rank,
        edge_set=args.edge_set,
        findings=not args.no_findings,
    )
    print(
        f"wrote {args.perfetto}: {counts['events']:,} events, {counts['flows']:,} critical-path "
        f"edges, {counts['segments']:,} path segments, {counts['findings']} findings (open it "
        "in ui.perfetto.dev)"
    )
    return 0


def _write_json(path: Path, data: object) -> None:
    _write_text(path, json.dumps(data, indent=1) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Whole or not at all (ingest/outputs.py)."""
    try:
        outputs.write_text(path, text)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _explore(args: argparse.Namespace) -> int:
    from .app import run_app  # textual loads only for the TUI
    from .keymap import load_keymap

    db = args.db
    # refused before the app starts (one line, exit 2): no such path, a directory, an empty or
    # non-Kuzu file;
    # a Kuzu database without tracegraph tables or runs is explained in the app
    problem = file_problem(db)
    if problem is not None:
        raise UsageError(problem)
    if args.keymap is not None:
        load_keymap(args.keymap)  # a bad file is one line, before the app starts
    return run_app(db, keymap_file=args.keymap, served=bool(getattr(args, "served", False)))


def _serve(args: argparse.Namespace) -> int:
    from .serve import serve  # textual-serve loads only for serving

    return serve(
        args.db,
        host=args.host,
        port=args.port,
        keymap_file=args.keymap,
        public_url=args.public_url,
        allow_remote=args.allow_remote,
        max_clients=args.max_clients,
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is 1..65535")
    return int(text)


def _open(
    db: Path, timeout_ms: int = 60_000, allow_files: bool = False
) -> AbstractContextManager[GraphStore]:
    """The database, read-only (each statement checked by the guard); a path that holds
    nothing to read is a one-line error."""
    return tracegraph.open(db).reading(timeout_ms, allow_files=allow_files)


if __name__ == "__main__":
    sys.exit(main())
