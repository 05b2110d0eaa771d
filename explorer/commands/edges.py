"""`edges`, `whatif`, `path` and `diff`: dependency edge sets, their critical paths and how
two of them differ."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

import tracegraph
from tracegraph.ingest.edgesets.hta.edge_set import EdgeSetResult as HtaEdgeSetResult
from tracegraph.ingest.edgesets.hta.env import cached_env, default_cache_root, parse_spec
from tracegraph.ingest.edgesets.native.edge_set import NativeEdgeSetResult
from tracegraph.ingest.edgesets.native.options import NativeOptions, OptionsError, emulate
from tracegraph.ingest.edgesets.native.report import path_summary
from tracegraph.ingest.edgesets.records import RankOutcome
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.catalog import INT64_MAX
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
from tracegraph.queries.whatif import (
    CRITICAL_SYNC_ONLY,
    Scaling,
    check_edge_types,
    compare_what_if,
    what_if,
)

from .. import output
from ..progress import stderr_progress
from .common import UsageError, exit_code_for, indent, open_reading
from .traces import resolve_database


def edges_command(args: argparse.Namespace) -> int:
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


def whatif_command(args: argparse.Namespace) -> int:
    scaling = Scaling.parse(args.scale)
    removed = check_edge_types(args.remove)
    with open_reading(args.db) as store:
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


def path_command(args: argparse.Namespace) -> int:
    from ..path_view import write_stories

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


def diff_command(args: argparse.Namespace) -> int:
    with open_reading(args.db) as store:
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
    print(indent(output.render(diff.counts)))
    print("critical path length (µs) and status per rank:")
    lengths = diff.path_lengths
    print(
        indent(
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
    print(indent(output.render(chakra)) if chakra.num_rows else "  none in either edge set")
    shown = diff.edges.select([*EDGE_VIEW, "src_ts", "dst_ts"])
    if diff.edges.num_rows == 0:
        print("no differing edges: the two edge sets are identical")
        return 0
    print(f"differing edges ({diff.edges.num_rows}, first {min(args.limit, shown.num_rows)}):")
    print(indent(output.render(shown.slice(0, args.limit), max_width=40)))
    return 0
