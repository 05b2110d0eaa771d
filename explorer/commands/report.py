"""`report`: HTA's standard analyses of every rank and the findings (faults, their cost), as
text, JSON, CSV or one HTML page; or one run against another (`--compare`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import tracegraph
from tracegraph.ingest.errors import TracegraphError

from .. import options
from .common import write_text

if TYPE_CHECKING:
    from tracegraph.ingest.store import GraphStore

# `report --format csv --table`: the findings, the report's tables (queries/report/report.py
# TABLES, which a test holds this to) and the kernels and ops
REPORT_TABLES = (
    "findings", "spread", "nodes", "steps", "temporal", "overlap", "kernel_types", "top_kernels",
    "idle", "launches", "queues", "memory", "gpu_annotations", "allocator", "op_categories",
    "op_shapes", "op_perf", "module_tree", "kernel_sequences", "counters", "collectives",
    "collective_ranks", "stragglers", "unmatched", "kernels", "ops", "structure",
)  # fmt: skip
COMPARE_ONLY = ("kernels", "ops", "structure")  # tables of `--compare` alone (and its steps)


def add_parser(sub: options.Subcommands) -> None:
    """`report DB|TRACES` with its selections and formats."""
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
    p.set_defaults(handler=handle)


def _step_number(text: str) -> int:
    number = text.removeprefix("ProfilerStep#")
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a step is N or ProfilerStep#N")
    return int(number)


def handle(args: argparse.Namespace) -> int:
    """The report of the run (the traces ingested first where they are not yet), or the
    comparison with another run."""
    from .traces import resolve_database

    if args.compare is None and args.top < 1:
        raise TracegraphError(f"--top {args.top}: name at least one kernel per type")
    if args.compare is None and args.table is not None and args.format == "json":
        raise TracegraphError("--table: with the text or --format csv (json holds them all)")
    if args.every_table and (args.table is not None or args.format != "table"):
        raise TracegraphError("--all: the text with every table (not with --table or --format)")
    if args.compare is None and args.table in COMPARE_ONLY:
        raise TracegraphError(f"--table {args.table}: only with --compare OTHER_RUN")
    if args.compare is not None:
        resolve_database(args)
        return _compare(args)
    # traces ingested now are reported from the store that loads them, before it commits
    if not resolve_database(args, lambda store: _report(args, store)):
        with tracegraph.open(args.db).reading() as store:
            _report(args, store)
    return 0


def _report(args: argparse.Namespace, store: GraphStore) -> None:
    from tracegraph.queries.report import build_report

    from ..report_view import write_report

    report = build_report(
        args.db,
        store,
        args.run,
        ranks=args.rank,
        step=args.step,
        hta_compatible=args.hta_compatible,
        top=args.top,
        gpu=args.gpu,
        sequence_op=args.sequence_op,
    )
    if args.html is not None:  # the page, and one line that says where it is
        from ..report_html import report_html

        write_text(args.html, report_html(report, str(args.db)))
        found = len(report.findings)
        print(
            f"wrote {args.html}: the report of run '{report.run}', {len(report.ranks)} rank(s), "
            f"{found} finding(s) (open it in a browser; the text: drop --html)"
        )
        return
    write_report(
        sys.stdout, report, args.db, args.format, args.table, options.max_width(args),
        every_table=args.every_table,
    )  # fmt: skip


def _compare(args: argparse.Namespace) -> int:
    from ..report_view import write_comparison

    if args.every_table or args.html is not None:
        flag = "--all" if args.every_table else "--html"
        raise TracegraphError(f"--compare: {flag} is for a report, not a comparison")
    if args.rank is not None and len(args.rank) > 1:
        raise TracegraphError("--compare: one --rank (the rank whose call trees are matched)")
    rank = None if args.rank is None else args.rank[0]
    comparison = tracegraph.open(args.db).compare(args.compare, run=args.run, rank=rank)
    write_comparison(sys.stdout, comparison, args.format, args.table, options.max_width(args))
    return 0
