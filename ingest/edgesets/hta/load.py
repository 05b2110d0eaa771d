"""HTA's exported edges → `DEP` rows keyed to our event nodes; the atomic swap of an edge set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ... import schema
from .inputs import RankInput, RunNodes


@dataclass(frozen=True)
class RankEdges:
    """One rank's edges as DEP rows, with counts of what HTA gave and what could not be keyed."""

    rank: int
    table: pa.Table  # DEP columns plus from_label, to_label
    by_type: dict[str, int]
    on_path_by_type: dict[str, int]
    skipped: int
    skipped_on_path: int
    skipped_ev_idx: list[int]


def rank_edges(
    parquet: Path, item: RankInput, nodes: RunNodes, edge_set: str, sample: int = 10
) -> RankEdges:
    """Read one rank's Parquet, map HTA's ev_idx to node ids and labels, drop unkeyable edges."""
    raw = pq.read_table(parquet)
    src_ev, dst_ev = (
        _original_ev_idx(raw["src_ev_idx"], item),
        _original_ev_idx(raw["dst_ev_idx"], item),
    )
    src_id = np.asarray(schema.event_key(nodes.run_idx, item.rank, pa.array(src_ev)))
    dst_id = np.asarray(schema.event_key(nodes.run_idx, item.rank, pa.array(dst_ev)))
    src_label, dst_label = _labels(src_id, nodes), _labels(dst_id, nodes)
    keyed = (src_label != "") & (dst_label != "")
    on_path = raw["on_critical_path"].to_numpy(zero_copy_only=False)
    missing = np.unique(np.concatenate([src_ev[src_label == ""], dst_ev[dst_label == ""]]))
    n = raw.num_rows
    table = pa.table(
        {
            "from_id": pa.array(src_id, pa.int64()),
            "to_id": pa.array(dst_id, pa.int64()),
            "edge_set": pa.array([edge_set] * n, pa.string()),
            "type": raw["type"],
            "src_boundary": raw["src_boundary"],
            "dst_boundary": raw["dst_boundary"],
            "weight_ns": raw["weight_ns"],
            "on_critical_path": raw["on_critical_path"],
            "path_order": raw["path_order"],
            "from_label": pa.array(src_label, pa.string()),
            "to_label": pa.array(dst_label, pa.string()),
        }
    ).filter(pa.array(keyed))
    return RankEdges(
        item.rank,
        table,
        _count(raw["type"]),
        _count(raw.filter(raw["on_critical_path"])["type"]),
        int(n - keyed.sum()),
        int((on_path & ~keyed).sum()),
        [int(i) for i in missing[:sample]],
    )


def _original_ev_idx(ev_idx: pa.ChunkedArray, item: RankInput) -> np.ndarray:
    positions = ev_idx.to_numpy().astype(np.int64)
    if item.ev_idx_of is None:
        return positions
    return item.ev_idx_of[positions]


def _labels(ids: np.ndarray, nodes: RunNodes) -> np.ndarray:
    """The label of each id's node, or "" where no event node has that id."""
    at = np.searchsorted(nodes.node_ids, ids)
    at_clipped = np.minimum(at, max(len(nodes.node_ids) - 1, 0))
    found = (at < len(nodes.node_ids)) & (nodes.node_ids[at_clipped] == ids)
    labels = np.full(len(ids), "", dtype=object)
    labels[found] = nodes.node_labels[at_clipped[found]]
    return labels


def _count(types: pa.ChunkedArray) -> dict[str, int]:
    counts = pc.value_counts(types).to_pylist()
    return {c["values"]: c["counts"] for c in sorted(counts, key=lambda c: c["values"])}
