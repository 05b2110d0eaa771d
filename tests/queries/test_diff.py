"""`diff hta-0.5.0 traceinsight-0.6.1` on a real trace, with HTA itself building both edge sets.

negative_queue rank0 has kernel gaps over 1.5 ms: 0.6.1 drops exactly those kernel→kernel edges
(its 1.5 ms cutoff), and its runtime-lock pass weighs cudaMemcpyAsync spans in full.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from tracegraph.ingest.edgesets.hta.edge_set import build_hta_edge_set
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.diff import KERNEL_GAP_CUTOFF_NS, chakra_view, diff_edge_sets

from ..ingest.edgesets.conftest import (  # noqa: F401 (hta_envs fixture)
    SPECS,
    cache_root,
    hta_envs,  # noqa: F401
    needs_traces,
)

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
NEGATIVE_QUEUE = TRACES / "hta/negative_queue_length_values_check/rank0.json.gz"
EVENT_SYNC = TRACES / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"


@pytest.fixture(scope="module")
def diff_db(tmp_path_factory: pytest.TempPathFactory, hta_envs: object) -> Path:  # noqa: F811
    db = tmp_path_factory.mktemp("diff") / "diff.kuzu"
    ingest([NEGATIVE_QUEUE], db, IngestOptions(run="nq"))
    ingest([EVENT_SYNC], db, IngestOptions(run="sync"))
    for spec in SPECS.values():
        build_hta_edge_set(
            db,
            spec,
            run="nq",
            annotation="",
            instance=None,
            cache_root=cache_root(),
            progress=lambda *a: None,
        )
        build_hta_edge_set(
            db,
            spec,
            run="sync",
            annotation="ProfilerStep",
            instance=0,
            cache_root=cache_root(),
            progress=lambda *a: None,
        )
    return db


@needs_traces
def test_dropped_edges_are_exactly_the_long_kernel_gaps(diff_db: Path) -> None:
    with GraphStore(diff_db) as store:
        diff = diff_edge_sets(store, "hta-0.5.0", "traceinsight-0.6.1", run="nq")
        long_gaps = store.run(
            "MATCH (a:Kernel)-[d:DEP]->(b:Kernel) WHERE d.edge_set = 'hta-0.5.0' "
            "AND a.run = 'nq' AND d.type = 'kernel_kernel_delay' "
            "AND b.ts - (a.ts + a.dur) >= $cutoff RETURN a.id AS src, b.id AS dst",
            {"cutoff": KERNEL_GAP_CUTOFF_NS},
        ).table
    edges = diff.edges
    only_a = edges.filter(pc.equal(edges["change"], "only in A"))
    assert only_a.num_rows > 0
    assert set(zip(only_a["src"].to_pylist(), only_a["dst"].to_pylist(), strict=True)) == set(
        zip(long_gaps["src"].to_pylist(), long_gaps["dst"].to_pylist(), strict=True)
    )
    assert set(only_a["type"].to_pylist()) == {"kernel_kernel_delay"}
    assert all("≥ 1.5 ms" in r for r in only_a["reason"].to_pylist())
    assert edges.filter(pc.equal(edges["change"], "only in B")).num_rows == 0


@needs_traces
def test_every_structural_change_is_explained(diff_db: Path) -> None:
    with GraphStore(diff_db) as store:
        diff = diff_edge_sets(store, "hta-0.5.0", "traceinsight-0.6.1", run="nq")
    changed = diff.edges.filter(pc.not_equal(diff.edges["change"], "critical path changed"))
    assert all(changed["reason"].to_pylist())
    weights = changed.filter(pc.equal(changed["change"], "weight changed"))
    assert weights.num_rows > 0
    assert set(weights["src_name"].to_pylist()) <= {
        "cudaMemcpyAsync",
        "cudaLaunchKernel",
        "cudaHostAlloc",
    }
    lengths = diff.path_lengths.to_pylist()
    assert lengths[0]["a_status"] == lengths[0]["b_status"] == "ok"
    assert lengths[0]["a_ns"] != lengths[0]["b_ns"]


@needs_traces
def test_counts_add_up_and_filters_apply(diff_db: Path) -> None:
    with GraphStore(diff_db) as store:
        everything = diff_edge_sets(store, "hta-0.5.0", "traceinsight-0.6.1", run="nq")
        kk = diff_edge_sets(
            store,
            "hta-0.5.0",
            "traceinsight-0.6.1",
            run="nq",
            edge_type="kernel_kernel_delay",
            rank=0,
        )
        totals = store.run(
            "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(:Op:Runtime:Kernel) WHERE a.run = 'nq' "
            "RETURN d.edge_set AS edge_set, count(*) AS n ORDER BY edge_set"
        ).table.to_pylist()
    counts = everything.counts
    only_a, only_b, both = (pc.sum(counts[c]).as_py() for c in ("only_a", "only_b", "both"))
    assert [t["n"] for t in totals] == [only_a + both, only_b + both]
    # the counts hold the edge list's weight changes (before: only the list had them)
    listed = everything.edges.filter(pc.equal(everything.edges["change"], "weight changed"))
    assert pc.sum(counts["weight_changed"]).as_py() == listed.num_rows > 0
    assert set(kk.edges["type"].to_pylist()) == {"kernel_kernel_delay"}


@needs_traces
def test_chakra_view_counts_sync_edges_on_and_off_the_path(diff_db: Path) -> None:
    with GraphStore(diff_db) as store:
        view = chakra_view(store, "sync", ["hta-0.5.0", "traceinsight-0.6.1"]).to_pylist()
        runs_needed = pytest.raises(Exception, match="choose one with --run")
        with runs_needed:
            diff_edge_sets(store, "hta-0.5.0", "traceinsight-0.6.1")
    # the figures HTA reports for cuda_event_sync (ProfilerStep 0): 4 sync edges, 2 vs 1 on path
    assert {(r["edge_set"], r["sync_edges"], r["on_critical_path"]) for r in view} == {
        ("hta-0.5.0", 4, 2),
        ("traceinsight-0.6.1", 4, 1),
    }


@needs_traces
def test_cli_diff_prints_counts_lengths_and_reasons(
    diff_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracegraph.explorer.cli import main

    assert main(["diff", str(diff_db), "hta-0.5.0", "traceinsight-0.6.1", "--run", "nq"]) == 0
    out = capsys.readouterr().out
    assert "kernel_kernel_delay" in out and "b_minus_a_us" in out
    assert "kernel→kernel gap" in out and "none in either edge set" in out
