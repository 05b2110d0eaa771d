"""ingest/edgesets/native/cache.py: a trace file's frame sources stored beside the database and
read back as written; an entry whose write fails leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tracegraph.ingest.edgesets.native.cache import (
    SourcesWriter,
    cache_dir,
    load_sources,
    store_sources,
)
from tracegraph.ingest.edgesets.native.frame import FrameSource


def _sources() -> list[FrameSource]:
    return [
        FrameSource(rank, pa.table({"ts": [rank * 10, rank * 10 + 1], "name": ["a", "b"]}))
        for rank in (0, 1)
    ]


def test_stored_sources_read_back_as_written_and_no_temporary_stays(tmp_path: Path) -> None:
    db, trace = tmp_path / "r.kuzu", tmp_path / "rank0.json"
    trace.write_text("{}")
    assert load_sources(db, trace) is None
    store_sources(db, trace, _sources())
    back = load_sources(db, trace)
    assert back is not None
    assert [(s.rank, s.rows.to_pylist()) for s in back] == [
        (s.rank, s.rows.to_pylist()) for s in _sources()
    ]
    assert [p.name for p in cache_dir(db).iterdir() if p.name.startswith(".")] == []


def test_an_entry_that_fails_midway_leaves_nothing(tmp_path: Path) -> None:
    db, trace = tmp_path / "r.kuzu", tmp_path / "rank0.json"
    trace.write_text("{}")
    writer = SourcesWriter(db, trace)
    first, _ = _sources()
    writer.add(first)
    writer.add(FrameSource(1, pa.table({"other": [1.5]})))  # another schema: abandoned
    writer.add(first)  # after an abandon, nothing more is written
    writer.finish()
    assert list(cache_dir(db).iterdir()) == []
    assert load_sources(db, trace) is None
