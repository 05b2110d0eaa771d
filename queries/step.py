"""One rank's step for the explorer: its window, and the critical path of an edge set inside it.

Critical-path edges are `DEP` edges with `on_critical_path`, ordered by `path_order` (per rank and
edge set). An edge belongs to a step when its source boundary time lies in the step's window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.edgesets.native.report import CROSS_RANK_SUFFIX
from tracegraph.ingest.edgesets.native.segments import Segment
from tracegraph.ingest.store import GraphStore

from .overview import STEP_PREFIX, STEP_SCHEMA, STEP_TABLE, has_table, whole_trace_steps
from .runs import EVENT_LABELS, RunRef, id_filter


@dataclass(frozen=True)
class StepWindow:
    """One rank's step: the annotation event (None for a whole-trace pseudo-step) and its span."""

    run: str
    run_idx: int
    rank: int
    step: int
    name: str
    id: int | None
    ts: int
    dur: int

    @property
    def end(self) -> int:
        return self.ts + self.dur


PATH_SCHEMA = pa.schema(
    [
        ("path_order", pa.int64()),
        ("type", pa.string()),
        ("weight_ns", pa.int64()),
        ("share", pa.float64()),
        ("src_id", pa.int64()),
        ("src_label", pa.string()),
        ("src_name", pa.string()),
        ("src_boundary", pa.string()),
        ("src_time", pa.int64()),
        ("dst_id", pa.int64()),
        ("dst_label", pa.string()),
        ("dst_name", pa.string()),
        ("dst_boundary", pa.string()),
        ("dst_time", pa.int64()),
    ]
)


@dataclass(frozen=True)
class CriticalPath:
    """The critical-path edges of one edge set inside one step, in path order."""

    edge_set: str
    window: StepWindow
    edges: pa.Table  # PATH_SCHEMA

    @property
    def length_ns(self) -> int:
        return int(pc.sum(self.edges["weight_ns"]).as_py() or 0)


def step_windows(store: GraphStore, run: RunRef, rank: int) -> list[StepWindow]:
    """The rank's ProfilerStep windows in step order (one whole-trace window when it has none)."""
    if has_table(store, STEP_TABLE):
        rows = store.run(
            f"MATCH (s:{STEP_TABLE}) WHERE s.run = $run AND s.rank = {int(rank)} "
            "RETURN s.step AS step, s.name AS name, s.id AS id, s.ts AS ts, s.dur AS dur "
            "ORDER BY step",
            {"run": run.name},
        ).table.to_pylist()
        return [
            StepWindow(
                run.name,
                run.run_idx,
                rank,
                r["step"],
                r["name"],
                None if r["step"] < 0 else r["id"],
                r["ts"],
                r["dur"],
            )
            for r in rows
        ]
    table = store.run(
        f"MATCH (s:Op) WHERE {id_filter('s', run.run_idx, rank)} "
        f"AND s.name STARTS WITH '{STEP_PREFIX}' "
        "RETURN s.name AS name, s.id AS id, s.ts AS ts, s.dur AS dur ORDER BY ts"
    ).table
    out = []
    for row in table.to_pylist():
        tail = row["name"][len(STEP_PREFIX) :]
        if tail.isdigit():
            out.append(
                StepWindow(
                    run.name,
                    run.run_idx,
                    rank,
                    int(tail),
                    row["name"],
                    row["id"],
                    row["ts"],
                    row["dur"],
                )
            )
    if out:
        return sorted(out, key=lambda w: w.step)
    whole = whole_trace_steps(store, run).cast(STEP_SCHEMA)
    mine = whole.filter(pc.equal(whole["rank"], rank)).to_pylist()
    return [
        StepWindow(run.name, run.run_idx, rank, r["step"], r["name"], None, r["ts"], r["dur"])
        for r in mine
    ]


def edge_set_names(store: GraphStore, run: str) -> list[str]:
    """Names of the run's edge sets (none when no edge set was built)."""
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run RETURN e.name AS name ORDER BY name", {"run": run}
    ).table
    return table["name"].to_pylist()


_PATH_RETURN = (
    "RETURN d.path_order AS path_order, d.type AS type, d.weight_ns AS weight_ns, "
    "a.id AS src_id, label(a) AS src_label, a.name AS src_name, "
    "d.src_boundary AS src_boundary, "
    "a.ts + CASE WHEN d.src_boundary = 'end' THEN a.dur ELSE 0 END AS src_time, "
    "b.id AS dst_id, label(b) AS dst_label, b.name AS dst_name, "
    "d.dst_boundary AS dst_boundary, "
    "b.ts + CASE WHEN d.dst_boundary = 'end' THEN b.dur ELSE 0 END AS dst_time "
    "ORDER BY path_order"
)


def critical_path(store: GraphStore, window: StepWindow, edge_set: str) -> CriticalPath:
    """Critical-path edges of `edge_set` whose source boundary falls in the step, in path order
    (of a cross-rank set: the step's path across ranks, every rank's edges)."""
    if edge_set.endswith(CROSS_RANK_SUFFIX):
        return _cross_rank_path(store, window, edge_set)
    table = store.run(
        f"MATCH (a:{EVENT_LABELS})-[d:DEP]->(b:{EVENT_LABELS}) "
        f"WHERE {id_filter('a', window.run_idx, window.rank)} AND a.ts < {int(window.end)} "
        "AND d.edge_set = $edge_set AND d.on_critical_path " + _PATH_RETURN,
        {"edge_set": edge_set},
    ).table
    inside = pc.and_(
        pc.greater_equal(table["src_time"], window.ts), pc.less(table["src_time"], window.end)
    )
    table = table.filter(inside)
    dur = window.dur or 1
    share = pc.divide(pc.cast(table["weight_ns"], pa.float64()), float(dur))
    table = table.append_column("share", share)
    return CriticalPath(edge_set, window, table.select(PATH_SCHEMA.names).cast(PATH_SCHEMA))


def _cross_rank_path(store: GraphStore, window: StepWindow, edge_set: str) -> CriticalPath:
    """The step's path across ranks: a cross-rank set stores each step's path edges in order,
    one step after the other (the EdgeSet's `cross_rank` summaries say how many each)."""
    found = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run AND e.name = $name RETURN e.window AS window",
        {"run": window.run, "name": edge_set},
    ).table
    summaries = json.loads(found["window"][0].as_py() or "{}") if found.num_rows else {}
    first, length = 0, 0
    for summary in summaries.get("cross_rank", []):
        if summary["step"] == window.name:
            break
        first += int(summary["edges"])
    else:
        return CriticalPath(edge_set, window, PATH_SCHEMA.empty_table())
    last, length = first + int(summary["edges"]), int(summary["length_ns"])
    table = store.run(
        f"MATCH (a:{EVENT_LABELS})-[d:DEP]->(b:{EVENT_LABELS}) "
        f"WHERE {id_filter('a', window.run_idx, None)} AND d.edge_set = $edge_set "
        f"AND d.path_order >= {first} AND d.path_order < {last} " + _PATH_RETURN,
        {"edge_set": edge_set},
    ).table
    share = pc.divide(pc.cast(table["weight_ns"], pa.float64()), float(length or window.dur or 1))
    table = table.append_column("share", share)
    return CriticalPath(edge_set, window, table.select(PATH_SCHEMA.names).cast(PATH_SCHEMA))


def stored_segments(
    store: GraphStore, run: str, edge_set: str, rank: int, step: str
) -> tuple[Segment, ...]:
    """The segments a native edge set stored for one rank's window of `step` (its own path);
    () for an HTA set, or a set built before segments were kept."""
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run AND e.name = $name RETURN e.window AS window",
        {"run": run, "name": edge_set},
    ).table
    if table.num_rows == 0:
        return ()
    window = json.loads(table["window"][0].as_py() or "{}")
    entries = (window.get("ranks") or {}).get(str(rank)) or []
    for entry in entries:
        label = entry.get("step") or ""
        if isinstance(entry, dict) and (label == step or len(entries) == 1):
            return tuple(Segment.of_json(s) for s in entry.get("segments") or ())
    return ()
