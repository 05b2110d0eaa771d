"""Diff two edge sets of one run: which dependency edges, path flags and lengths differ, and why.

An edge is identified by (source event, source boundary, destination event, destination boundary,
type). Edges in both sets may still differ in weight or in whether they lie on the critical path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest import archive, schema
from tracegraph.ingest.archive import RunArchive
from tracegraph.ingest.edgesets import copies
from tracegraph.ingest.edgesets.records import edge_set_copies, rank_outcomes
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import GraphStore

from .runs import id_filter

KEY = ["src", "src_boundary", "dst", "dst_boundary", "type"]
KERNEL_GAP_CUTOFF_NS = 1_500_000
# A differing edge as a person reads it (the CLI and the diff screen show these columns).
EDGE_VIEW = ("change", "type", "rank", "src_name", "src_boundary", "dst_name", "dst_boundary",
             "a_weight_ns", "b_weight_ns", "reason")  # fmt: skip
CHANGES = ("only in A", "only in B", "weight changed", "critical path changed")
RUNTIME_LOCK_CALLS = ("cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync")

# Endpoint labels are named: unlabeled `a.id` fails in Kuzu 0.11.3 (EdgeSet.id is a STRING).
# Only what identifies and weighs an edge is read for both sets; the endpoints are described
# afterwards, for the differing edges only (`_described`).
_EDGES = """
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND {where} {filters}
RETURN a.id AS src, d.src_boundary AS src_boundary, b.id AS dst, d.dst_boundary AS dst_boundary,
       d.type AS type, d.weight_ns AS weight_ns, d.on_critical_path AS on_critical_path,
       a.rank AS rank
"""
_NODES = """
MATCH (n:{label}) WHERE {where}
RETURN n.id AS id, n.name AS name, n.ts AS ts, n.dur AS dur, n.tid AS tid
"""
DESCRIBED = ("label", "name", "ts", "dur", "tid")


class DiffError(TracegraphError):
    """Edge sets that cannot be compared (unknown name, different runs)."""


@dataclass(frozen=True)
class EdgeSetDiff:
    run: str
    a: str
    b: str
    counts: pa.Table  # rank, type, only_a, only_b, both, weight_changed, critical_changed
    path_lengths: pa.Table  # rank, a_ns, b_ns, a_status, b_status
    edges: pa.Table  # one row per differing edge, with `change` and `reason`


def edge_set_runs(store: GraphStore, name: str) -> list[str]:
    rows = store.run("MATCH (e:EdgeSet) WHERE e.name = $name RETURN e.run AS run", {"name": name})
    return rows.table["run"].to_pylist()


def edge_set_window(store: GraphStore, name: str, run: str) -> dict[str, object]:
    """The edge set's window as its EdgeSet node records it (`window` JSON, else the window
    fields of `options`); {} when neither says."""
    rows = store.run(
        "MATCH (e:EdgeSet) WHERE e.name = $name AND e.run = $run "
        "RETURN e.window AS window, e.options AS options",
        {"name": name, "run": run},
    ).table.to_pylist()
    for field in ("window", "options"):
        for row in rows:
            try:
                parsed = json.loads(row[field] or "{}")
            except json.JSONDecodeError:
                continue
            if isinstance(parsed, dict) and set(parsed) & set(WINDOW_FIELDS):
                return parsed
    return {}


WINDOW_FIELDS = ("annotation", "instance", "all_steps", "whole_trace")


def window_label(window: dict[str, object]) -> str:
    """`every ProfilerStep`, `whole trace`, or the annotation's instance (`ProfilerStep[1]`);
    `unknown window` where the record says none of these."""
    if not set(window) & set(WINDOW_FIELDS):
        return "unknown window"
    if window.get("all_steps") is True:
        return "every ProfilerStep"
    annotation = window.get("annotation")
    if window.get("whole_trace") is True or not annotation:
        return "whole trace"
    instance = window.get("instance")
    return f"{annotation}[{instance if instance is not None else 0}]"


def window_warning(store: GraphStore, a: str, b: str, run: str) -> str | None:
    """`A covers X, B covers Y: differences include the window` when the two edge sets were
    built over different windows (None when the windows match or one is not recorded)."""
    labels = [window_label(edge_set_window(store, name, run)) for name in (a, b)]
    if "unknown window" in labels or labels[0] == labels[1]:
        return None

    def covers(label: str) -> str:
        return "the whole trace" if label == "whole trace" else label

    return (
        f"{a} covers {covers(labels[0])}, {b} covers {covers(labels[1])}: "
        "differences include the window"
    )


def diff_edge_sets(
    store: GraphStore,
    a: str,
    b: str,
    run: str | None = None,
    edge_type: str | None = None,
    rank: int | None = None,
) -> EdgeSetDiff:
    """Compare edge sets `a` and `b` of one run (the only run holding both, unless named)."""
    run = _common_run(store, a, b, run)
    _, run_idx = resolve_run(store, run)
    kept, sets = _archive_of(store, run, run_idx)
    left = _edges(store, a, run_idx, edge_type, rank, (kept, sets.get(a)))
    right = _edges(store, b, run_idx, edge_type, rank, (kept, sets.get(b)))
    joined = _outer_join(left, right)
    edges = _differing(joined, lambda rows: _described(store, run_idx, rank, rows, kept))
    return EdgeSetDiff(run, a, b, _counts(joined), _path_lengths(store, a, b, run, rank), edges)


def _common_run(store: GraphStore, a: str, b: str, run: str | None) -> str:
    runs_a, runs_b = set(edge_set_runs(store, a)), set(edge_set_runs(store, b))
    for name, runs in ((a, runs_a), (b, runs_b)):
        if not runs:
            raise DiffError(f"{store.path}: no edge set '{name}'")
    common = sorted(runs_a & runs_b)
    if run is not None:
        resolve_run(store, run)  # a run the database does not hold: said as everywhere
        if run not in common:
            raise DiffError(f"run '{run}' does not hold both '{a}' and '{b}' (it is in {common})")
        return run
    if len(common) != 1:
        raise DiffError(f"'{a}' and '{b}' are both in runs {common}: choose one with --run")
    return common[0]


def _edges(
    store: GraphStore,
    name: str,
    run_idx: int,
    edge_type: str | None,
    rank: int | None,
    copy: tuple[RunArchive | None, copies.SetCopy | None] = (None, None),
) -> pa.Table:
    """The set's edges: from its Parquet copy in the run archive where it has one (`copies`),
    else from the database."""
    kept, set_copy = copy
    if set_copy is not None:
        table = copies.read_copy(kept, set_copy, edge_type, rank)
        if table is not None:
            return table
    params: dict[str, object] = {"edge_set": name}
    filters = ""
    if edge_type is not None:
        filters += "AND d.type = $edge_type "
        params["edge_type"] = edge_type
    where = id_filter("a", run_idx, rank)  # literal bounds: Kuzu prunes the scan by them
    return store.run(_EDGES.format(where=where, filters=filters), params).table


def _described(
    store: GraphStore,
    run_idx: int,
    rank: int | None,
    rows: pa.Table,
    kept: RunArchive | None = None,
) -> pa.Table:
    """`rows` with each endpoint's label, name, start, duration and thread (read from the run
    archive's events where it holds every endpoint, else from the database)."""
    nodes = _archived_nodes(kept, run_idx, rows) if kept is not None else None
    if nodes is None:
        # a cross-rank edge of rank `rank` ends on another rank: then every rank's nodes
        only = rank if set(np.unique(schema.key_rank(_ends(rows))).tolist()) <= {rank} else None
        nodes = _database_nodes(store, run_idx, only)
    ids = nodes["id"].to_numpy()
    # names as dictionaries: each differing edge takes two indices, not two copies of a name
    values = {
        c: pc.dictionary_encode(nodes[c]) if pa.types.is_string(nodes[c].type) else nodes[c]
        for c in DESCRIBED
    }
    for end in ("src", "dst"):
        wanted = rows[end].to_numpy()
        at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))
        found = ids[at] == wanted if len(ids) else np.zeros(len(wanted), bool)
        index = pa.array(at, mask=~found)  # an end that is no node: null
        for column in DESCRIBED:
            kind = values[column].type
            taken = values[column].take(index) if len(ids) else pa.nulls(len(wanted), kind)
            rows = rows.append_column(f"{end}_{column}", taken)
    return rows


def _database_nodes(store: GraphStore, run_idx: int, rank: int | None) -> pa.Table:
    parts = []
    for label in ("Op", "Runtime", "Kernel"):
        table = store.run(_NODES.format(label=label, where=id_filter("n", run_idx, rank))).table
        # typed: a label without rows (a CPU-only run's Kernel) gave a null column, which
        # then did not concatenate with the others'
        parts.append(table.append_column("label", pa.array([label] * table.num_rows, pa.string())))
    return pa.concat_tables(parts).sort_by("id")


def _archived_nodes(kept: RunArchive, run_idx: int, rows: pa.Table) -> pa.Table | None:
    """The events of the ranks `rows` touch, from the run archive, sorted by id; None where a
    rank's rows are not there or an endpoint is not among them."""
    ends = _ends(rows)
    parts = []
    for rank in np.unique(schema.key_rank(ends)).tolist():
        events = archive.read_rank(kept, rank, columns=["ev_idx", *DESCRIBED])
        if events is None:
            return None
        events = events.filter(pc.is_in(events["label"], pa.array(list(schema.EVENT_LABELS))))
        ids = schema.event_key(run_idx, pa.repeat(pa.scalar(rank, pa.int64()), events.num_rows),
                               events["ev_idx"])  # fmt: skip
        parts.append(events.select(list(DESCRIBED)).append_column("id", ids))
    if not parts:
        return _no_nodes()
    nodes = pa.concat_tables(parts)
    known = nodes["id"].to_numpy()
    if len(known) > 1 and not np.all(known[1:] > known[:-1]):  # ranks in order, events in order
        nodes = nodes.sort_by("id")
        known = nodes["id"].to_numpy()
    at = np.minimum(np.searchsorted(known, ends), max(len(known) - 1, 0))
    if not len(known) or not np.array_equal(known[at], ends):
        return None
    return nodes


def _ends(rows: pa.Table) -> np.ndarray:
    """The keys of the edges' sources, then of their destinations."""
    return np.concatenate([rows["src"].to_numpy(), rows["dst"].to_numpy()])


def _archive_of(
    store: GraphStore, run: str, run_idx: int
) -> tuple[RunArchive | None, dict[str, copies.SetCopy]]:
    """The run's archive (the sets' copies, the events) and each set's copy."""
    return archive.run_archive(store.path, store, run_idx), edge_set_copies(store, run, run_idx)


def _no_nodes() -> pa.Table:
    return pa.table({c: pa.array([], pa.string()) for c in ("label", "name")} | {
        "ts": pa.array([], pa.int64()), "dur": pa.array([], pa.int64()),
        "tid": pa.array([], pa.int64()), "id": pa.array([], pa.int64())})  # fmt: skip


def _outer_join(left: pa.Table, right: pa.Table) -> pa.Table:
    """One row per edge in either set: descriptive columns, a_/b_ flags, in_a, in_b (one
    hash join; the descriptive columns from whichever side has the edge)."""
    flags = ["weight_ns", "on_critical_path"]
    described = [c for c in left.column_names if c not in KEY and c not in flags]
    sides = []
    for side, table in (("a", left), ("b", right)):
        names = KEY + [f"{side}:{c}" for c in described] + [f"{side}_{f}" for f in flags]
        marked = table.select(KEY + described + flags).rename_columns(names)
        sides.append(marked.append_column(f"in_{side}", pa.array(np.ones(table.num_rows, bool))))
    joined = sides[0].join(sides[1], KEY, join_type="full outer", coalesce_keys=True)
    for column in described:
        value = pc.coalesce(joined[f"a:{column}"], joined[f"b:{column}"])
        joined = joined.drop_columns([f"a:{column}", f"b:{column}"]).append_column(column, value)
    for column in ("in_a", "in_b"):
        joined = joined.set_column(
            joined.column_names.index(column), column, pc.fill_null(joined[column], False)
        )
    return joined


def _differing(joined: pa.Table, describe: Callable[[pa.Table], pa.Table]) -> pa.Table:
    in_a, in_b = joined["in_a"], joined["in_b"]
    both = pc.and_(in_a, in_b)
    crit_changed = pc.and_(
        both, pc.not_equal(joined["a_on_critical_path"], joined["b_on_critical_path"])
    )
    weight_changed = pc.and_(both, pc.not_equal(joined["a_weight_ns"], joined["b_weight_ns"]))
    change = pc.case_when(
        pc.make_struct(pc.invert(in_b), pc.invert(in_a), weight_changed, crit_changed),
        *CHANGES,
    )
    rows = describe(joined.append_column("change", change).filter(pc.is_valid(change)))
    rows = rows.append_column("reason", _reasons(rows))
    # structural changes first, then flags that moved with the path
    priority = pc.index_in(rows["change"], pa.array(CHANGES))
    rows = rows.append_column("priority", priority)
    order = [
        ("priority", "ascending"),
        ("rank", "ascending"),
        ("src_ts", "ascending"),
        ("dst_ts", "ascending"),
        *((column, "ascending") for column in KEY),  # ties: one order whatever the read order
    ]
    return rows.sort_by(order).drop_columns(["priority"])


def _reasons(rows: pa.Table) -> pa.Array:
    """Why each edge differs, where the data shows it (array passes; text only where needed)."""
    change_is = {c: _is_in(rows["change"], [c]) for c in CHANGES}
    structural = change_is["only in A"] | change_is["only in B"]
    kernel_gap = structural & _is_in(rows["type"], ["kernel_kernel_delay"])
    both_runtime = _is_in(rows["src_label"], ["Runtime"]) & _is_in(rows["dst_label"], ["Runtime"])
    lock_call = _is_in(rows["src_name"], RUNTIME_LOCK_CALLS) | _is_in(
        rows["dst_name"], RUNTIME_LOCK_CALLS
    )
    runtime_lock = both_runtime & lock_call
    on_gpu = _is_in(rows["src_label"], ["Kernel"]) | _is_in(rows["dst_label"], ["Kernel"])
    other_thread = pc.fill_null(pc.not_equal(rows["src_tid"], rows["dst_tid"]), False)
    cross_thread = other_thread.to_numpy(zero_copy_only=False) & ~on_gpu
    texts = [
        "",
        "runtime call span weighted in full (CUDA runtime-lock pass)",
        "edge between CUDA runtime calls (CUDA runtime-lock pass)",
        "crosses threads (backward-thread merge)",
        "same edge; the critical path moved",
    ]
    conditions = [
        runtime_lock & change_is["weight changed"],
        runtime_lock,
        cross_thread,
        change_is["critical path changed"],
    ]
    codes = np.select(conditions, [1, 2, 3, 4], default=0).astype(np.int32)
    codes[kernel_gap] = 0
    gaps = np.flatnonzero(kernel_gap)
    if gaps.size:
        src_end = pc.add(rows["src_ts"], pc.fill_null(rows["src_dur"], 0)).to_numpy()
        gap_ns = rows["dst_ts"].to_numpy() - src_end
        for i in gaps:  # few: only the kernel→kernel edges one version has and the other lacks
            side = "≥" if gap_ns[i] >= KERNEL_GAP_CUTOFF_NS else "<"
            codes[i] = len(texts)
            texts.append(f"kernel→kernel gap {gap_ns[i] / 1e6:.2f} ms {side} 1.5 ms")
    return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(texts, pa.string()))


def _is_in(column: pa.ChunkedArray, values: Sequence[str]) -> np.ndarray:
    """Which rows of a string column hold one of `values` (null: no); a dictionary column is
    tested on its dictionary, not row by row."""
    wanted = pa.array(list(values), pa.string())
    parts = []
    for chunk in column.chunks:
        if pa.types.is_null(chunk.type):  # no node was found for any of them
            found = np.zeros(len(chunk), bool)
        elif pa.types.is_dictionary(chunk.type):
            hit = pc.is_in(chunk.dictionary, wanted).to_numpy(zero_copy_only=False)
            codes = pc.fill_null(chunk.indices, 0).to_numpy()
            found = hit[codes] if len(hit) else np.zeros(len(chunk), bool)
        else:
            found = pc.fill_null(pc.is_in(chunk, wanted), False).to_numpy(zero_copy_only=False)
        parts.append(found & chunk.is_valid().to_numpy(zero_copy_only=False))
    return np.concatenate(parts) if parts else np.zeros(0, bool)


def _counts(joined: pa.Table) -> pa.Table:
    in_a, in_b = joined["in_a"], joined["in_b"]
    both = pc.and_(in_a, in_b)
    crit = pc.and_(both, pc.not_equal(joined["a_on_critical_path"], joined["b_on_critical_path"]))
    weight = pc.and_(both, pc.not_equal(joined["a_weight_ns"], joined["b_weight_ns"]))
    frame = pa.table(
        {
            "rank": joined["rank"],
            "type": joined["type"],
            "only_a": pc.cast(pc.and_(in_a, pc.invert(in_b)), pa.int64()),
            "only_b": pc.cast(pc.and_(in_b, pc.invert(in_a)), pa.int64()),
            "both": pc.cast(both, pa.int64()),
            "weight_changed": pc.cast(pc.fill_null(weight, False), pa.int64()),
            "critical_changed": pc.cast(pc.fill_null(crit, False), pa.int64()),
        }
    )
    counted = ("only_a", "only_b", "both", "weight_changed", "critical_changed")
    sums = frame.group_by(["rank", "type"]).aggregate([(c, "sum") for c in counted])
    sums = sums.rename_columns(["rank", "type", *counted])
    return sums.sort_by([("rank", "ascending"), ("type", "ascending")])


def _path_lengths(store: GraphStore, a: str, b: str, run: str, rank: int | None) -> pa.Table:
    rows = []
    per_set = {name: rank_outcomes(store, name, run) for name in (a, b)}
    for r in sorted(set(per_set[a]) | set(per_set[b])):
        if rank is not None and r != rank:
            continue
        ra, rb = per_set[a].get(r), per_set[b].get(r)
        rows.append(
            {
                "rank": r,
                "a_ns": ra.path_length_ns if ra else None,
                "b_ns": rb.path_length_ns if rb else None,
                "a_status": ra.status if ra else None,
                "b_status": rb.status if rb else None,
            }
        )
    schema = pa.schema(
        [
            ("rank", pa.int64()),
            ("a_ns", pa.int64()),
            ("b_ns", pa.int64()),
            ("a_status", pa.string()),
            ("b_status", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def chakra_view(store: GraphStore, run: str, edge_sets: list[str]) -> pa.Table:
    """Per rank and edge set: sync edges in the whole graph vs on the critical path (from the
    sets' Parquet copies where each has one)."""
    _, run_idx = resolve_run(store, run)
    kept, sets = _archive_of(store, run, run_idx)
    parts = []
    for name in dict.fromkeys(edge_sets):  # a set compared with itself: its rows once
        set_copy = sets.get(name)
        syncs = copies.read_copy(kept, set_copy, "sync_dependency") if set_copy else None
        if syncs is None:
            return _chakra_view_from_database(store, run, edge_sets)
        flag = pc.cast(syncs["on_critical_path"], pa.int64())
        counted = (
            pa.table({"rank": syncs["rank"], "flag": flag})
            .group_by("rank")
            .aggregate([("rank", "count"), ("flag", "sum")])
        )
        parts.append(
            pa.table(
                {
                    "edge_set": pa.array([name] * counted.num_rows, pa.string()),
                    "rank": counted["rank"],
                    "sync_edges": counted["rank_count"],
                    "on_critical_path": counted["flag_sum"],
                }
            )
        )
    result = pa.concat_tables(parts) if parts else _chakra_view_from_database(store, run, [])
    return result.sort_by([("rank", "ascending"), ("edge_set", "ascending")])


def _chakra_view_from_database(store: GraphStore, run: str, edge_sets: list[str]) -> pa.Table:
    result = store.run(
        # `= true` spelled out: a bare boolean in CASE groups wrongly in Kuzu 0.11.3
        "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel) "
        "WHERE a.run = $run AND d.type = 'sync_dependency' "
        "RETURN d.edge_set AS edge_set, a.rank AS rank, count(*) AS sync_edges, "
        "sum(CASE WHEN d.on_critical_path = true THEN 1 ELSE 0 END) AS on_critical_path",
        {"run": run},
    ).table
    keep = result.filter(pc.is_in(result["edge_set"], pa.array(edge_sets, pa.string())))
    on_path = pc.cast(keep["on_critical_path"], pa.int64())  # Kuzu sums to an INT128
    keep = keep.set_column(keep.column_names.index("on_critical_path"), "on_critical_path", on_path)
    return keep.sort_by([("rank", "ascending"), ("edge_set", "ascending")])
