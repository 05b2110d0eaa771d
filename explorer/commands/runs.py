"""`runs`: the runs a database holds, and removing them."""

from __future__ import annotations

import argparse
import sys

import tracegraph

from .. import options
from .common import UsageError


def add_parser(sub: options.Subcommands) -> None:
    """`runs DB [list]` and `runs DB rm NAME...`."""
    p = sub.add_parser("runs", help="list the runs; `runs DB rm NAME...` removes runs")
    options.database(p)
    p.add_argument("action", nargs="?", choices=("list", "rm"), default="list")
    p.add_argument("names", nargs="*", metavar="NAME", help="with rm: the runs to remove")
    options.output_format(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """List the runs (their ranks counted), or remove those named."""
    import pyarrow as pa

    from .. import output

    graph = tracegraph.open(args.db)
    if args.action == "rm":
        graph.remove_runs(*args.names)
        print(f"removed {', '.join(args.names)} from {args.db}")
        return 0
    if args.names:
        raise UsageError("runs: names only with rm (runs DB rm NAME...)")
    runs = graph.runs()
    shown = runs.set_column(2, "ranks", pa.array([len(r) for r in runs["ranks"].to_pylist()]))
    # events are those of the ranks loaded in full; the others are summaries (`ingest --summary`)
    summaries = pa.array([len(r) for r in runs["summary_ranks"].to_pylist()])
    shown = shown.set_column(4, "summary_ranks", summaries)
    output.write(sys.stdout, shown, args.format)
    return 0
