"""SYNCS from Kineto's cuda_sync events: HTA's sync edges on its own critical-path test traces,
and what every edge must agree with in the cuda_sync event it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import TracePool, needs_traces, trace
from .oracle import load_json, trace_events

EVENT_SYNC = "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"
MULTI_STREAM = "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"
ALEXNET = "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
SIMPLE_ADD = "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"

# HTA's SYNC_DEPENDENCY edges (whole graph), as (src ev_idx, dst ev_idx, sync kind).
HTA_SYNC_EDGES = {
    EVENT_SYNC: {
        (23, 29, "Stream Sync"),
        (33, 41, "Event Sync"),
        (33, 45, "Event Sync"),  # cudaEventQuery, as HTA does
        (33, 51, "Context Sync"),
    },
    MULTI_STREAM: {
        (24, 46, "Event Sync"),
        (54, 82, "Event Sync"),
        (24, 84, "Stream Wait Event"),
        (24, 104, "Context Sync"),
        (54, 104, "Context Sync"),
        (90, 104, "Context Sync"),
    },
}
# Some of HTA's sync edges for alexnet inside its analysis window (the annotation's instance 1).
HTA_ALEXNET_WINDOW = {
    (1043, 1089, "Stream Wait Event"),
    (1083, 1105, "Stream Wait Event"),
    (1109, 1161, "Stream Wait Event"),
    (1109, 1341, "Context Sync"),
    (1335, 1341, "Context Sync"),
}
SYNC_EDGES = (
    "MATCH (a:Kernel)-[e:SYNCS]->(b) "
    "RETURN a.ev_idx AS src, b.ev_idx AS dst, e.sync_type AS kind, e.source AS source, "
    "e.sync_ev_idx AS sync, label(b) AS dst_label, a.ts AS src_ts, a.stream AS src_stream, "
    "b.ts AS dst_ts, b.stream AS dst_stream, b.correlation AS dst_correlation, b.name AS dst_name"
)


def sync_edges(traces: TracePool, relative: str) -> list[dict]:
    return traces.db_of(trace(relative)).rows(SYNC_EDGES)


@needs_traces
@pytest.mark.parametrize("relative", sorted(HTA_SYNC_EDGES))
def test_sync_edges_are_htas(traces: TracePool, relative: str):
    got = {(e["src"], e["dst"], e["kind"]) for e in sync_edges(traces, relative)}
    assert got == HTA_SYNC_EDGES[relative]


@needs_traces
def test_alexnet_sync_edges_include_htas_in_its_window(traces: TracePool):
    got = {(e["src"], e["dst"], e["kind"]) for e in sync_edges(traces, ALEXNET)}
    assert HTA_ALEXNET_WINDOW <= got


WAITER = {
    "Stream Sync": ("cudaStreamSynchronize",),
    "Event Sync": ("cudaEventSynchronize", "cudaEventQuery"),
    "Context Sync": ("cudaDeviceSynchronize",),
}


@needs_traces
@pytest.mark.parametrize("relative", [EVENT_SYNC, MULTI_STREAM, ALEXNET, SIMPLE_ADD])
def test_each_sync_edge_agrees_with_its_cuda_sync_event(traces: TracePool, relative: str):
    events = trace_events(load_json(trace(relative)))
    edges = sync_edges(traces, relative)
    assert edges
    for e in edges:
        sync = events[e["sync"]]
        args = sync["args"]
        assert (e["source"], sync["cat"], args["cuda_sync_kind"]) == (
            "cuda_sync",
            "cuda_sync",
            e["kind"],
        )
        if e["kind"] == "Stream Wait Event":
            assert e["dst_label"] == "Kernel" and e["src_ts"] <= e["dst_ts"]
            assert (e["src_stream"], e["dst_stream"]) == (args["wait_on_stream"], args["stream"])
            continue
        assert e["dst_label"] == "Runtime" and e["dst_correlation"] == args["correlation"]
        assert e["src_ts"] <= (sync["ts"] + sync["dur"]) * 1000  # the waited-for work started
        assert e["dst_name"] in WAITER[e["kind"]]
        if e["kind"] == "Stream Sync":
            assert e["src_stream"] == args["stream"]
        if e["kind"] == "Event Sync":
            assert e["src_stream"] == args["wait_on_stream"]


@needs_traces
def test_sync_counts_on_every_trace(traces: TracePool, shared_trace: Path):
    """Rank.cuda_sync_count is the file's cuda_sync events; without them there are no SYNCS."""
    facts = traces.facts(shared_trace)
    ingested = traces.db_of(shared_trace)
    rank = ingested.rank_of(shared_trace)
    assert (
        ingested.scalar("MATCH (k:Rank) WHERE k.rank = $r RETURN k.cuda_sync_count", {"r": rank})
        == facts.cuda_syncs
    )
    syncs = ingested.scalar(
        "MATCH (a:Kernel)-[e:SYNCS]->(b) WHERE a.rank = $r RETURN count(*)", {"r": rank}
    )
    assert syncs > 0 if facts.cuda_syncs and facts.counts()["Kernel"] else syncs == 0
