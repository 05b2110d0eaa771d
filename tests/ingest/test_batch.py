"""A load batch: the ranks' tables held in memory, or set aside in Parquet files for a large
ingest, load the same database."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest import pipeline
from tracegraph.ingest.batch import LoadBatch
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ..conftest import TRACES, dump, needs_traces

# real traces unlike each other: CPU-only DDP on gloo, sampled H100 ranks, ROCm, a CUDA event
# sync, python stacks and nested annotations (the synthetic job)
REAL = [
    "cpu_ddp_2r",
    "hta/trace_filter",
    "hta/amd_trace",
    "hta/critical_path/cuda_event_sync",
]


@needs_traces
@pytest.mark.parametrize("name", REAL)
def test_ranks_set_aside_in_files_load_the_database_held_ones_load(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every node, property and edge is the same whichever way the ranks wait for their load,
    and the files are gone after it."""
    held, on_disk = tmp_path / "held.kuzu", tmp_path / "it's on disk" / "files.kuzu"
    ingest([TRACES / name], held, IngestOptions(run="r", jobs=1))
    monkeypatch.setattr(pipeline, "LARGE_FROM_BYTES", 0)
    set_aside = _counted_file_loads(monkeypatch)
    ingest([TRACES / name], on_disk, IngestOptions(run="r", jobs=1))
    assert set_aside, "the files were not used"
    want = dump(held)
    assert sum(len(v) for v in want.values()) > 50
    assert dump(on_disk) == want
    assert [p.name for p in on_disk.parent.iterdir() if p.name.startswith(".")] == []


def test_ranks_set_aside_in_batches_load_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch per rank (each committed, its files loaded and removed) gives the database one
    batch held in memory gives."""
    from tracegraph.ingest import batch

    config = SyntheticConfig(ranks=3, steps=2, layers=3, python_stacks=True, annotate=True)
    files = write_per_rank(config, tmp_path / "traces")
    held, on_disk = tmp_path / "held.kuzu", tmp_path / "files.kuzu"
    ingest(files, held, IngestOptions(run="r", jobs=1))
    monkeypatch.setattr(pipeline, "LARGE_FROM_BYTES", 0)
    monkeypatch.setattr(batch, "BATCH_ROWS", 1)
    loads = _counted_file_loads(monkeypatch)
    ingest(files, on_disk, IngestOptions(run="r", jobs=1))
    assert dump(on_disk) == dump(held)
    node_loads = [label for label, pair in loads if pair is None and label == "Op"]
    assert len(node_loads) == config.ranks  # one file of ops per batch


def _counted_file_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """(label, pair) of each `GraphStore.copy_files` from now on."""
    from tracegraph.ingest.store import GraphStore

    loads: list[tuple[str, object]] = []
    copy_files = GraphStore.copy_files

    def counted(store: GraphStore, label: str, paths: list[Path], pair: object = None) -> None:
        loads.append((label, pair))
        copy_files(store, label, paths, pair)  # type: ignore[arg-type]

    monkeypatch.setattr(GraphStore, "copy_files", counted)
    return loads


def test_a_batch_counts_the_memory_it_holds_once(tmp_path: Path) -> None:
    """A rank's node tables are slices of one parent table: the batch's size, which decides
    when it is loaded and committed, counts each buffer once. Held against what Arrow frees
    when the batch's tables go; counted per table it read about 3x that, and batches were
    committed several times too often."""
    from dataclasses import replace

    import pyarrow as pa

    from tracegraph.ingest.parse_options import ParseOptions
    from tracegraph.ingest.prepare import prepare_rank
    from tracegraph.ingest.read import rank_traces

    (path,) = write_per_rank(SyntheticConfig(ranks=1, steps=2, layers=40), tmp_path)
    (trace,) = list(rank_traces(path, ParseOptions()))
    prepared = prepare_rank(trace, "run", 0)
    del trace
    batch = LoadBatch(store=None)  # type: ignore[arg-type]
    batch.add(prepared.node_tables, prepared.edge_tables)
    tables = [*prepared.node_tables.values(), *prepared.edge_tables.values()]
    per_table = sum(t.get_total_buffer_size() for t in tables)
    counted = batch.bytes
    held = pa.total_allocated_bytes()
    del tables
    prepared = replace(prepared, node_tables={}, edge_tables={})
    batch.nodes.clear()
    batch.edges.clear()
    freed = held - pa.total_allocated_bytes()
    assert abs(counted - freed) <= 0.05 * freed
    assert per_table > 2 * freed
