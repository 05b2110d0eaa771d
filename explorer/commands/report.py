"""`report` and `export`: the analyses and findings of a run, and the run as files for other
tools."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import tracegraph
from tracegraph.ingest.errors import TracegraphError

from .. import options
from ..report_view import write_comparison, write_report
from .common import UsageError, write_json, write_text
from .traces import resolve_database

COMPARE_ONLY = ("kernels", "ops", "structure")  # tables of `--compare` alone (and its steps)

if TYPE_CHECKING:
    from tracegraph.ingest.store import GraphStore


def report_command(args: argparse.Namespace) -> int:
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
    if args.every_table or args.html is not None:
        flag = "--all" if args.every_table else "--html"
        raise TracegraphError(f"--compare: {flag} is for a report, not a comparison")
    if args.rank is not None and len(args.rank) > 1:
        raise TracegraphError("--compare: one --rank (the rank whose call trees are matched)")
    rank = None if args.rank is None else args.rank[0]
    comparison = tracegraph.open(args.db).compare(args.compare, run=args.run, rank=rank)
    write_comparison(sys.stdout, comparison, args.format, args.table, options.max_width(args))
    return 0


def export_command(args: argparse.Namespace) -> int:
    if args.perfetto is None and args.sync_deps is None:
        raise UsageError("export: name --perfetto OUT.json and/or --sync-deps OUT.json")
    if args.sync_deps is not None:
        if args.edge_set is None:
            raise UsageError("export --sync-deps: name the edge set (--edge-set NAME)")
        deps = tracegraph.open(args.db).sync_dependencies(
            args.edge_set, run=args.run, critical_only=args.critical_only
        )
        write_json(args.sync_deps, deps)
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
        f"wrote {args.perfetto}: {counts['events']:,} events, {counts['path_edges']:,} "
        f"critical-path edges (their events marked; {counts['flows']:,} arrows where the path "
        f"changes track), {counts['segments']:,} path segments, {counts['findings']} findings "
        "(open it in ui.perfetto.dev)"
    )
    return 0
