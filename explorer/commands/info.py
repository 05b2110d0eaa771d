"""`info`: what a database holds: its runs, their ranks, counts by label, and edge sets."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from .. import options
from .common import indent, open_reading

if TYPE_CHECKING:
    import pyarrow as pa

# Kineto's span of the whole profiling session (cat "Trace"): in every trace, never an event
SESSION_CATEGORY = "Trace"


def add_parser(sub: options.Subcommands) -> None:
    """`info DB`."""
    p = sub.add_parser("info", help="runs, ranks, counts by label and edge set")
    options.database(p)
    options.output_format(p, ("table", "json"))
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Each run with its ranks and edges, then the edge sets (as text or JSON)."""
    from tracegraph.queries.summary import database_info

    from .. import output

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


def _ranks_shown(ranks: pa.Table) -> tuple[pa.Table, str]:
    """The ranks table as the text shows it: files by name under their common folder (said
    once), and the events left out by category in words, without Kineto's session span."""
    import pyarrow as pa

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
