"""The runs of a database and the key ranges that select one run's or one rank's event nodes.

Event ids pack (run_idx, rank, ev_idx) into one INT64 (see ingest.schema.event_key) and nodes are
loaded sorted by (rank, ts), so an id range selects a run or a rank with zone-map pruning, which
Kuzu applies only to literals: the bounds are validated integers inlined into the Cypher text.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracegraph.ingest import schema
from tracegraph.ingest.store import GraphStore

EVENT_LABELS = ":".join(schema.EVENT_LABELS)  # "Op:Runtime:Kernel", a union of labels in MATCH
CPU_LABELS = ":".join(schema.CPU_LABELS)


@dataclass(frozen=True)
class RunRef:
    """One ingested run: its name, key prefix and size."""

    name: str
    run_idx: int
    world_size: int
    ranks: tuple[int, ...]
    events: int  # of its ranks with events loaded
    summarised: tuple[int, ...] = ()  # ranks kept as summaries (`ingest --summary`)


def list_runs(store: GraphStore) -> list[RunRef]:
    """Every run in ingest order, with the ranks it holds and its event count."""
    runs = store.run(
        "MATCH (r:Run) RETURN r.name AS name, r.run_idx AS run_idx, r.world_size AS world_size "
        "ORDER BY run_idx"
    ).table.to_pylist()
    tier = "k.tier" if "tier" in store.properties("Rank") else "NULL"
    ranks = store.run(
        f"MATCH (k:Rank) RETURN k.run AS run, k.rank AS rank, k.event_count AS events, {tier} "
        "AS tier ORDER BY run, rank"
    ).table.to_pylist()
    out = []
    for row in runs:
        mine = [r for r in ranks if r["run"] == row["name"]]
        out.append(
            RunRef(
                row["name"],
                int(row["run_idx"]),
                int(row["world_size"] or len(mine)),
                tuple(int(r["rank"]) for r in mine),
                sum(int(r["events"] or 0) for r in mine if r["tier"] != "summary"),
                tuple(int(r["rank"]) for r in mine if r["tier"] == "summary"),
            )
        )
    return out


id_range = schema.key_range  # [lo, hi) of the event ids of a run, or of one rank of it


def id_filter(var: str, run_idx: int, rank: int | None = None) -> str:
    """`var.id >= lo AND var.id < hi` with literal bounds (validated integers, see module doc)."""
    lo, hi = id_range(run_idx, rank)
    return f"{var}.id >= {lo} AND {var}.id < {hi}"


def rank_of_id(event_id: int) -> int:
    return schema.key_rank(int(event_id))


def ev_idx_of_id(event_id: int) -> int:
    return int(event_id) & schema.MAX_EV
