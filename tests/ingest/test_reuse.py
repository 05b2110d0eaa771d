"""ingest/reuse.py: traces go into a database once; the same files later reuse it, a changed
file is ingested again, and the cache keeps only the sets used last."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tracegraph.ingest import reuse
from tracegraph.ingest.errors import TraceFormatError, TracegraphError
from tracegraph.ingest.reuse import ingested
from tracegraph.ingest.store import GraphStore

from ..conftest import needs_traces, trace

pytestmark = needs_traces


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A copy of a real 2-rank job (its files are changed by some tests)."""
    folder = tmp_path / "job"
    folder.mkdir()
    for f in trace("cpu_ddp_2r").glob("*.json.gz"):
        shutil.copy2(f, folder / f.name)
    return folder


def runs_of(db: Path) -> list[tuple[str, str]]:
    store = GraphStore(db, read_only=True)
    try:
        rows = store.run("MATCH (r:Run) RETURN r.name AS name, r.ingested_at AS at").table
    finally:
        store.close()
    return list(zip(rows["name"].to_pylist(), rows["at"].to_pylist(), strict=True))


def test_the_same_files_are_ingested_once(job: Path, tmp_path: Path) -> None:
    first = ingested([job], cache_root=tmp_path / "cache")
    assert first.result is not None and first.run == "job" and first.db.is_file()
    assert {r.rank for r in first.result.ranks} == {0, 1}
    again = ingested([job], cache_root=tmp_path / "cache")
    assert again.result is None and (again.db, again.run) == (first.db, first.run)
    assert runs_of(again.db) == runs_of(first.db)  # nothing written the second time


def test_a_changed_file_is_ingested_again(job: Path, tmp_path: Path) -> None:
    first = ingested([job], cache_root=tmp_path / "cache")
    changed = sorted(job.iterdir())[0]
    changed.write_bytes(changed.read_bytes())  # same bytes, a later modification time
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    again = ingested([job], cache_root=tmp_path / "cache")
    assert again.result is not None and again.db != first.db


def test_a_named_database_reuses_or_replaces_its_run(job: Path, tmp_path: Path) -> None:
    db = tmp_path / "mine.kuzu"
    first = ingested([job], db)
    assert first.result is not None and [n for n, _ in runs_of(db)] == ["job"]
    assert ingested([job], db).result is None
    [(_, before)] = runs_of(db)
    changed = sorted(job.iterdir())[1]
    os.utime(changed)  # touched after the ingest: the run no longer holds the files as they are
    assert ingested([job], db).result is not None
    [(name, after)] = runs_of(db)  # replaced, not added
    assert name == "job" and after > before
    other = ingested([job], db, run="other")  # another name: a run of its own
    assert other.result is not None and sorted(n for n, _ in runs_of(db)) == ["job", "other"]


def test_another_jobs_run_of_the_same_name_is_never_replaced(job: Path, tmp_path: Path) -> None:
    db = tmp_path / "mine.kuzu"
    ingested([job], db)
    before = runs_of(db)
    other = tmp_path / "elsewhere" / "job"  # another job, the same folder name
    other.mkdir(parents=True)
    shutil.copy2(trace("cpu_ddp_2r_faults/rank0.step6.pt.trace.json.gz"), other)
    with pytest.raises(TracegraphError, match="run 'job' holds other trace files"):
        ingested([other], db)
    assert runs_of(db) == before
    assert ingested([other], db, run="faults").result is not None


def test_a_folder_with_json_that_is_no_trace_is_reused_from_the_cache(
    job: Path, tmp_path: Path
) -> None:
    (job / "meta.json").write_text('{"world_size": 2}')  # skipped by the ingest
    first = ingested([job], cache_root=tmp_path / "cache")
    assert first.result is not None and [n for n, _ in first.result.skipped] == ["meta.json"]
    assert ingested([job], cache_root=tmp_path / "cache").result is None


def test_the_cache_keeps_the_sets_used_last(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reuse, "CACHE_KEEP", 2)
    cache = tmp_path / "cache"
    files = sorted(job.iterdir())
    kept = []
    for f in (files[0], files[1], files[0]):
        done = ingested([f], cache_root=cache)
        kept.append(done.db.parent)
    ingested([job], cache_root=cache)  # a third set: the one used longest ago goes
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        {kept[2].name, reuse.fingerprint(files)[:32]}
    )


def test_no_traces_is_the_ingests_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file or folder"):
        ingested([tmp_path / "missing.json"], cache_root=tmp_path / "cache")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceFormatError, match="holds no trace files"):
        ingested([tmp_path / "empty"], cache_root=tmp_path / "cache")
