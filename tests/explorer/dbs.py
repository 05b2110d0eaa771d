"""Small databases for the explorer tests, each built once per session into a shared folder.

- synthetic: `SyntheticConfig(ranks=2, steps=2, layers=4)`, no edge sets;
- with_edges: the same plus two fake edge sets ("fake-a", "fake-b") made from the structural
  edges, so that the step and diff screens have critical paths to show without running HTA;
- native: the synthetic run with the native builder's "native:hta-0.5.0" edge set;
- alexnet: a real single-rank trace without ProfilerStep annotations (None without the traces).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest import schema
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore, write_transaction

TRACES = (Path(__file__).resolve().parents[2] / ".." / "shared" / "traces").resolve()
ALEXNET = TRACES / "hta" / "critical_path" / "alexnet"
SYNTHETIC = SyntheticConfig(ranks=2, steps=2, layers=4)
RUN = "syn"
EVENTS = ":".join(schema.EVENT_LABELS)


def synthetic_db(base: Path) -> Path:
    db = base / "synthetic.kuzu"
    if not db.exists():
        files = write_per_rank(SYNTHETIC, base / "synthetic-traces")
        ingest(files, db, IngestOptions(run=RUN))
    return db


def with_edges_db(base: Path) -> Path:
    db = base / "with_edges.kuzu"
    if not db.exists():
        shutil.copyfile(synthetic_db(base), db)
        with GraphStore(db) as store:
            structural = _structural_edges(store)
        with write_transaction(db) as store:
            for name, table in _fake_edge_sets(structural).items():
                for src, dst in schema.DEP.pairs:
                    mask = pc.and_(
                        pc.equal(table["from_label"], src), pc.equal(table["to_label"], dst)
                    )
                    store.copy("DEP", schema.conform(table.filter(mask), schema.DEP), (src, dst))
                store.copy("EdgeSet", schema.conform(_edge_set_row(name, table), schema.EDGE_SET))
    return db


def native_db(base: Path) -> Path | None:
    """The synthetic run with the native builder's emulation of HTA 0.5.0 (None without it)."""
    try:
        from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
        from tracegraph.ingest.edgesets.native.options import emulate
    except ImportError:
        return None
    db = base / "native.kuzu"
    if not db.exists():
        shutil.copyfile(synthetic_db(base), db)
        build_native_edge_set(db, options=emulate("hta-0.5.0"))
    return db


def alexnet_db(base: Path) -> Path | None:
    if not ALEXNET.is_dir():
        return None
    db = base / "alexnet.kuzu"
    if not db.exists():
        ingest([ALEXNET], db, IngestOptions(run="alexnet"))
    return db


_KINDS = {
    # relation: (DEP type, src boundary, dst boundary, weight expression)
    "NEXT_ON_STREAM": ("kernel_kernel_delay", "end", "start", "b.ts - a.ts - a.dur"),
    "LAUNCHES": ("kernel_launch_delay", "start", "start", "b.ts - a.ts"),
    "CALLS": ("operator_kernel", "start", "start", "b.ts - a.ts"),
    "SYNCS": ("sync_dependency", "end", "end", "b.ts + b.dur - a.ts - a.dur"),
}


def _structural_edges(store: GraphStore) -> pa.Table:
    parts = []
    for rel, (kind, src_b, dst_b, weight) in _KINDS.items():
        table = store.run(
            f"MATCH (a:{EVENTS})-[:{rel}]->(b:{EVENTS}) RETURN a.id AS from_id, b.id AS to_id, "
            "label(a) AS from_label, label(b) AS to_label, a.rank AS rank, a.ts AS ts, "
            f"{weight} AS weight_ns, "
            f"'{kind}' AS type, '{src_b}' AS src_boundary, '{dst_b}' AS dst_boundary, "
            "CASE WHEN label(a) = 'Kernel' THEN a.stream ELSE -1 END AS stream"
        ).table
        parts.append(table)
    return pa.concat_tables(parts).sort_by([("rank", "ascending"), ("ts", "ascending")])


def _fake_edge_sets(edges: pa.Table) -> dict[str, pa.Table]:
    """fake-a: stream-7 kernel chain on the critical path; fake-b: also the syncs, minus rank
    1's launch edges, and kernel gaps weighted 1 ns more."""
    n = edges.num_rows
    on_stream_7 = pc.and_(
        pc.equal(edges["type"], "kernel_kernel_delay"), pc.equal(edges["stream"], 7)
    )
    syncs = pc.equal(edges["type"], "sync_dependency")
    out = {}
    for name, critical in (("fake-a", on_stream_7), ("fake-b", pc.or_(on_stream_7, syncs))):
        table = edges
        weights = pc.max_element_wise(table["weight_ns"], 0)
        if name == "fake-b":
            weights = pc.if_else(
                pc.equal(table["type"], "kernel_kernel_delay"), pc.add(weights, 1), weights
            )
        table = table.set_column(table.column_names.index("weight_ns"), "weight_ns", weights)
        table = table.append_column("on_critical_path", critical)
        table = table.append_column("edge_set", pa.array([name] * n, pa.string()))
        if name == "fake-b":
            drop = pc.and_(
                pc.equal(table["type"], "kernel_launch_delay"), pc.equal(table["rank"], 1)
            )
            table = table.filter(pc.invert(drop))
        table = _path_order(table)
        out[name] = table
    return out


def _path_order(table: pa.Table) -> pa.Table:
    """Number the critical edges of each rank in time order; -1 elsewhere."""
    order = []
    counters: dict[int, int] = {}
    for rank, critical in zip(
        table["rank"].to_pylist(), table["on_critical_path"].to_pylist(), strict=True
    ):
        if critical:
            order.append(counters.get(rank, 0))
            counters[rank] = counters.get(rank, 0) + 1
        else:
            order.append(-1)
    return table.append_column("path_order", pa.array(order, pa.int64()))


def _edge_set_row(name: str, table: pa.Table) -> pa.Table:
    """The EdgeSet node; `ranks` as the HTA builder writes it: {rank: {status, path_length_ns}}."""
    ranks = {}
    for rank in sorted(set(table["rank"].to_pylist())):
        mine = table.filter(pc.and_(pc.equal(table["rank"], rank), table["on_critical_path"]))
        length = int(pc.sum(mine["weight_ns"]).as_py() or 0)
        ranks[str(rank)] = {"status": "ok", "path_length_ns": length}
    row = {
        "id": f"{RUN}/{name}",
        "run": RUN,
        "name": name,
        "producer": "test",
        "version": "0",
        "options": "{}",
        "window": json.dumps({"whole_trace": True}),
        "ranks": json.dumps(ranks),
        "created_at": "2026-01-01T00:00:00+00:00",
        "copy_hash": None,  # no Parquet copy: the diff reads these sets from the database
    }
    return pa.Table.from_pylist([row])


LATE_RANK, LATE_US = 1, 30_000


def late_rank_db(base: Path) -> Path:
    """A 3-rank synthetic job whose rank 1 sleeps 30 ms per step, with `native --all-steps`."""
    from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
    from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set

    db = base / "late.kuzu"
    if not db.exists():
        config = SyntheticConfig(
            ranks=3,
            steps=2,
            layers=4,
            straggler_factor=1.0,
            stall_every=0,
            late_rank=LATE_RANK,
            late_us=LATE_US,
            python_stacks=True,
            annotate=True,
        )
        files = write_per_rank(config, base / "late-traces")
        ingest(files, db, IngestOptions(run="late"))
        build_native_edge_set(db, all_steps=True)
    return db
