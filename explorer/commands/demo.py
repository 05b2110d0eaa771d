"""`demo`: a synthetic multi-rank job through every stage, for a first look."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import tracegraph

from .. import options
from . import explore, info
from .common import indent, open_reading
from .ingest import print_ingest


def add_parser(sub: options.Subcommands) -> None:
    """`demo` with the synthetic job's size and where its database goes."""
    p = sub.add_parser("demo", help="synthetic multi-rank trace → database → summary (or TUI)")
    p.add_argument("--db", type=Path, default=Path("tracegraph-demo.kuzu"))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--no-tui", action="store_true", help="print the summary instead of the TUI")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Write the job's traces, ingest them, build three edge sets, then open the TUI (or print
    what the database holds, two canned queries, a diff and each step's critical path)."""
    from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
    from tracegraph.ingest.edgesets.native.edge_set import NativeEdgeSetResult
    from tracegraph.ingest.edgesets.native.report import path_summary
    from tracegraph.queries.catalog import canned_query
    from tracegraph.queries.crossrank import StepVerdict, describe
    from tracegraph.queries.diff import diff_edge_sets

    from .. import output
    from ..progress import stderr_progress

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
    print_ingest(result, args.db)
    # three native edge sets: HTA 0.5.0's and 0.6.1's semantics, and tracegraph's own
    with stderr_progress() as progress:
        for version in ("hta-0.5.0", "traceinsight-0.6.1"):
            graph.edges(run="demo", emulate_version=version, progress=progress)
        native = graph.edges(run="demo", all_steps=True, progress=progress)
    assert isinstance(native, NativeEdgeSetResult)
    if not args.no_tui:
        return explore.handle(argparse.Namespace(db=args.db, keymap=None, served=False))
    print()
    info.handle(argparse.Namespace(db=args.db, format="table"))
    with open_reading(args.db) as store:
        for name, title in (("step-times", "step times"), ("collective-skew", "collectives")):
            rows = store.run(canned_query(name).cypher, {"run": "demo"})
            print(f"{title} (tracegraph query {args.db} --canned {name} --param run=demo):")
            print(indent(output.render(rows.table)))
        diff = diff_edge_sets(store, "native:hta-0.5.0", "native:traceinsight-0.6.1", run="demo")
    print(
        f"HTA 0.5.0 vs 0.6.1 semantics (tracegraph diff {args.db} native:hta-0.5.0 "
        "native:traceinsight-0.6.1):"
    )
    print(indent(output.render(diff.counts)))
    print("the job's critical path per step, across ranks (edge set 'native'):")
    for path in native.cross_rank:
        print(describe(StepVerdict.of(path_summary(path))))
    return 0
