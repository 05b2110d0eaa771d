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


@pytest.mark.parametrize("rebuild_below", [0.0, 10.0])  # always delete rows / always rebuild
def test_replacing_an_edge_set_keeps_every_other_edge_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rebuild_below: float
) -> None:
    """Both ways of dropping a set's rows (deleting them, or rebuilding DEP without them)
    leave the other sets, of this run and of another run, as they were."""
    from tracegraph.ingest.edgesets import records

    monkeypatch.setattr(records, "REBUILD_BELOW", rebuild_below)
    config = SyntheticConfig(ranks=2, steps=2, layers=2)
    write_per_rank(config, tmp_path / "t")
    g = tracegraph.open(tmp_path / "r.kuzu")
    g.ingest(tmp_path / "t", run="a")
    g.ingest(tmp_path / "t", run="b")
    g.edges("native", run="a")
    g.edges("native", run="a", emulate_version="hta-0.5.0")
    g.edges("native", run="b")

    def rows(name: str, run: str) -> list[tuple]:
        table = g.dependencies(name, run=run)
        return sorted(tuple(r.values()) for r in table.to_pylist())

    kept = {(n, r): rows(n, r) for n, r in (("native:hta-0.5.0", "a"), ("native", "b"))}
    before = rows("native", "a")
    assert all(kept.values()) and before
    g.edges("native", run="a")  # replaced: the same edges again
    assert {(n, r): rows(n, r) for n, r in kept} == kept
    assert rows("native", "a") == before
    names = g.edge_sets().to_pylist()
    assert sorted((s["run"], s["name"]) for s in names) == [
        ("a", "native"), ("a", "native:cross-rank"), ("a", "native:hta-0.5.0"),
        ("b", "native"), ("b", "native:cross-rank"),
    ]  # fmt: skip
