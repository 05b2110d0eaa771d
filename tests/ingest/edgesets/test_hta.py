"""HTA edge sets equal what HTA itself reports (HTA is the oracle; SPEC.md's figures check it)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tracegraph.ingest.edgesets.errors import EdgeSetError
from tracegraph.ingest.edgesets.hta.edge_set import build_hta_edge_set
from tracegraph.ingest.edgesets.records import rank_outcomes
from tracegraph.ingest.errors import UnknownRunError
from tracegraph.ingest.store import GraphStore

from .conftest import ALEXNET, CASES, MERGED, SPECS, EdgeDb, cache_root, needs_traces

pytestmark = needs_traces
EVENTS = "Op:Runtime:Kernel"
OK_CASES = [c for c in CASES if c.run != "cpu_only"]


def _rows(db: EdgeDb, cypher: str, **params: object) -> list[dict]:
    with GraphStore(db.db) as store:
        return store.run(cypher, params).table.to_pylist()


def _edges(db: EdgeDb, run: str, edge_set: str) -> list[dict]:
    return _rows(
        db,
        f"MATCH (a:{EVENTS})-[d:DEP]->(b:{EVENTS}) WHERE a.run = $run AND d.edge_set = $set "
        "RETURN a.rank AS rank, a.ev_idx AS src, d.src_boundary AS sb, b.ev_idx AS dst, "
        "d.dst_boundary AS db, d.type AS type, d.weight_ns AS w, d.on_critical_path AS cp, "
        "d.path_order AS ord, a.name AS src_name, a.ts AS src_ts, b.name AS dst_name, "
        "b.ts AS dst_ts",
        run=run,
        set=edge_set,
    )


def rank_outcomes_of(db: EdgeDb, run: str, edge_set: str) -> dict:
    with GraphStore(db.db, read_only=True) as store:
        return rank_outcomes(store, edge_set, run)


def _edge_set_node(db: EdgeDb, run: str, edge_set: str) -> dict:
    (node,) = _rows(db, "MATCH (e:EdgeSet) WHERE e.id = $id RETURN e.*", id=f"{run}/{edge_set}")
    return {k.removeprefix("e."): v for k, v in node.items()}


@pytest.mark.parametrize("edge_set", SPECS)
@pytest.mark.parametrize("case", OK_CASES, ids=lambda c: c.run)
def test_every_edge_equals_htas_own_graph(edge_db: EdgeDb, case, edge_set: str) -> None:
    """Same endpoints (ev_idx, boundary), type, weight (ns) and critical flag, rank by rank."""
    loaded = Counter(
        (r["rank"], r["src"], r["sb"], r["dst"], r["db"], r["type"], r["w"], r["cp"])
        for r in _edges(edge_db, case.run, edge_set)
    )
    expected: Counter = Counter()
    for rank, answer in edge_db.oracle[edge_set][case.folder].items():
        assert answer["ok"], answer
        expected.update((int(rank), *edge) for edge in answer["edges"])
    assert loaded == expected


@pytest.mark.parametrize("edge_set", SPECS)
@pytest.mark.parametrize("case", OK_CASES, ids=lambda c: c.run)
def test_path_length_and_order_match_hta(edge_db: EdgeDb, case, edge_set: str) -> None:
    """The critical edges form one chain, in path_order, whose weights sum to HTA's length."""
    result = edge_db.results[(case.run, edge_set)]
    edges = _edges(edge_db, case.run, edge_set)
    for status in result.ranks:
        answer = edge_db.oracle[edge_set][case.folder][str(status.rank)]
        assert status.status == "ok" and status.path_length_ns == answer["path_length_ns"]
        path = sorted(
            (r for r in edges if r["rank"] == status.rank and r["cp"]), key=lambda r: r["ord"]
        )
        assert [r["ord"] for r in path] == list(range(len(path)))
        assert all(
            (a["dst"], a["db"]) == (b["src"], b["sb"]) for a, b in zip(path, path[1:], strict=False)
        )
        assert sum(r["w"] for r in path) == status.path_length_ns
        assert all(r["ord"] == -1 for r in edges if r["rank"] == status.rank and not r["cp"])


# SPEC.md §5, measured with HTA itself: (edges by type, on the path by type, path length µs).
SPEC_FIGURES = {
    ("alexnet", "hta-0.5.0"): (
        {
            "operator_kernel": 354,
            "dependency": 23,
            "kernel_launch_delay": 5,
            "kernel_kernel_delay": 34,
            "sync_dependency": 5,
        },
        {
            "operator_kernel": 110,
            "kernel_kernel_delay": 32,
            "dependency": 4,
            "sync_dependency": 1,
            "kernel_launch_delay": 1,
        },
        35834,
    ),
    ("event_sync", "hta-0.5.0"): (
        {"operator_kernel": 38, "dependency": 10, "kernel_launch_delay": 5, "sync_dependency": 4},
        {"operator_kernel": 28, "dependency": 7, "sync_dependency": 2, "kernel_launch_delay": 2},
        2401,
    ),
    ("event_sync", "traceinsight-0.6.1"): (
        {"operator_kernel": 38, "dependency": 10, "kernel_launch_delay": 5, "sync_dependency": 4},
        {"operator_kernel": 30, "dependency": 7, "sync_dependency": 1, "kernel_launch_delay": 1},
        2411,
    ),
    ("multi_stream", "hta-0.5.0"): (
        {
            "operator_kernel": 66,
            "dependency": 5,
            "kernel_launch_delay": 3,
            "kernel_kernel_delay": 2,
            "sync_dependency": 6,
        },
        {
            "operator_kernel": 52,
            "dependency": 4,
            "kernel_launch_delay": 1,
            "kernel_kernel_delay": 1,
        },
        1178,
    ),
}
SPEC_FIGURES[("alexnet", "traceinsight-0.6.1")] = SPEC_FIGURES[("alexnet", "hta-0.5.0")]
SPEC_FIGURES[("multi_stream", "traceinsight-0.6.1")] = SPEC_FIGURES[("multi_stream", "hta-0.5.0")]


@pytest.mark.parametrize("key", SPEC_FIGURES, ids=lambda k: f"{k[0]}-{k[1]}")
def test_counts_and_lengths_match_spec(edge_db: EdgeDb, key: tuple[str, str]) -> None:
    by_type, on_path, length_us = SPEC_FIGURES[key]
    edges = _edges(edge_db, *key)
    assert Counter(r["type"] for r in edges) == by_type
    assert Counter(r["type"] for r in edges if r["cp"]) == on_path
    (status,) = edge_db.results[key].ranks
    assert (status.edges_by_type, status.critical_path_by_type) == (by_type, on_path)
    assert status.path_length_ns == length_us * 1000
    ranks = json.loads(_edge_set_node(edge_db, *key)["ranks"])
    assert ranks["0"]["path_length_ns"] == length_us * 1000


@pytest.mark.parametrize(
    ("edge_set", "on_path"),
    [("hta-0.5.0", {(23, 29), (33, 41)}), ("traceinsight-0.6.1", {(33, 41)})],
)
def test_event_sync_sync_edges_are_spec_ones(edge_db: EdgeDb, edge_set: str, on_path) -> None:
    """Stream Sync 23→29, Event Sync 33→41 and 33→45 (cudaEventQuery), Context Sync 33→51."""
    syncs = [r for r in _edges(edge_db, "event_sync", edge_set) if r["type"] == "sync_dependency"]
    assert {(r["src"], r["sb"], r["dst"], r["db"]) for r in syncs} == {
        (23, "end", 29, "end"),
        (33, "end", 41, "end"),
        (33, "end", 45, "end"),
        (33, "end", 51, "end"),
    }
    assert {(r["src"], r["dst"]) for r in syncs if r["cp"]} == on_path
    assert {r["dst_name"] for r in syncs} == {
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaEventQuery",
        "cudaDeviceSynchronize",
    }


@pytest.mark.parametrize("edge_set", SPECS)
def test_a_cpu_only_run_is_refused_before_hta_runs(edge_db: EdgeDb, edge_set: str) -> None:
    """HTA cannot analyze a CPU-only trace (its own answer, from its environment, is a
    failure): tracegraph says so before building or running anything, and writes nothing."""
    refused = edge_db.results[("cpu_only", edge_set)]
    (answer,) = edge_db.oracle[edge_set]["hta/cpu_only"].values()
    assert not answer["ok"]
    assert isinstance(refused, EdgeSetError)
    assert "run 'cpu_only' has no GPU kernels" in str(refused) and "--native" in str(refused)
    assert _edges(edge_db, "cpu_only", edge_set) == []


@pytest.mark.parametrize("edge_set", SPECS)
def test_merged_file_gives_the_per_rank_files_edges(edge_db: EdgeDb, edge_set: str) -> None:
    """A merged two-rank file is split per rank for HTA and mapped back to its own ev_idx."""

    def content(run: str) -> Counter:
        return Counter(
            (
                r["rank"],
                r["src_name"],
                r["src_ts"],
                r["sb"],
                r["dst_name"],
                r["dst_ts"],
                r["db"],
                r["type"],
                r["w"],
                r["cp"],
            )
            for r in _edges(edge_db, run, edge_set)
        )

    merged = content(MERGED.run)
    assert merged and merged == content("trace_filter")
    ranks = json.loads(_edge_set_node(edge_db, MERGED.run, edge_set)["ranks"])
    assert [r["split_from_merged_file"] for r in ranks.values()] == [True, True]


def test_window_is_the_annotation_instance(edge_db: EdgeDb) -> None:
    (op,) = _rows(
        edge_db,
        "MATCH (o:Op) WHERE o.run = 'alexnet' AND o.name = $name "
        "RETURN o.ts AS ts, o.dur AS dur ORDER BY o.ts SKIP 1 LIMIT 1",
        name=ALEXNET,
    )
    (status,) = edge_db.results[("alexnet", "hta-0.5.0")].ranks
    (window,) = status.windows
    assert (window["start_ns"], window["end_ns"]) == (op["ts"], op["ts"] + op["dur"])
    stored = rank_outcomes_of(edge_db, "alexnet", "hta-0.5.0")[status.rank]
    assert stored == status  # read back as the type it was written as


def test_rebuilding_replaces_only_that_edge_set(edge_db: EdgeDb) -> None:
    def counts() -> dict:
        rows = _rows(
            edge_db,
            f"MATCH (a:{EVENTS})-[d:DEP]->() RETURN a.run AS run, d.edge_set AS s, count(*) AS n",
        )
        sets = _rows(edge_db, "MATCH (e:EdgeSet) RETURN e.id AS id")
        return {
            "edges": {(r["run"], r["s"]): r["n"] for r in rows},
            "sets": sorted(r["id"] for r in sets),
        }

    before = counts()
    result = build_hta_edge_set(
        edge_db.db,
        "HolisticTraceAnalysis==0.5.0",
        run="alexnet",
        annotation=ALEXNET,
        instance=1,
        cache_root=cache_root(),
    )
    assert result.edges_loaded == 421
    assert counts() == before


def test_unknown_run_fails_and_leaves_the_database_unchanged(edge_db: EdgeDb) -> None:
    before = edge_db.db.read_bytes()
    with pytest.raises(UnknownRunError, match="no run 'nope'"):
        build_hta_edge_set(
            edge_db.db,
            "traceinsight==0.6.1",
            run="nope",
            annotation="",
            instance=None,
            cache_root=cache_root(),
        )
    with pytest.raises(UnknownRunError, match="choose one with --run"):
        build_hta_edge_set(
            edge_db.db,
            "traceinsight==0.6.1",
            run=None,
            annotation="",
            instance=None,
            cache_root=cache_root(),
        )
    assert edge_db.db.read_bytes() == before
