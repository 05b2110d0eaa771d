"""`edges`: a dependency edge set of a run, built by HTA (in its own environment) or by
tracegraph's native builder, with each rank's critical path."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import tracegraph

from .. import options
from .common import INT64_MAX, UsageError, exit_code_for

if TYPE_CHECKING:
    from tracegraph.ingest.edgesets.records import RankOutcome


def add_parser(sub: options.Subcommands) -> None:
    """`edges DB|TRACES --hta SPEC | --native` and the builders' options."""
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
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Build the edge set (the traces ingested first where they are not yet) and say, rank by
    rank, what it holds; exit 2 when every rank failed."""
    from .traces import resolve_database

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
    resolve_database(args)
    return _native_edges(args) if args.native else _hta_edges(args)


HTA_ENV_MB = 450  # an HTA environment on disk (measured: 0.5.0 456 MB, 0.6.1 453 MB)


def _hta_edges(args: argparse.Namespace) -> int:
    from tracegraph.ingest.edgesets.hta.edge_set import EdgeSetResult as HtaEdgeSetResult
    from tracegraph.ingest.edgesets.hta.env import cached_env, default_cache_root, parse_spec

    from ..progress import stderr_progress

    annotation = "" if args.whole_trace or not args.annotation else args.annotation
    spec = parse_spec(args.hta)
    root = args.cache or default_cache_root()
    building = cached_env(spec, root) is None
    began = time.perf_counter()
    noticed: list[bool] = []
    with stderr_progress() as bar:

        def progress(stage: str, done: int, total: int) -> None:
            if building and stage.startswith("HTA environment") and done < total:
                if not noticed:  # the build begins (a run HTA cannot read is refused before)
                    noticed.append(True)
                    print(
                        f"tracegraph: building the {spec.name} environment once, the first "
                        f"time it is used: a virtual environment of about {HTA_ENV_MB} MB "
                        f"({spec.requirement}, pandas, numpy, plotly, networkx) in "
                        f"{root / spec.name}; a minute or two",
                        file=sys.stderr,
                    )
                if not sys.stderr.isatty():  # a line per build step where no bar shows them
                    print(f"tracegraph: {stage}", file=sys.stderr)
            bar(stage, done, total)

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
    if building:
        built = cached_env(spec, root)
        took = f"{built.build_seconds:.0f} s" if built else f"{time.perf_counter() - began:.0f} s"
        print(f"tracegraph: built the {spec.name} environment in {took}", file=sys.stderr)
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
    return exit_code_for(result.ranks, args.db)


def _native_edges(args: argparse.Namespace) -> int:
    from tracegraph.ingest.edgesets.native.edge_set import NativeEdgeSetResult
    from tracegraph.ingest.edgesets.native.options import NativeOptions, OptionsError, emulate
    from tracegraph.ingest.edgesets.native.report import path_summary
    from tracegraph.queries.crossrank import StepVerdict, describe

    from ..progress import stderr_progress

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
    in_set = sum(
        r.edges_by_type.get("sync_dependency", 0) for r in result.ranks if r.status == "ok"
    )
    print(
        f"edge set '{result.name}' of run '{result.run}': {result.edges_loaded:,} edges"
        + (
            f"; {result.inferred_syncs:,} sync waits inferred from runtime calls over the "
            f"whole trace (SYNCS), {in_set:,} of them in the set's window(s) as "
            "sync_dependency edges (what `export --sync-deps` writes)"
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
    return exit_code_for(result.ranks, args.db)


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
