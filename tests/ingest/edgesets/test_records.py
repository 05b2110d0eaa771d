"""The one write of every edge-set producer (`records.write_edge_sets`): all or nothing, and
refused when the run it read has changed since (its keys would point at other events)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.edgesets.errors import EdgeSetError
from tracegraph.ingest.edgesets.records import RunSource, run_source, write_edge_sets
from tracegraph.ingest.store import GraphStore

from ...dbfiles import db_digest


def test_a_write_for_a_run_that_changed_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    write_per_rank(SyntheticConfig(ranks=2, steps=1, layers=1), tmp_path / "traces")
    db = tmp_path / "run.kuzu"
    g = tracegraph.open(db)
    g.ingest(tmp_path / "traces", run="job")
    g.edges("native", run="job")
    with GraphStore(db) as store:
        source = run_source(store, "job")
    assert source.files.keys() == {0, 1} and all(n > 0 for n in source.counts.values())
    before = db_digest(db)
    at = source.ingested_at
    stale = RunSource(source.run, source.run_idx + 1, source.files, source.counts, at)
    with pytest.raises(EdgeSetError, match="changed while its edges were built"):
        write_edge_sets(db, stale, [])
    gone = RunSource("other", source.run_idx, source.files, source.counts, at)
    with pytest.raises(EdgeSetError, match="run 'other' changed"):
        write_edge_sets(db, gone, [])
    # the same name and index, ingested anew (the database replaced meanwhile)
    again = RunSource(source.run, source.run_idx, source.files, source.counts, at + "x")
    with pytest.raises(EdgeSetError, match="changed while its edges were built"):
        write_edge_sets(db, again, [])
    assert db_digest(db) == before
    assert write_edge_sets(db, source, []) == 0  # the run as read: the write goes through
