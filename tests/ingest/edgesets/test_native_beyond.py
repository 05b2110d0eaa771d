"""What plain `native` does beyond HTA: inferred syncs, rejected traces, the cross-rank path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.edges import KERNEL_LAUNCH_DELAY, SYNC_DEPENDENCY
from tracegraph.ingest.edgesets.native.options import (
    NativeOptions,
    OptionsError,
    emulate,
    version_name,
)
from tracegraph.ingest.edgesets.native.rank_build import RankBuild, build_rank
from tracegraph.ingest.edgesets.native.syncs import SYNC_TYPES
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.parse import parse_file
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

TRACES = (Path(__file__).resolve().parents[3] / ".." / "shared" / "traces").resolve()
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not at {TRACES}")
STRAGGLER = 1
CONFIG = SyntheticConfig(ranks=4, steps=3, layers=8, straggler_rank=STRAGGLER, straggler_factor=2.0)


def _build(path: Path, options: NativeOptions, **kw: object) -> RankBuild:
    return build_rank(parse_file(path)[0], options, Window(), **kw)  # type: ignore[arg-type]


def _sync_edges(build: RankBuild) -> set[tuple]:
    """Sync edges named by (name, ts) of both ends: comparable across files."""
    graph = build.windows[0].graph
    assert graph is not None
    c, e = graph.clip, graph.edges

    def ident(node: int) -> tuple[str, int, int]:
        return (c.name.at(int(node // 2)), int(c.ts[node // 2]), int(node % 2))

    return {(ident(e.src[j]), ident(e.dst[j])) for j in np.nonzero(e.kind == SYNC_DEPENDENCY)[0]}


def test_inferred_syncs_equal_those_from_cuda_sync_events(tmp_path: Path) -> None:
    """The same synthetic job with and without cuda_sync events: the same sync edges."""
    with_events = SyntheticConfig(ranks=2, steps=3, layers=8)
    without = SyntheticConfig(ranks=2, steps=3, layers=8, with_cuda_sync=False)
    a = write_per_rank(with_events, tmp_path / "a")
    b = write_per_rank(without, tmp_path / "b")
    for rank in range(2):
        truth = _build(a[rank], NativeOptions())
        inferred = _build(b[rank], NativeOptions())
        assert truth.inferred is None  # the trace has cuda_sync events: nothing is inferred
        assert inferred.inferred is not None
        kinds = {SYNC_TYPES[int(t)] for t in inferred.inferred.sync_type}
        assert kinds == {"Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event"}
        assert _sync_edges(inferred) == _sync_edges(truth)
        # HTA sees none of them: it reads only cuda_sync events
        hta_like = _build(b[rank], emulate("traceinsight-0.6.1"))
        assert not _sync_edges(hta_like)


@needs_traces
def test_inferred_syncs_on_a_real_trace_without_cuda_sync_events() -> None:
    """nccl_data: cudaEventSynchronize and friends, no cuda_sync events."""
    build = _build(TRACES / "hta/nccl_parser_config/nccl_data.json.gz", NativeOptions())
    syncs, frame = build.inferred, build.frame
    assert syncs is not None and frame is not None and len(syncs) > 0
    waits_on_call = ~syncs.to_gpu
    assert (
        frame.end[syncs.gpu_row[waits_on_call]] <= frame.end[syncs.waiter_row[waits_on_call]]
    ).all()
    assert (
        frame.ts[syncs.waiter_row[~waits_on_call]] >= frame.end[syncs.gpu_row[~waits_on_call]]
    ).all()
    assert len(_sync_edges(build)) > 0


@needs_traces
@pytest.mark.parametrize(
    "trace",
    [
        "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "hta/rank_non_gpu/rank_non_gpu.json.gz",
        "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz",
        "cpu_ddp_2r/rank0.step5.pt.trace.json.gz",
    ],
)
def test_traces_hta_rejects_get_a_path(trace: str) -> None:
    path = TRACES / trace
    emulated = _build(path, emulate("hta-0.5.0"))
    assert not emulated.windows[0].ok  # HTA fails here
    native = _build(path, NativeOptions())
    graph = native.windows[0].graph
    assert graph is not None and graph.path.length > 0 and len(graph.path.edges) > 0
    if "mtia" in trace:  # its launches (mtia_runtime) are nodes now, so launch delays exist
        assert (graph.edges.kind == KERNEL_LAUNCH_DELAY).any()


@pytest.fixture(scope="module")
def straggler_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("straggler")
    write_per_rank(CONFIG, folder / "traces")
    db = folder / "run.kuzu"
    ingest([folder / "traces"], db, IngestOptions(run="straggler"))
    return db


def test_cross_rank_path_names_the_rank_that_bound_each_step(straggler_db: Path) -> None:
    result = build_native_edge_set(straggler_db, options=NativeOptions(), all_steps=True)
    assert [p.step for p in result.cross_rank] == [f"ProfilerStep#{i}" for i in range(CONFIG.steps)]
    for step, path in enumerate(result.cross_rank):
        stalled = CONFIG.stall_rank(step)
        assert path.bound_by_rank == (stalled if stalled is not None else STRAGGLER)
        longest_rank_path = max(
            s.windows[step]["path_length_ns"]
            for s in result.ranks  # type: ignore[index]
        )
        assert path.length_ns <= longest_rank_path  # waiting inside collectives is not work
    with GraphStore(straggler_db) as store:
        names = store.run("MATCH (e:EdgeSet) RETURN e.name AS n").table["n"].to_pylist()
        assert sorted(names) == ["native", "native:cross-rank"]
        on_path = store.run(
            "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->() WHERE d.edge_set = 'native:cross-rank' "
            "RETURN count(*) AS n, min(d.path_order) AS lo"
        ).table.to_pylist()[0]
        assert on_path["n"] == sum(len(p.edges) for p in result.cross_rank) and on_path["lo"] == 0
        collective = (
            store.run(
                "MATCH (a:Kernel)-[d:DEP]->(b:Kernel) WHERE d.edge_set = 'native' AND "
                "d.type = 'collective_dependency' AND a.rank <> b.rank RETURN count(*) AS n"
            )
            .table["n"][0]
            .as_py()
        )
        assert collective > 0


def test_rebuilding_replaces_the_edge_set(straggler_db: Path) -> None:
    first = build_native_edge_set(straggler_db, options=emulate("hta-0.5.0"))
    second = build_native_edge_set(straggler_db, options=emulate("hta-0.5.0"))
    assert first.edges_loaded == second.edges_loaded > 0
    with GraphStore(straggler_db) as store:
        count = (
            store.run(
                "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->() WHERE d.edge_set = 'native:hta-0.5.0' "
                "RETURN count(*) AS n"
            )
            .table["n"][0]
            .as_py()
        )
        nodes = (
            store.run("MATCH (e:EdgeSet) WHERE e.name = 'native:hta-0.5.0' RETURN count(*) AS n")
            .table["n"][0]
            .as_py()
        )
    assert count == second.edges_loaded and nodes == 1


def test_options_presets_and_names() -> None:
    older, newer = emulate("HolisticTraceAnalysis==0.5.0"), emulate("0.6.1")
    assert older.edge_set_name == "native:hta-0.5.0"
    assert newer.edge_set_name == "native:traceinsight-0.6.1"
    assert newer.kernel_gap_cutoff_ns == 1_500_000
    assert newer.merge_backward_thread and newer.runtime_lock
    assert not (older.merge_backward_thread or older.runtime_lock or older.kernel_gap_cutoff_ns)
    assert older.with_changes(runtime_lock=True).edge_set_name == "native"
    assert NativeOptions().edge_set_name == "native"
    assert version_name("traceinsight==0.6.1") == "traceinsight-0.6.1"
    with pytest.raises(OptionsError):
        emulate("hta-9.9")
    with pytest.raises(OptionsError):
        NativeOptions(kernel_gap_cutoff_ns=0)
