"""The DEP edges of one edge set, for a run or one rank of it, as an Arrow table: what a user
takes into their own graph algorithms (`Graph.dependency_graph` makes a networkx graph of it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.store import GraphStore

from .runs import EVENT_LABELS, id_filter

DEPENDENCY_COLUMNS = (
    "src_id", "src_label", "src_name", "src_boundary", "src_time",
    "dst_id", "dst_label", "dst_name", "dst_boundary", "dst_time",
    "type", "weight_ns", "on_critical_path", "path_order",
)  # fmt: skip


def dependency_edges(
    store: GraphStore,
    edge_set: str,
    run_idx: int,
    rank: int | None = None,
    windows: Mapping[int, StepGraph] | None = None,
) -> pa.Table:
    """Every edge of `edge_set` whose source is an event of the run (or of its `rank`), with
    both endpoints' event, boundary ('start'/'end') and time in ns; with `windows` (rank → the
    window one step's graph was built over), that graph's edges: those inside its span, and
    its critical path (`path_order` in its range), the only ones marked critical."""
    table = store.run(
        f"MATCH (a:{EVENT_LABELS})-[d:DEP]->(b:{EVENT_LABELS}) "
        f"WHERE {id_filter('a', run_idx, rank)} AND d.edge_set = $edge_set "
        "RETURN a.id AS src_id, label(a) AS src_label, a.name AS src_name, "
        "d.src_boundary AS src_boundary, "
        "a.ts + CASE WHEN d.src_boundary = 'end' THEN a.dur ELSE 0 END AS src_time, "
        "b.id AS dst_id, label(b) AS dst_label, b.name AS dst_name, "
        "d.dst_boundary AS dst_boundary, "
        "b.ts + CASE WHEN d.dst_boundary = 'end' THEN b.dur ELSE 0 END AS dst_time, "
        "d.type AS type, d.weight_ns AS weight_ns, d.on_critical_path AS on_critical_path, "
        "d.path_order AS path_order, a.rank AS src_rank",
        {"edge_set": edge_set},
    ).table
    if windows is not None:
        ranks = table["src_rank"].to_numpy()
        src, dst = table["src_time"].to_numpy(), table["dst_time"].to_numpy()
        order = pc.fill_null(table["path_order"], -1).to_numpy()
        keep = np.zeros(table.num_rows, bool)
        on_path = np.zeros(table.num_rows, bool)
        for r, w in windows.items():
            mine = ranks == r
            path = mine & (order >= w.first_path_order) & (order < w.end_path_order)
            keep |= (mine & (src >= w.start_ns) & (dst <= w.end_ns)) | path
            on_path |= path
        table = table.set_column(
            table.column_names.index("on_critical_path"), "on_critical_path", pa.array(on_path)
        ).filter(pa.array(keep))
    return table.select(list(DEPENDENCY_COLUMNS))


@dataclass(frozen=True)
class StepGraph:
    """The window one step's graph of a rank was built over, and its path's edges' range."""

    start_ns: int
    end_ns: int
    first_path_order: int
    end_path_order: int
