"""`path`: each step's critical path in segments, with what fixing each would save."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import tracegraph

from .. import options

if TYPE_CHECKING:
    from tracegraph.ingest.store import GraphStore


def add_parser(sub: options.Subcommands) -> None:
    """`path DB|TRACES` with --step, --rank and --depth."""
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
        "--depth",
        type=options.positive,
        default=2,
        metavar="K",
        help="levels of segments (default 2)",
    )
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Each step's path in segments (the traces ingested first where they are not yet)."""
    from ..path_view import write_stories
    from .traces import resolve_database

    def answer(store: GraphStore) -> None:
        from tracegraph.queries.path import step_stories

        stories = step_stories(
            args.db, run=args.run, step=args.step, rank=args.rank, depth=args.depth, store=store
        )
        _say_summary_ranks(store, args.run)
        write_stories(sys.stdout, stories, args.depth, args.format)

    # traces ingested now are answered from the store that loads them, before it commits
    if not resolve_database(args, answer):
        with tracegraph.open(args.db).reading() as store:
            answer(store)
    return 0


def _say_summary_ranks(store: GraphStore, run: str | None) -> None:
    """On a run with summary ranks, how a path joins which ranks."""
    from tracegraph.ingest.edgesets.records import run_source
    from tracegraph.queries.report.ranks import ranks_phrase

    source = run_source(store, run)
    if source.summarised and source.files:
        print(
            f"tracegraph: run '{source.run}': the path joins {ranks_phrase(source.files)} "
            f"through events and {ranks_phrase(source.summarised)} through collective arrivals "
            "(summaries: such a rank's work between arrivals is one segment, its elapsed time "
            "less its waits, an estimate)",
            file=sys.stderr,
        )
