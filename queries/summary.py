"""What a database holds: runs, ranks, node counts by label, edge counts, edge sets."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.store import GraphStore


@dataclass(frozen=True)
class RunInfo:
    name: str
    world_size: int
    ingested_at: str
    tool_version: str
    sources: list[str]
    edges: dict[str, int]
    collectives: int
    # rank, file, device, Op, Runtime, Kernel, cuda_sync, skipped, and in a run with summary
    # ranks (`ingest --summary`) their tier: the counts of a summary rank are of its trace
    ranks: pa.Table


@dataclass(frozen=True)
class DatabaseInfo:
    path: str
    runs: list[RunInfo]
    edge_sets: pa.Table


def database_info(store: GraphStore) -> DatabaseInfo:
    """Summaries of every run; counts come from the Run and Rank nodes written at ingest."""
    runs = store.run(
        "MATCH (r:Run) RETURN r.name AS name, r.world_size AS world_size, "
        "r.ingested_at AS ingested_at, r.tool_version AS tool_version, r.sources AS sources, "
        "r.edge_counts AS edge_counts ORDER BY r.run_idx"
    ).table.to_pylist()
    tier = "k.tier" if "tier" in store.properties("Rank") else "NULL"
    ranks = store.run(
        "MATCH (k:Rank) RETURN k.run AS run, k.rank AS rank, k.file AS file, k.device AS device, "
        "k.op_count AS Op, k.runtime_count AS Runtime, k.kernel_count AS Kernel, "
        f"k.cuda_sync_count AS cuda_sync, k.skipped AS skipped, {tier} AS tier "
        "ORDER BY run, rank"
    ).table
    counted = store.run("MATCH (c:Collective) RETURN c.run AS run, count(*) AS n").table
    collectives = dict(zip(counted["run"].to_pylist(), counted["n"].to_pylist(), strict=True))
    edge_sets = store.run(
        "MATCH (e:EdgeSet) RETURN e.run AS run, e.name AS name, e.producer AS producer, "
        "e.version AS version, e.window AS window ORDER BY run, name"
    ).table
    out = []
    for row in runs:
        mine = ranks.filter(pc.equal(ranks["run"], row["name"])).drop_columns(["run"])
        if "summary" not in mine["tier"].to_pylist():
            mine = mine.drop_columns(["tier"])  # every rank's events loaded: said by nothing
        out.append(
            RunInfo(
                name=row["name"],
                world_size=row["world_size"],
                ingested_at=row["ingested_at"],
                tool_version=row["tool_version"],
                sources=json.loads(row["sources"]),
                edges=json.loads(row["edge_counts"] or "{}"),
                collectives=collectives.get(row["name"], 0),
                ranks=mine,
            )
        )
    return DatabaseInfo(str(store.path), out, edge_sets)
