"""`ingest`, `runs` and `info`: what goes into a database and what it holds."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pyarrow as pa

import tracegraph
from tracegraph.ingest.full_ranks import FullRanks
from tracegraph.ingest.pipeline import IngestResult
from tracegraph.ingest.schema import MAX_RANK
from tracegraph.queries.catalog import INT64_MAX, INT64_MIN
from tracegraph.queries.report.ranks import ranks_phrase
from tracegraph.queries.summary import database_info

from .. import output
from ..progress import stderr_progress
from .common import INTEGER, UsageError, indent, open_reading


def ingest_command(args: argparse.Namespace) -> int:
    full_ranks = _full_ranks(args.full_ranks)
    if not args.paths:
        if full_ranks is None:
            raise UsageError("ingest: name trace files or folders (or --full-ranks on DB's run)")
        with stderr_progress() as progress:
            full = tracegraph.open(args.db).load_full_ranks(
                full_ranks, run=args.run, progress=progress
            )
        print_full_ranks(full, args.db)
        return 0
    if full_ranks is not None and not args.summary:
        raise UsageError("--full-ranks: with --summary (a full ingest loads every rank)")
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
            summary=args.summary,
            full_ranks=full_ranks,
            keep_going=args.keep_going,
            progress=progress,
        )
    for name, why in result.skipped:
        print(f"tracegraph: skipped {name}: {why}", file=sys.stderr)
    print_ingest(result, args.db)
    if result.full is not None:
        print_full_ranks(result.full, args.db)
    return 0


def _full_ranks(spec: str | None) -> list[int] | str | None:
    if spec is None or spec == "auto":
        return spec
    parts = [p.strip() for p in spec.split(",")]
    if not parts or not all(INTEGER.fullmatch(p) and int(p) >= 0 for p in parts):
        raise UsageError(f"--full-ranks {spec}: auto, or ranks separated by commas (0,5,7)")
    return [int(p) for p in parts]


def print_full_ranks(full: FullRanks, db: Path) -> None:
    edges = ", ".join(f"{n:,} {label}" for label, n in sorted(full.edges.items()) if n)
    print(
        f"loaded {ranks_phrase(full.ranks)} of run '{full.run}' in full into {db}: "
        f"{full.events:,} events; edges: {edges or 'none'}"
    )


def _pid_ranks(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        pid, sep, rank = (part.strip() for part in item.partition("="))
        if not sep or not INTEGER.fullmatch(pid) or not INTEGER.fullmatch(rank):
            raise UsageError(f"--rank-of-pid {item}: expected PID=RANK with integers")
        if not INT64_MIN <= int(pid) <= INT64_MAX:
            raise UsageError(f"--rank-of-pid {item}: pid {pid} is out of the 64-bit range")
        if not 0 <= int(rank) <= MAX_RANK:
            raise UsageError(f"--rank-of-pid {item}: rank {rank} is out of range 0..{MAX_RANK}")
        out[int(pid)] = int(rank)
    return out


def print_ingest(result: IngestResult, db: Path) -> None:
    totals = {"Op": 0, "Runtime": 0, "Kernel": 0}
    for rank in result.ranks:
        for label in totals:
            totals[label] += rank.counts[label]
    nodes = ", ".join(f"{n:,} {label}" for label, n in totals.items())
    edges = ", ".join(f"{n:,} {label}" for label, n in result.edges.items())
    if result.ranks and all(rank.tier == "summary" for rank in result.ranks):
        print(
            f"summarised run '{result.run}' into {db}: {len(result.ranks)} rank(s), their "
            f"steps, collective arrivals, figures and findings; their events ({nodes}) not "
            "loaded (--summary)"
        )
        print(f"{result.collectives:,} Collective")
        return
    print(f"ingested run '{result.run}' into {db}: {len(result.ranks)} rank(s); {nodes}")
    print(f"edges: {edges}; {result.collectives:,} Collective")


def runs_command(args: argparse.Namespace) -> int:
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


def info_command(args: argparse.Namespace) -> int:
    with open_reading(args.db) as store:
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
        ranks, folder = _ranks_shown(run.ranks)
        if folder:
            print(f"  files in {folder}")
        print(indent(output.render(ranks, "table", max_width=48)))
    if info.edge_sets.num_rows:
        print("edge sets:")
        print(indent(output.render(info.edge_sets)))
    return 0


# Kineto's span of the whole profiling session (cat "Trace"): in every trace, never an event
SESSION_CATEGORY = "Trace"


def _ranks_shown(ranks: pa.Table) -> tuple[pa.Table, str]:
    """The ranks table as the text shows it: files by name under their common folder (said
    once), and the events left out by category in words, without Kineto's session span."""
    files = [str(f) for f in ranks["file"].to_pylist()] if "file" in ranks.column_names else []
    folder = os.path.commonpath([os.path.dirname(f) for f in files]) if files else ""
    if folder and folder != os.sep:
        names = [os.path.relpath(f, folder) for f in files]
        ranks = ranks.set_column(ranks.column_names.index("file"), "file", pa.array(names))
    else:
        folder = ""
    if "skipped" in ranks.column_names:
        words = []
        for text in ranks["skipped"].to_pylist():
            counts = json.loads(text) if text else {}
            counts.pop(SESSION_CATEGORY, None)
            words.append(", ".join(f"{cat} {n:,}" for cat, n in sorted(counts.items())))
        ranks = ranks.set_column(ranks.column_names.index("skipped"), "skipped", pa.array(words))
    return ranks, folder


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
