"""An edge set's sync dependencies keyed the way Chakra's trace linker keys events, so that a
Chakra user can choose all of them or only those on the critical path (what the linker keeps
when it takes HTA's critical path), and see how many each choice gives per rank.

Each dependency names its two events by rank, `ev_idx` (the event's position in its rank's
`traceEvents`, HTA's and Chakra's index) and `External id`, with their names, and whether it
lies on the critical path; the waiter's kind says the sync it stands for (a kernel waiting on
a kernel: a stream wait; a runtime call: a host-side synchronize).
"""

from __future__ import annotations

from typing import Any

from tracegraph.ingest import schema
from tracegraph.ingest.store import GraphStore

from .runs import id_filter

_SYNCS = (
    "MATCH (a:{src})-[d:DEP]->(b:{dst}) WHERE {where} AND d.edge_set = $edge_set "
    "AND d.type = 'sync_dependency' "
    "RETURN a.rank AS rank, a.id AS src_id, a.ev_idx AS src_ev_idx, "
    "a.external_id AS src_external_id, a.name AS src_name, b.id AS dst_id, "
    "b.ev_idx AS dst_ev_idx, b.external_id AS dst_external_id, b.name AS dst_name, "
    "d.dst_boundary AS dst_boundary, d.on_critical_path AS on_critical_path"
)


def sync_dependencies(
    store: GraphStore, run: str, run_idx: int, edge_set: str, critical_only: bool = False
) -> dict[str, Any]:
    """{"run", "edge_set", "critical_only", "counts": {rank: {"all", "critical"}},
    "dependencies": [...]} (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    for src, dst in schema.DEP.pairs:
        cypher = _SYNCS.format(src=src, dst=dst, where=id_filter("a", run_idx))
        for r in store.run(cypher, {"edge_set": edge_set}).table.to_pylist():
            r["kind"] = "stream_wait" if (src, dst) == ("Kernel", "Kernel") else (
                "host_sync" if dst == "Runtime" else f"{src.lower()}_to_{dst.lower()}"
            )  # fmt: skip
            rows.append(r)
    rows.sort(key=lambda r: (r["rank"], r["src_ev_idx"], r["dst_ev_idx"]))
    counts: dict[str, dict[str, int]] = {}
    for r in rows:
        entry = counts.setdefault(str(r["rank"]), {"all": 0, "critical": 0})
        entry["all"] += 1
        entry["critical"] += int(bool(r["on_critical_path"]))
    shown = [r for r in rows if r["on_critical_path"]] if critical_only else rows
    return {
        "run": run,
        "edge_set": edge_set,
        "critical_only": critical_only,
        "counts": counts,
        "dependencies": [
            {
                "rank": r["rank"],
                "kind": r["kind"],
                "on_critical_path": bool(r["on_critical_path"]),
                "src": {
                    "ev_idx": r["src_ev_idx"],
                    "external_id": r["src_external_id"],
                    "name": r["src_name"],
                    "id": r["src_id"],
                },
                "dst": {
                    "ev_idx": r["dst_ev_idx"],
                    "external_id": r["dst_external_id"],
                    "name": r["dst_name"],
                    "id": r["dst_id"],
                    "boundary": r["dst_boundary"],
                },
            }  # fmt: skip
            for r in shown
        ],
    }
