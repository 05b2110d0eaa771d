"""Every canned query, checked value by value against the raw trace JSON.

The expected rows are computed here in plain Python from the trace files, read with the suite's
independent reader (tests/ingest/oracle.py, which does not import tracegraph): names, categories,
timestamps and durations by `ev_idx` (the event's position in `traceEvents`), collectives matched
from the kernel names / `gloo:` ranges, ProfilerSteps from the annotations, parents from a plain
stack walk. Queries over edge sets (`critical-path*`, `sync-edges`) start from the DEP rows of the
native builder's edge sets, read back with labelled endpoints, and take everything else from the
JSON; a path is also checked to be a chain and, where the edge set has one window per rank, to be
as long as networkx's longest path through the rank's DEP graph. `sync-waits` starts from the SYNCS
pairs, checked against the `cuda_sync` event each came from (and against HTA's own sync edges on its
two test traces).

Rows are compared in full: integers and strings exactly, floats to 1e-6 relative, in the query's
order, and a LIMIT is checked not to cut through a tie.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from tracegraph.ingest.store import GraphStore
from tracegraph.queries.catalog import canned_queries

from ..conftest import TRACES
from ..ingest.oracle import (
    Event,
    TraceFacts,
    calls_reference,
    end,
    load_json,
    trace_events,
    trace_facts,
)
from ..ingest.test_syncs import EVENT_SYNC, HTA_SYNC_EDGES, MULTI_STREAM
from .conftest import CANNED_HTA_050, CANNED_NATIVE_ALL_STEPS, CANNED_RUNS, CannedDb

HTA = "native:hta-0.5.0"
NATIVE = "native"
CROSS = "native:cross-rank"
Row = dict[str, Any]

# Each canned query and the parameters it is checked with (at least two runs each).
CASES: dict[str, list[dict[str, Any]]] = {
    "top-kernels": [
        {"run": "syn", "rank": 2},
        {"run": "control", "rank": 3},
        {"run": "tf", "rank": 1},
        {"run": "alexnet", "rank": 0},
        {"run": "resnet", "rank": 0},
    ],
    "launch-latency": [
        {"run": "syn", "rank": 2},
        {"run": "control", "rank": 3},
        {"run": "tf", "rank": 0},
        {"run": "alexnet", "rank": 0},
    ],
    "step-times": [
        {"run": "syn"},
        {"run": "control"},
        {"run": "ddp"},
        {"run": "tf"},
        {"run": "resnet"},
    ],
    "collective-skew": [{"run": "syn"}, {"run": "ddp"}, {"run": "tf"}, {"run": "control"}],
    "sync-waits": [
        {"run": "syn", "rank": 2},
        {"run": "multi", "rank": 0},
        {"run": "evsync", "rank": 0},
        {"run": "alexnet", "rank": 0},
        {"run": "control", "rank": 3},
    ],
    "sync-edges": [
        {"run": "syn", "edge_set": HTA},
        {"run": "alexnet", "edge_set": HTA},
        {"run": "evsync", "edge_set": HTA},
        {"run": "multi", "edge_set": HTA},
        {"run": "control", "edge_set": NATIVE},
    ],
    "critical-path": [
        {"run": "syn", "rank": 2, "edge_set": HTA},
        {"run": "syn", "rank": 1, "edge_set": NATIVE},
        {"run": "syn", "rank": 2, "edge_set": CROSS},
        {"run": "evsync", "rank": 0, "edge_set": HTA},
        {"run": "alexnet", "rank": 0, "edge_set": HTA},
        {"run": "tf", "rank": 1, "edge_set": HTA},
        {"run": "ddp", "rank": 0, "edge_set": NATIVE},
        {"run": "ddp", "rank": 1, "edge_set": CROSS},
    ],
    "critical-path-by-type": [
        {"run": "syn", "rank": 2, "edge_set": HTA},
        {"run": "alexnet", "rank": 0, "edge_set": HTA},
        {"run": "tf", "rank": 0, "edge_set": HTA},
        {"run": "control", "rank": 3, "edge_set": HTA},
        {"run": "ddp", "rank": 1, "edge_set": NATIVE},
    ],
    "critical-path-by-op": [
        {"run": "syn", "rank": 2, "edge_set": HTA},
        {"run": "alexnet", "rank": 0, "edge_set": HTA},
        {"run": "evsync", "rank": 0, "edge_set": HTA},
        {"run": "tf", "rank": 1, "edge_set": HTA},
        {"run": "control", "rank": 3, "edge_set": NATIVE},
    ],
    "critical-path-frequent": [
        {"run": "syn", "edge_set": HTA},
        {"run": "syn", "edge_set": NATIVE},
        {"run": "tf", "edge_set": HTA},
        {"run": "tf", "edge_set": NATIVE},
        {"run": "ddp", "edge_set": NATIVE},
        {"run": "control", "edge_set": HTA},
    ],
}
PARAMETERS = [
    pytest.param(name, params, id=f"{name}-" + "-".join(str(v) for v in params.values()))
    for name, cases in CASES.items()
    for params in cases
]


# ---------------------------------------------------------------------------------------------
# The raw traces


@cache
def facts(path: Path) -> TraceFacts:
    return trace_facts(path)


@cache
def raw_events(path: Path) -> list[dict[str, Any]]:
    """The file's traceEvents as `json` reads them (floats as Decimal)."""
    return trace_events(load_json(path))


def rank_of(path: Path) -> int:
    rank = facts(path).distributed_rank
    return int(rank) if rank is not None else 0


class Run:
    """A run's trace files by rank, and their node events by ev_idx."""

    def __init__(self, files: Iterable[Path]) -> None:
        self.files = {rank_of(p): p for p in files}
        self.nodes = {
            rank: {e.ev_idx: e for e in facts(path).events()} for rank, path in self.files.items()
        }

    def node(self, rank: int, ev_idx: int) -> Event:
        return self.nodes[rank][ev_idx]

    def events(self, rank: int, label: str) -> list[Event]:
        return [e for e in self.nodes[rank].values() if e.label == label]

    @cache  # noqa: B019 (a handful of runs per session)
    def parents(self, rank: int) -> dict[int, int]:
        """child ev_idx -> parent ev_idx, by a stack walk per thread (oracle.calls_reference)."""
        return {child: parent for parent, child in calls_reference(list(self.nodes[rank].values()))}


@pytest.fixture(scope="module")
def runs(canned_db: CannedDb) -> dict[str, Run]:
    return {name: Run(files) for name, files in canned_db.runs.items()}


# ---------------------------------------------------------------------------------------------
# Comparing


def canned(store: GraphStore, name: str, params: dict[str, Any]) -> list[Row]:
    query = canned_queries()[name]
    result = store.run(query.cypher, params)
    assert result.columns == query.columns, name
    return result.table.to_pylist()


def _canonical(row: Row) -> tuple:
    return tuple(
        (k, round(v, 6 - int(math.floor(math.log10(abs(v))))) if v else 0.0)
        if isinstance(v, float)
        else (k, repr(v))
        for k, v in sorted(row.items())
    )


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)
    return a == b and type(a) is type(b)


def assert_rows(
    got: list[Row],
    want: list[Row],
    order: Callable[[Row], tuple],
    limit: int | None = None,
) -> None:
    """`got` holds the rows of `want` (every column, floats to 1e-6), sorted by `order`; with a
    limit, the first `limit` of them, and the limit does not cut through a tie of `order`."""
    want = sorted(want, key=order)
    if limit is not None and len(want) > limit:
        assert order(want[limit - 1]) != order(want[limit]), "LIMIT cuts through a tie"
        want = want[:limit]
    assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
    for g, w in zip(sorted(got, key=_canonical), sorted(want, key=_canonical), strict=True):
        assert set(g) == set(w)
        bad = {k: (g[k], w[k]) for k in g if not _same_value(g[k], w[k])}
        assert not bad, f"row {w}: (got, expected) {bad}"
    keys = [order(r) for r in got]
    assert keys == sorted(keys), "rows out of order"


def by(*keys: str, desc: Iterable[str] = ()) -> Callable[[Row], tuple]:
    """A sort key on columns; `desc` ones descending (numbers only)."""
    down = set(desc)
    return lambda r: tuple(-r[k] if k in down else r[k] for k in keys)


def ns_to_us(ns: int | None) -> float | None:
    return None if ns is None else ns / 1000


# ---------------------------------------------------------------------------------------------
# Oracles of the queries over the nodes


def top_kernels(run: Run, rank: int) -> list[Row]:
    groups: dict[tuple[str, str], list[int | None]] = defaultdict(list)
    for k in run.events(rank, "Kernel"):
        groups[(k.name, k.cat)].append(k.dur)
    rows = []
    for (name, cat), durs in groups.items():
        known = [d for d in durs if d is not None]
        rows.append(
            {
                "name": name,
                "cat": cat,
                "count": len(durs),
                "total_us": sum(known) / 1000 if known else None,
                "mean_us": sum(known) / len(known) / 1000 if known else None,
                "max_us": max(known) / 1000 if known else None,
            }
        )
    return rows


def launch_latency(run: Run, rank: int) -> list[Row]:
    calls: dict[Any, list[Event]] = defaultdict(list)
    for r in run.events(rank, "Runtime"):
        if r.correlation is not None:
            calls[r.correlation].append(r)
    delays: dict[str, list[int]] = defaultdict(list)
    for k in run.events(rank, "Kernel"):
        if k.correlation in calls:
            (call,) = calls[k.correlation]  # one launching call per correlation in these traces
            delays[call.name].append(k.ts - call.ts)
    return [
        {
            "call": name,
            "launches": len(d),
            "mean_delay_us": sum(d) / len(d) / 1000,
            "max_delay_us": max(d) / 1000,
        }
        for name, d in delays.items()
    ]


STEP = re.compile(r"ProfilerStep#([0-9]+)")


def step_times(run: Run) -> list[Row]:
    """ProfilerStep#N ranges (annotations; in the 2021 format, Operator events), with N."""
    rows = []
    for rank in run.nodes:
        for e in run.events(rank, "Op"):
            match = STEP.fullmatch(e.name) if isinstance(e.name, str) else None
            if match and e.cat in ("user_annotation", "Operator"):
                rows.append(
                    {
                        "rank": rank,
                        "step": e.name,
                        "start_ns": e.ts,
                        "dur_us": ns_to_us(e.dur),
                        "_n": int(match.group(1)),
                    }
                )
    return rows


NCCL_OP = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)


def collective_skew(run: Run) -> list[Row]:
    """Collective instances matched from the JSON: by (group, args.Seq) where the trace has it,
    else the k-th (by start) of each operation and group on each rank."""
    members: dict[tuple, list[tuple[int, int]]] = defaultdict(list)  # key -> [(ts, rank)]
    for rank, path in run.files.items():
        events = raw_events(path)
        ordered: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        for e in run.nodes[rank].values():
            name = e.name if isinstance(e.name, str) else ""
            if e.label == "Kernel" and name.lower().startswith(("nccl", "rccl")):
                match = NCCL_OP.match(name)
                op = match.group(1) if match else name
            elif e.label == "Op" and name.startswith("gloo:"):
                op = name.removeprefix("gloo:")
            else:
                continue
            args = events[e.ev_idx].get("args") or {}
            op = str(args.get("Collective name", op)).replace("_", "").lower()
            group = str(args.get("Process Group Name", "default"))
            if "Seq" in args:
                members[(op, group, int(args["Seq"]))].append((e.ts, rank))
            else:
                ordered[(op, group)].append((e.ts, e.ev_idx))
        for (op, group), starts in ordered.items():
            for k, (ts, _) in enumerate(sorted(starts)):
                members[(op, group, k)].append((ts, rank))
    rows = []
    for (op, group, seq), parts in members.items():
        first, last = min(parts), max(parts)
        rows.append(
            {
                "collective": op,
                "process_group": group,
                "seq": seq,
                "participants": len(parts),
                "skew_us": (last[0] - first[0]) / 1000,
                "last_rank": last[1],
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# SYNCS and DEP rows, read back with labelled endpoints

SYNCS = """
MATCH (k:Kernel)-[s:SYNCS]->(w:Runtime:Kernel)
WHERE k.run = $run AND k.rank = $rank
RETURN k.ev_idx AS src, w.ev_idx AS dst, label(w) AS dst_label, s.sync_type AS sync_type,
       s.source AS source, s.sync_ev_idx AS sync_ev_idx
"""
DEP = """
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run
RETURN a.rank AS rank, a.ev_idx AS src, d.src_boundary AS src_boundary, b.rank AS dst_rank,
       b.ev_idx AS dst, d.dst_boundary AS dst_boundary, d.type AS type, d.weight_ns AS weight_ns,
       d.on_critical_path AS on_path, d.path_order AS path_order
"""
INFERRED = {
    "cudaStreamSynchronize": "Stream Sync",
    "cudaDeviceSynchronize": "Context Sync",
    "cudaEventSynchronize": "Event Sync",
    "cudaEventQuery": "Event Sync",  # as HTA takes it
}


def sync_kind(run: Run, rank: int, edge: Row) -> str:
    """The sync type the JSON gives the edge's source event (a cuda_sync event, or for inferred
    edges the runtime sync call itself), checking the edge against that event."""
    events = raw_events(run.files[rank])
    if edge["source"] == "inferred":
        call = run.node(rank, edge["sync_ev_idx"])
        assert edge["dst"] == call.ev_idx
        # "?": the runtime calls could not tell which work it waited for (a guess, marked);
        # whether the guess is right is held against cuda_sync events in test_inferred_syncs
        return INFERRED[call.name] + ("?" if edge["sync_type"].endswith("?") else "")
    sync = events[edge["sync_ev_idx"]]
    assert sync["cat"] == "cuda_sync" and sync["ph"] == "X"
    kind = sync["args"]["cuda_sync_kind"]
    waiter = run.node(rank, edge["dst"])
    if kind != "Stream Wait Event":  # the waiting call has the sync event's correlation
        assert waiter.label == "Runtime" and waiter.correlation == sync["args"]["correlation"]
    assert run.node(rank, edge["src"]).label == "Kernel"
    return kind


def sync_waits(run: Run, rank: int, edges: list[Row]) -> list[Row]:
    rows = []
    for edge in edges:
        waiter, waited = run.node(rank, edge["dst"]), run.node(rank, edge["src"])
        assert waiter.label == edge["dst_label"]
        rows.append(
            {
                "sync_type": sync_kind(run, rank, edge),
                "waiter": waiter.name,
                "waiter_ts_ns": waiter.ts,
                "waited_for": waited.name,
                "waited_for_end_ns": end(waited),
                "wait_us": ns_to_us(waiter.dur) if waiter.label == "Runtime" else None,
            }
        )
    return rows


def sync_edges(run: Run, dep: list[Row]) -> list[Row]:
    rows = []
    for d in dep:
        if d["type"] != "sync_dependency":
            continue
        a, b = run.node(d["rank"], d["src"]), run.node(d["dst_rank"], d["dst"])
        rows.append(
            {
                "rank": d["rank"],
                "on_critical_path": d["on_path"],
                "waited_for": a.name,
                "waiter": b.name,
                "waiter_kind": b.label,
                "dst_boundary": d["dst_boundary"],
                "src_end_ns": end(a),
                "dst_ts_ns": b.ts,
            }
        )
    return rows


def on_path(dep: list[Row], rank: int | None = None) -> list[Row]:
    """The rank's path edges (every rank's without one), in path order."""
    path = [d for d in dep if d["path_order"] >= 0 and rank in (None, d["rank"])]
    return sorted(path, key=lambda d: (d["rank"], d["path_order"]))


def critical_path(run: Run, path: list[Row]) -> list[Row]:
    total = sum(d["weight_ns"] for d in path)
    return [
        {
            "position": d["path_order"],
            "edge_type": d["type"],
            "src": run.node(d["rank"], d["src"]).name,
            "src_boundary": d["src_boundary"],
            "dst": run.node(d["dst_rank"], d["dst"]).name,
            "dst_boundary": d["dst_boundary"],
            "weight_us": d["weight_ns"] / 1000,
            "share_pct": 100 * d["weight_ns"] / total if total > 0 else 0.0,
            "src_ev_idx": d["src"],
            "dst_ev_idx": d["dst"],
        }
        for d in path
    ]


def by_type(path: list[Row]) -> list[Row]:
    total = sum(d["weight_ns"] for d in path)
    groups: dict[str, list[int]] = defaultdict(list)
    for d in path:
        groups[d["type"]].append(d["weight_ns"])
    return [
        {
            "edge_type": kind,
            "edges": len(w),
            "total_us": sum(w) / 1000,
            "share_pct": 100 * sum(w) / total if total > 0 else 0.0,
        }
        for kind, w in groups.items()
    ]


def owner(run: Run, d: Row) -> tuple[int, int]:
    """(rank, ev_idx) of the event an operator_kernel edge's time belongs to, HTA's rule
    (CPGraph._attribute_edge): start→… the source, end→end the destination (the parent being
    unwound), end→start (a gap between siblings) the source's parent."""
    if d["src_boundary"] == "start":
        return d["rank"], d["src"]
    if d["dst_boundary"] == "end":
        return d["dst_rank"], d["dst"]
    parent = run.parents(d["rank"]).get(d["src"])
    return d["rank"], parent if parent is not None else d["src"]


def attributed(run: Run, path: list[Row]) -> dict[tuple[int, int], int]:
    """(rank, ev_idx) -> path time (ns) attributed to that event."""
    time: dict[tuple[int, int], int] = defaultdict(int)
    for d in path:
        if d["type"] == "operator_kernel":
            time[owner(run, d)] += d["weight_ns"]
    return time


def by_op(run: Run, path: list[Row]) -> list[Row]:
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for (rank, ev), ns in attributed(run, path).items():
        e = run.node(rank, ev)
        groups[(e.label, e.name)].append(ns)
    return [
        {"kind": kind, "name": name, "spans": len(w), "total_us": sum(w) / 1000}
        for (kind, name), w in groups.items()
    ]


def frequent(run: Run, path: list[Row]) -> list[Row]:
    groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for (rank, ev), ns in attributed(run, path).items():
        e = run.node(rank, ev)
        groups[(e.label, e.name)].append((rank, ns))
    return [
        {
            "kind": kind,
            "name": name,
            "times_on_path": len(w),
            "ranks": len({rank for rank, _ in w}),
            "total_us": sum(ns for _, ns in w) / 1000,
        }
        for (kind, name), w in groups.items()
    ]


# ---------------------------------------------------------------------------------------------
# The checks


def test_every_canned_query_is_checked_on_two_runs() -> None:
    assert set(CASES) == set(canned_queries())
    for name, cases in CASES.items():
        assert len({c["run"] for c in cases}) >= 2, name
        for c in cases:
            assert c["run"] in CANNED_RUNS
            assert set(c) == set(canned_queries()[name].params), name


@pytest.mark.parametrize(("name", "params"), PARAMETERS)
def test_canned_query_values(
    canned_store: GraphStore, runs: dict[str, Run], name: str, params: dict[str, Any]
) -> None:
    if params["run"] not in runs:
        pytest.skip(f"real traces not at {TRACES}")
    got = canned(canned_store, name, params)
    assert got, f"{name} returned nothing for {params}"
    run = runs[params["run"]]
    rank = params.get("rank")
    dep = (
        dep_rows(canned_store, run, params["run"], params["edge_set"])
        if "edge_set" in params
        else []
    )
    if name == "top-kernels":
        assert_rows(
            got, top_kernels(run, rank), by("total_us", "name", "cat", desc=["total_us"]), 25
        )
    elif name == "launch-latency":
        assert_rows(got, launch_latency(run, rank), by("launches", "call", desc=["launches"]))
    elif name == "step-times":
        want = step_times(run)
        key = {(r["rank"], r["step"], r["start_ns"]): r.pop("_n") for r in want}
        assert_rows(got, want, lambda r: (key[(r["rank"], r["step"], r["start_ns"])], r["rank"]))
    elif name == "collective-skew":
        order = by("skew_us", "collective", "process_group", "seq", desc=["skew_us"])
        assert_rows(got, collective_skew(run), order, 50)
    elif name == "sync-waits":
        edges = canned_store.run(SYNCS, {"run": params["run"], "rank": rank}).table.to_pylist()
        if params["run"] in ("evsync", "multi"):  # HTA's own sync edges on its test traces
            relative = {"evsync": EVENT_SYNC, "multi": MULTI_STREAM}[params["run"]]
            assert {(e["src"], e["dst"], e["sync_type"]) for e in edges} == HTA_SYNC_EDGES[relative]
        order = by("waiter_ts_ns", "waited_for_end_ns", "sync_type", "waiter", "waited_for")
        assert_rows(got, sync_waits(run, rank, edges), order)
    elif name == "sync-edges":
        order = by("rank", "src_end_ns", "dst_ts_ns", "waited_for", "waiter")
        want = sync_edges(run, dep)
        # what the traces README measured with HTA 0.5.0: sync edges in the graph vs on the path
        measured = {"evsync": (4, 2), "multi": (6, 0)}.get(params["run"])
        if measured and params["edge_set"] == HTA:
            assert (len(want), sum(r["on_critical_path"] for r in want)) == measured
        assert_rows(got, want, order)
    elif name == "critical-path":
        assert_rows(got, critical_path(run, on_path(dep, rank)), by("position"))
    elif name == "critical-path-by-type":
        order = by("total_us", "edge_type", desc=["total_us"])
        assert_rows(got, by_type(on_path(dep, rank)), order)
    elif name == "critical-path-by-op":
        order = by("total_us", "spans", "kind", "name", desc=["total_us", "spans"])
        assert_rows(got, by_op(run, on_path(dep, rank)), order, 30)
    elif name == "critical-path-frequent":
        order = by("times_on_path", "total_us", "kind", "name", desc=["times_on_path", "total_us"])
        want = frequent(run, on_path(dep))
        if params["edge_set"] != HTA:
            assert any(r["ranks"] > 1 for r in want)  # the run's ranks are counted together
        assert_rows(got, want, order, 30)
    else:  # pragma: no cover
        pytest.fail(f"no oracle for {name}")


_DEP_ROWS: dict[tuple[str, str], list[Row]] = {}


def dep_rows(store: GraphStore, run: Run, name: str, edge_set: str) -> list[Row]:
    """The DEP rows of a run's edge set, read once and checked (`check_dep_rows`) once."""
    if (name, edge_set) not in _DEP_ROWS:
        dep = store.run(DEP, {"run": name, "edge_set": edge_set}).table.to_pylist()
        check_dep_rows(run, dep, edge_set)
        _DEP_ROWS[(name, edge_set)] = dep
    return _DEP_ROWS[(name, edge_set)]


def check_dep_rows(run: Run, dep: list[Row], edge_set: str) -> None:
    """What the edge set's rows must agree with, independently of any canned query: the flag and
    the order say the same, each rank's path is one chain per window, a kernel's span weighs its
    JSON duration (under HTA's semantics, for an event not in whole µs, within 2 µs of it; that
    emulation equals HTA itself in tests/ingest/edgesets/test_native.py), and a single-window
    path is as long as networkx's longest path."""
    assert dep, edge_set
    for d in dep:
        assert d["on_path"] == (d["path_order"] >= 0), d
        a = run.node(d["rank"], d["src"])
        if d["src"] == d["dst"] and d["type"] == "operator_kernel" and a.label == "Kernel":
            if edge_set == HTA and (a.ts % 1000 or a.dur % 1000):
                assert abs(d["weight_ns"] - a.dur) < 2000, d  # start up, end down: < 2 µs
            else:
                assert d["weight_ns"] == a.dur, d  # a kernel's span: its duration in the JSON
    ranks = {d["rank"] for d in dep}
    for rank in ranks:
        path = on_path(dep, rank)
        orders = [d["path_order"] for d in path]
        assert len(set(orders)) == len(orders)
        breaks = sum(
            (x["dst_rank"], x["dst"], x["dst_boundary"]) != (y["rank"], y["src"], y["src_boundary"])
            for x, y in zip(path, path[1:], strict=False)
        )
        # HTA's sets have one window per rank, the others one per ProfilerStep (or the trace)
        single_window = edge_set == HTA
        steps = sum(1 for r in step_times(run) if r["rank"] == rank)
        windows = 1 if single_window else max(steps, 1)
        assert breaks <= windows - 1, f"rank {rank}: {breaks + 1} chains in {windows} windows"
        if single_window:
            graph = nx.DiGraph()
            for d in dep:
                if d["rank"] == rank:
                    u = (d["rank"], d["src"], d["src_boundary"])
                    v = (d["dst_rank"], d["dst"], d["dst_boundary"])
                    graph.add_edge(u, v, weight=d["weight_ns"])
            longest = nx.dag_longest_path_length(graph, weight="weight")
            assert sum(d["weight_ns"] for d in path) == longest, f"rank {rank}"


def test_the_edge_sets_are_there(canned_store: GraphStore, canned_db: CannedDb) -> None:
    got = canned_store.run("MATCH (e:EdgeSet) RETURN e.run AS run, e.name AS name").table
    names = {(r["run"], r["name"]) for r in got.to_pylist()}
    here = set(canned_db.runs)  # only the synthetic run where ../shared is absent
    assert here
    assert {(run, HTA) for run in CANNED_HTA_050 if run in here} <= names
    assert {(run, NATIVE) for run in CANNED_NATIVE_ALL_STEPS if run in here} <= names
