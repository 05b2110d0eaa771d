"""Structural edges on real traces: LAUNCHES by (rank, correlation), CALLS by nesting on a thread,
NEXT_ON_STREAM per (device, stream); none of them joins two ranks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ..conftest import (
    MERGED,
    MULTI_RANK_FOLDERS,
    TracePool,
    needs_traces,
    per_rank_files,
    trace,
)
from .oracle import calls_reference, stream_reference

MULTI_RANK_KEYS = [*MULTI_RANK_FOLDERS, *MERGED]
CROSS_RANK = {
    "CALLS": "MATCH (a)-[e:CALLS]->(b) WHERE a.rank <> b.rank RETURN count(*)",
    "LAUNCHES": "MATCH (a)-[e:LAUNCHES]->(b) WHERE a.rank <> b.rank RETURN count(*)",
    "NEXT_ON_STREAM": "MATCH (a)-[e:NEXT_ON_STREAM]->(b) WHERE a.rank <> b.rank RETURN count(*)",
    "SYNCS": "MATCH (a)-[e:SYNCS]->(b) WHERE a.rank <> b.rank RETURN count(*)",
}
KERNEL_LAUNCHES = (
    "MATCH (k:Kernel) OPTIONAL MATCH (r:Runtime)-[e:LAUNCHES]->(k) "
    "RETURN k.rank AS rank, k.ev_idx AS ev_idx, k.name AS name, k.ts AS ts, count(r) AS n, "
    "collect(e.via) AS via"
)


@needs_traces
@pytest.mark.parametrize("key", MULTI_RANK_KEYS)
def test_no_structural_edge_joins_two_ranks(traces: TracePool, key: str):
    ingested = traces.db(key)
    assert ingested.scalar("MATCH (k:Rank) RETURN count(*)") == 2
    assert ingested.scalar("MATCH ()-[e:CALLS]->() RETURN count(*)") > 50
    for label, cypher in CROSS_RANK.items():
        assert ingested.scalar(cypher) == 0, label


def launched_by_rank(traces: TracePool, key: str) -> Counter[tuple]:
    """(rank, name, ts) of every GPU event whose correlation has a runtime call in its rank."""
    launched: Counter[tuple] = Counter()
    for rank, path in enumerate(per_rank_files(key)):
        facts = traces.facts(path)
        chosen = set(facts.launched)
        launched.update((rank, e.name, e.ts) for e in facts.events("Kernel") if e.ev_idx in chosen)
    return launched


@needs_traces
@pytest.mark.parametrize("key", MULTI_RANK_KEYS)
def test_each_launched_gpu_event_has_one_launch_from_its_own_rank(traces: TracePool, key: str):
    ingested = traces.db(key)
    kernels = ingested.rows(KERNEL_LAUNCHES)
    assert all(k["n"] <= 1 for k in kernels)
    got = Counter((k["rank"], k["name"], k["ts"]) for k in kernels if k["n"] == 1)
    assert got == launched_by_rank(traces, key)
    mismatched = ingested.scalar(
        "MATCH (r:Runtime)-[e:LAUNCHES]->(k:Kernel) "
        "WHERE e.via = 'correlation' AND r.correlation <> k.correlation RETURN count(*)"
    )
    assert mismatched == 0


@needs_traces
def test_merged_trace_filter_has_gpu_events_a_correlation_alone_would_join_across_ranks(
    traces: TracePool,
):
    """The merged-file launch test above means something only if ids collide across ranks."""
    colliding = traces.db("merged:hta/trace_filter").scalar(
        "MATCH (k:Kernel), (r:Runtime) WHERE k.rank <> r.rank AND k.correlation = r.correlation "
        "RETURN count(*)"
    )
    assert colliding > 0


def test_launches_follow_correlation_within_the_rank(traces: TracePool, shared_trace: Path):
    """Every GPU event whose correlation has a runtime call is launched by it, once; others may
    be launched through a launch flow, also once."""
    facts = traces.facts(shared_trace)
    ingested = traces.db_of(shared_trace)
    rank = ingested.rank_of(shared_trace)
    kernels = [k for k in ingested.rows(KERNEL_LAUNCHES) if k["rank"] == rank]
    assert all(k["n"] <= 1 for k in kernels), "a GPU event with two launches"
    by_correlation = {k["ev_idx"] for k in kernels if k["via"] == ["correlation"]}
    assert by_correlation == set(facts.launched)


CALLS_ENDS = (
    "MATCH (a)-[:CALLS]->(b) WHERE a.rank = $r "
    "RETURN a.ev_idx AS a, b.ev_idx AS b, a.pid = b.pid AND a.tid = b.tid AS same_thread, "
    "a.ts <= b.ts AND b.ts + b.dur <= a.ts + a.dur AS inside"
)


@needs_traces
@pytest.mark.parametrize(
    "relative",
    [
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        "cpu_ddp_2r/rank0.step5.pt.trace.json.gz",
        "hta/trace_filter/sampled_rank-1.json.gz",
        "hta/call_stack/backward_thread.json",
        "tracelens/traces/b200/eager_trace.json.gz",
    ],
)
def test_calls_nest_each_range_in_its_innermost_enclosing_range(traces: TracePool, relative: str):
    path = trace(relative)
    ingested = traces.db_of(path)
    rank = ingested.rank_of(path)
    edges = ingested.rows(CALLS_ENDS, {"r": rank})
    assert edges and all(e["same_thread"] and e["inside"] for e in edges)
    children = Counter(e["b"] for e in edges)
    assert max(children.values()) == 1, "a range with two parents"
    assert {(e["a"], e["b"]) for e in edges} == calls_reference(traces.facts(path).events())


STREAM_EDGES = (
    "MATCH (a:Kernel)-[e:NEXT_ON_STREAM]->(b:Kernel) WHERE a.rank = $r "
    "RETURN a.ev_idx AS a, b.ev_idx AS b, e.gap_ns AS gap, "
    "a.device = b.device AND a.stream = b.stream AS same_stream"
)


def test_next_on_stream_chains_consecutive_activities_with_their_gap(
    traces: TracePool, shared_trace: Path
):
    ingested = traces.db_of(shared_trace)
    rank = ingested.rank_of(shared_trace)
    kernels = traces.facts(shared_trace).events("Kernel")
    expected = stream_reference(kernels)
    streams = {(e.pid, e.tid) for e in kernels}
    edges = ingested.rows(STREAM_EDGES, {"r": rank})
    assert all(e["same_stream"] for e in edges)
    assert {(e["a"], e["b"], e["gap"]) for e in edges} == expected
    assert len(edges) == len(kernels) - len(streams)
