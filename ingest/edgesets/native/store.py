"""Native window graphs → `DEP` rows, the `EdgeSet` node and inferred `SYNCS`, in one write.

Conventions shared with the HTA edge sets (`hta/load.py`): one DEP row per edge, keyed to the
event nodes by (run, rank, ev_idx); `weight_ns` is the weight the longest path used (HTA counts
negative weights as 0); `path_order` is the edge's position on its rank's critical path (-1 off
it; with several windows per rank the windows' paths follow one another); the EdgeSet node's id is
`run/name`, and its options, window and per-rank status are JSON text.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ...store import GraphStore
from .crossrank import Instance
from .edges import TYPE_NAMES
from .frame import KIND_KERNEL, KIND_RUNTIME, NODE_LABEL, Frame
from .graph import WindowGraph
from .syncs import SYNC_TYPES, UNCERTAIN, InferredSyncs

BOUNDARY = np.array(["start", "end"], dtype=object)


def label_array(kinds: np.ndarray) -> np.ndarray:
    labels = np.full(len(kinds), None, dtype=object)
    for kind, label in NODE_LABEL.items():
        labels[kinds == kind] = label
    return labels


def window_rows(
    graph: WindowGraph, run_idx: int, edge_set: str, path_offset: int
) -> tuple[pa.Table, int]:
    """DEP rows of one window graph (edges touching non-node events dropped), skipped count."""
    e, c = graph.edges, graph.clip
    src_row, dst_row = e.src // 2, e.dst // 2
    src_label, dst_label = label_array(c.kind[src_row]), label_array(c.kind[dst_row])
    keep = (src_label != None) & (dst_label != None)  # noqa: E711 - elementwise on objects
    order = np.full(len(e), -1, np.int64)
    order[graph.path.edges] = np.arange(len(graph.path.edges)) + path_offset
    rank = graph.rank
    table = pa.table(
        {
            "from_id": schema.event_key(
                run_idx, pa.array(np.full(len(e), rank)), pa.array(c.ev_idx[src_row])
            ),
            "to_id": schema.event_key(
                run_idx, pa.array(np.full(len(e), rank)), pa.array(c.ev_idx[dst_row])
            ),
            "edge_set": pa.array(np.full(len(e), edge_set, dtype=object), pa.string()),
            "type": pa.array(np.array(TYPE_NAMES, dtype=object)[e.kind], pa.string()),
            "src_boundary": pa.array(BOUNDARY[e.src % 2], pa.string()),
            "dst_boundary": pa.array(BOUNDARY[e.dst % 2], pa.string()),
            "weight_ns": pa.array(graph.path_weight * graph.unit_ns, pa.int64()),
            "on_critical_path": pa.array(order >= 0),
            "path_order": pa.array(order),
            "from_label": pa.array(src_label, pa.string()),
            "to_label": pa.array(dst_label, pa.string()),
        }
    )
    return table.filter(pa.array(keep)), int((~keep).sum())


def first_of_each_edge(edges: pa.Table) -> pa.Table:
    """One row per (from, boundary, to, boundary): a path row if any, else the first."""
    if edges.num_rows == 0:
        return edges
    keys = ["from_id", "src_boundary", "to_id", "dst_boundary"]
    numbered = edges.append_column("_pos", pa.array(np.arange(edges.num_rows)))
    numbered = numbered.append_column("_off", pc.invert(edges["on_critical_path"]))
    ordered = numbered.sort_by(
        [(k, "ascending") for k in keys] + [("_off", "ascending"), ("_pos", "ascending")]
    )
    cols = [ordered[k].to_numpy(zero_copy_only=False) for k in keys]
    same = np.ones(ordered.num_rows - 1, bool)
    for col in cols:
        same &= col[1:] == col[:-1]
    first = np.concatenate([[True], ~same])
    kept = ordered.filter(pa.array(first))
    kept = kept.sort_by([("_pos", "ascending")])
    return kept.drop_columns(["_pos", "_off"])


def inferred_sync_rows(frame: Frame, syncs: InferredSyncs, run_idx: int) -> pa.Table:
    """SYNCS rows (source 'inferred') for one rank: GPU activity → the call or GPU row waiting;
    an uncertain one has '?' after its sync_type."""
    src_kind = frame.kind[syncs.gpu_row]
    dst_kind = frame.kind[syncs.waiter_row]
    keep = (src_kind == KIND_KERNEL) & np.isin(dst_kind, (KIND_RUNTIME, KIND_KERNEL))
    n = int(keep.sum())
    rank = pa.array(np.full(n, frame.rank))
    # an uncertain wait (the runtime calls left other readings open) is marked 'Event Sync?'
    sync_type = np.array(SYNC_TYPES, dtype=object)[syncs.sync_type]
    sync_type = np.where(syncs.certain, sync_type, sync_type + UNCERTAIN)
    return pa.table(
        {
            "from_id": schema.event_key(run_idx, rank, pa.array(frame.ev_idx[syncs.gpu_row[keep]])),
            "to_id": schema.event_key(
                run_idx, rank, pa.array(frame.ev_idx[syncs.waiter_row[keep]])
            ),
            "from_label": pa.array(["Kernel"] * n, pa.string()),
            "to_label": pa.array(label_array(dst_kind[keep]), pa.string()),
            "sync_type": pa.array(sync_type[keep], pa.string()),
            "source": pa.array(["inferred"] * n, pa.string()),
            "sync_ev_idx": pa.array(frame.ev_idx[syncs.call_row[keep]]),
        }
    )


def collective_instances(store: GraphStore, run: str) -> dict[int, Instance]:
    """Collective id → its label ("allreduce #3"), participants as (rank, ev_idx), and its
    process group."""
    members: dict[int, list[tuple[int, int]]] = {}
    labels: dict[int, str] = {}
    groups: dict[int, str] = {}
    for label in ("Kernel", "Op"):
        table = store.run(
            f"MATCH (p:{label})-[:PART_OF]->(c:Collective) WHERE c.run = $run "
            "RETURN c.id AS c, c.name AS name, c.seq AS seq, c.process_group AS pg, "
            "p.rank AS rank, p.ev_idx AS ev",
            {"run": run},
        ).table
        for c, name, seq, pg, r, ev in zip(
            *(table[col].to_pylist() for col in ("c", "name", "seq", "pg", "rank", "ev")),
            strict=True,
        ):
            members.setdefault(int(c), []).append((int(r), int(ev)))
            labels[int(c)] = f"{name} #{seq}"
            groups[int(c)] = pg or ""
    return {c: Instance(labels[c], tuple(sorted(m)), groups[c]) for c, m in members.items()}
