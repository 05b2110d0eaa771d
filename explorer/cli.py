"""The `tracegraph` command: its arguments, and the one-line errors (exit code 2).

Results go to stdout, progress and errors to stderr. Parsing imports nothing heavy: a command's
handler (`commands.py`) loads only when it runs, so `--help` and `--version` start at once and each
command pays only for the modules it uses.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from tracegraph.ingest.errors import TraceFormatError, TracegraphError

from . import options

# `report --format csv --table`: the findings, the report's tables (queries/report/report.py
# TABLES, which a test holds this to) and the kernels and ops
REPORT_TABLES = (
    "findings", "spread", "nodes", "steps", "temporal", "overlap", "kernel_types", "top_kernels",
    "idle", "launches", "queues", "memory", "gpu_annotations", "allocator", "op_categories",
    "op_shapes", "op_perf", "module_tree", "kernel_sequences", "collectives", "collective_ranks",
    "stragglers", "unmatched", "kernels", "ops", "structure",
)  # fmt: skip


# the module of commands/ that runs each command
_COMMAND_MODULES = {
    "ingest": "store", "runs": "store", "info": "store", "query": "query", "queries": "query",
    "edges": "edges", "whatif": "edges", "path": "edges", "diff": "edges", "report": "report",
    "export": "report", "explore": "tui", "serve": "tui", "demo": "demo",
}  # fmt: skip


def _handler(name: str) -> Callable[[argparse.Namespace], int | None]:
    """The function that runs the command `name` (`commands.<module>.<name>_command`), imported
    only now."""
    module = importlib.import_module(f"{__package__}.commands.{_COMMAND_MODULES[name]}")
    return getattr(module, f"{name}_command")  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(_handler(args.handler)(args) or 0)
    except TracegraphError as exc:
        db = _database_named(args)
        # a build refused because ranks gave nothing: first what each of them gave, one line each
        for line in getattr(exc, "rank_lines", ()):
            print(f"tracegraph: error: {_error_line(TracegraphError(line), db)}", file=sys.stderr)
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


def _database_named(args: argparse.Namespace) -> Path | None:
    """The database an error is about: the command's (once `commands/traces.py` has set it), or
    the one path it was given."""
    db = getattr(args, "db", None)
    inputs = getattr(args, "inputs", None)
    if db is None and inputs is not None and len(inputs) == 1:
        return Path(inputs[0])
    return db if db is None else Path(db)


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


class _VersionAction(argparse.Action):
    """--version: the version is read (package metadata, ~40 ms) only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        print(f"tracegraph {_version()}")
        parser.exit(0)


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
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="load trace files or folders (per-rank or merged) as one run")
    p.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="trace files or folders (none: with "
        "--full-ranks, ranks of a summary run already in DB)"
    )  # fmt: skip
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
    p.add_argument(
        "--summary",
        action="store_true",
        help="keep of each rank a summary (steps, collective arrivals, figures, findings), not "
        "its events: a fleet's report in a fraction of the time and space, without critical "
        "paths",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="a file that cannot be read as a trace is reported and the others loaded (default: "
        "it fails the whole ingest, which leaves the database as it was)",
    )
    p.add_argument(
        "--full-ranks",
        metavar="auto|LIST",
        help="with --summary, or alone on a summary run of DB: load these ranks' events too "
        "(auto: those the summary points at, stragglers and ranks that stand out, and a typical "
        "one; or a list: 0,5,7), read again from their trace files",
    )
    p.set_defaults(handler="ingest")

    p = sub.add_parser("runs", help="list the runs; `runs DB rm NAME...` removes runs")
    options.database(p)
    p.add_argument("action", nargs="?", choices=("list", "rm"), default="list")
    p.add_argument("names", nargs="*", metavar="NAME", help="with rm: the runs to remove")
    options.output_format(p)
    p.set_defaults(handler="runs")

    p = sub.add_parser("info", help="runs, ranks, counts by label and edge set")
    options.database(p)
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler="info")

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
    p.set_defaults(handler="query")

    p = sub.add_parser("edges", help="build a dependency edge set: HTA's graph, or native")
    options.database_or_traces(p)
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
    p.set_defaults(handler="edges")

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
    p.set_defaults(handler="whatif")

    p = sub.add_parser(
        "path",
        help="each step's critical path in segments, with what fixing each would save",
        description="The critical path of each ProfilerStep (across ranks where the step has "
        "several, else the rank's own) collapsed into segments: consecutive path time under one "
        "range (annotation, nn.Module, op, kernel), communication, idle. A segment's 'saves' is "
        "the step time gone with its work taking no time (the path recomputed over the same "
        "graph). Built from the run's archive with tracegraph's own rules; writes nothing.",
    )
    options.database_or_traces(p)
    options.run(p, "the database holds several")
    p.add_argument("--step", type=int, metavar="N", help="only ProfilerStep#N")
    p.add_argument("--rank", type=int, help="this rank's own path (default: across ranks)")
    p.add_argument(
        "--depth", type=_positive, default=2, metavar="K", help="levels of segments (default 2)"
    )
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler="path")

    p = sub.add_parser("diff", help="compare two edge sets of a run")
    options.database(p)
    p.add_argument("set_a", metavar="SET_A")
    p.add_argument("set_b", metavar="SET_B")
    options.run(p, "several runs hold both edge sets")
    p.add_argument("--type", dest="edge_type", help="only this edge type, e.g. sync_dependency")
    p.add_argument("--rank", type=int, help="only this rank")
    p.add_argument("--limit", type=int, default=50, help="differing edges to list (table format)")
    options.output_format(p)
    p.set_defaults(handler="diff")

    p = sub.add_parser(
        "report", help="HTA's standard analyses of every rank, and findings (faults, their cost)"
    )
    options.database_or_traces(p)
    options.run(p, "the database holds several")
    p.add_argument(
        "--summary",
        action=argparse.BooleanOptionalAction,
        help="with traces: ingest them as summaries (see ingest --summary): a fleet's report "
        "in a fraction of the time, without critical paths or savings (default: from 512 trace "
        "files on; --no-summary: every event)",
    )
    p.add_argument("--rank", type=int, action="append", help="only this rank (repeatable)")
    p.add_argument(
        "--step", type=_step_number, help="only the GPU work of this step: N or ProfilerStep#N"
    )
    p.add_argument(
        "--hta-compatible",
        action="store_true",
        help="HTA 0.5.0's figures (whole µs, without the last ProfilerStep), to check against HTA",
    )
    p.add_argument(
        "--top",
        type=int,
        default=10,
        help="kernels named per type, operator shapes per rank (default 10)",
    )
    p.add_argument(
        "--gpu",
        metavar="NAME",
        help="every rank's GPU for the operators' roofline (h100, a100, b200, mi300x, ...), "
        "where the traces do not name it",
    )
    p.add_argument(
        "--sequence-op",
        metavar="NAME",
        help="kernel_sequences: the kernels launched by each call whose name holds NAME "
        "(outermost), e.g. aten::linear (default: each CPU op Python called)",
    )
    p.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write the report as one HTML page instead (prints where)",
    )
    p.add_argument(
        "--compare",
        metavar="OTHER_RUN",
        help="instead: this run against OTHER_RUN (steps, ops and kernels side by side, and "
        "one rank's call trees matched op by op: --rank N, else each run's first)",
    )
    options.output_format(p, ("table", "json", "csv"))
    options.width(p)
    p.add_argument(
        "--table",
        choices=REPORT_TABLES,
        help="the one table to print in full, as text or with --format csv (csv's default: "
        "findings; kernels, ops and structure: with --compare)",
    )
    p.add_argument(
        "--all",
        dest="every_table",
        action="store_true",
        help="the text with every table after the findings (default: the steps, the findings, "
        "the ranks at a glance and a list of the tables)",
    )
    p.set_defaults(handler="report")

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
    p.set_defaults(handler="export")

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
    p.set_defaults(handler="explore")

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
        default=options.DEFAULT_MAX_CLIENTS,
        metavar="N",
        help=f"browser tabs served at once, each its own explorer of ~100 MB "
        f"(default {options.DEFAULT_MAX_CLIENTS})",
    )
    p.add_argument("--keymap", type=Path, metavar="FILE", help="your keys, as for explore")
    p.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers reach the server by, where that is not http://HOST:PORT "
        "(e.g. --host 0.0.0.0, or behind a proxy)",
    )
    p.set_defaults(handler="serve")

    p = sub.add_parser("queries", help="list canned queries with their parameters")
    p.set_defaults(handler="queries")

    p = sub.add_parser("demo", help="synthetic multi-rank trace → database → summary (or TUI)")
    p.add_argument("--db", type=Path, default=Path("tracegraph-demo.kuzu"))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--no-tui", action="store_true", help="print the summary instead of the TUI")
    p.set_defaults(handler="demo")
    return parser


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is 1..65535")
    return int(text)


def _step_number(text: str) -> int:
    number = text.removeprefix("ProfilerStep#")
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a step is N or ProfilerStep#N")
    return int(number)


if __name__ == "__main__":
    sys.exit(main())
