"""`export`: the run as Chrome trace JSON for Perfetto, or an edge set's sync dependencies
keyed for Chakra."""

from __future__ import annotations

import argparse
from pathlib import Path

import tracegraph

from .. import options
from .common import UsageError, write_json


def add_parser(sub: options.Subcommands) -> None:
    """`export DB --perfetto OUT.json` and/or `--sync-deps OUT.json`."""
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
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Write the files asked for, and a line on what each holds."""
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
