"""What-if: path lengths recomputed from stored edge sets under scaled durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import NativeOptions, emulate
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.whatif import (
    CRITICAL_SYNC_ONLY,
    Scaling,
    WhatIfError,
    compare_what_if,
    what_if,
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A 2-rank synthetic job with both a plain native and an emulated edge set."""
    folder = tmp_path_factory.mktemp("whatif")
    write_per_rank(SyntheticConfig(ranks=2, steps=2, layers=4), folder / "traces")
    path = folder / "run.kuzu"
    ingest([folder / "traces"], path, IngestOptions(run="job"))
    lengths = {}
    for options in (NativeOptions(), emulate("hta-0.5.0")):
        result = build_native_edge_set(path, options=options)
        lengths[result.name] = {s.rank: s.path_length_ns for s in result.ranks}
    return path, lengths


def test_unscaled_lengths_are_the_builders(db: tuple[Path, dict]) -> None:
    path, lengths = db
    with GraphStore(path) as store:
        result = what_if(store, "native:hta-0.5.0")
    rows = {r["rank"]: r for r in result.lengths.to_pylist()}
    assert {r: rows[r]["baseline_ns"] for r in rows} == lengths["native:hta-0.5.0"]
    assert all(r["scaled_ns"] == r["baseline_ns"] for r in rows.values())


def test_scaling_moves_lengths_the_right_way(db: tuple[Path, dict]) -> None:
    path, _ = db
    with GraphStore(path) as store:
        faster = what_if(store, "native:hta-0.5.0", scaling=Scaling(kernel=0.5)).lengths
        slower = what_if(store, "native:hta-0.5.0", scaling=Scaling(cpu=2.0)).lengths
        no_syncs = what_if(store, "native:hta-0.5.0", remove_types=("sync_dependency",)).lengths
    for table, sign in ((faster, -1), (slower, 1), (no_syncs, -1)):
        for row in table.to_pylist():
            assert sign * (row["scaled_ns"] - row["baseline_ns"]) >= 0
    assert any(r["scaled_ns"] > r["baseline_ns"] for r in slower.to_pylist())


def test_cross_rank_edge_set_is_one_graph(db: tuple[Path, dict]) -> None:
    path, _ = db
    with GraphStore(path) as store:
        rows = what_if(store, "native", scaling=Scaling(collective=0.0)).lengths.to_pylist()
    assert [r["rank"] for r in rows] == [-1]
    assert rows[0]["scaled_ns"] <= rows[0]["baseline_ns"]


def test_all_syncs_against_critical_syncs_only(db: tuple[Path, dict]) -> None:
    path, _ = db
    with GraphStore(path) as store:
        table = compare_what_if(
            store, "native:hta-0.5.0", CRITICAL_SYNC_ONLY, scaling=Scaling(kernel=3.0)
        ).to_pylist()
    assert len(table) == 2
    for row in table:
        # dropping sync edges can only shorten the longest path
        assert row["b_scaled_ns"] <= row["a_scaled_ns"]
        assert row["a_baseline_ns"] == row["b_baseline_ns"]


def test_bad_input_is_a_whatif_error(db: tuple[Path, dict]) -> None:
    path, _ = db
    with GraphStore(path) as store, pytest.raises(WhatIfError):
        what_if(store, "no-such-set")
    with pytest.raises(WhatIfError):
        Scaling.parse(["gpu=2"])
    assert Scaling.parse(["kernel=0.5", "cpu_op=2"]) == Scaling(kernel=0.5, cpu=2.0)
