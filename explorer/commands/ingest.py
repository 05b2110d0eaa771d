"""`ingest`: trace files or folders into a database as one run (or, of a summary run, some
ranks' events in full)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import tracegraph

from .. import options
from .common import INT64_MAX, INT64_MIN, INTEGER, UsageError

if TYPE_CHECKING:
    from tracegraph.ingest.full_ranks import FullRanks
    from tracegraph.ingest.pipeline import IngestResult


def add_parser(sub: options.Subcommands) -> None:
    """`ingest PATH... --db DB` and its options."""
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
        help="worker processes that parse files in parallel (default: the cores, at most 8, "
        "where there are several files and over 64 MiB of them; 1: none); with --ray, files in "
        "flight",
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
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Ingest the paths into the database, then say what it now holds."""
    from ..progress import stderr_progress

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
    """One line: the ranks of a summary run loaded in full, their events and edges."""
    from tracegraph.queries.report.ranks import ranks_phrase

    edges = ", ".join(f"{n:,} {label}" for label, n in sorted(full.edges.items()) if n)
    print(
        f"loaded {ranks_phrase(full.ranks)} of run '{full.run}' in full into {db}: "
        f"{full.events:,} events; edges: {edges or 'none'}"
    )


def _pid_ranks(items: list[str]) -> dict[int, int]:
    from tracegraph.ingest.schema import MAX_RANK

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
    """What an ingest loaded: its run, ranks, nodes and edges (or that it summarised them)."""
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
