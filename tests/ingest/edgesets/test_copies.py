"""Each edge set's Parquet copy in the run archive: it holds exactly the set's DEP rows, belongs
to one build (replaced and failed builds leave none behind), and the diff read from copies and
archived events equals the diff read from the database."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tracegraph.ingest import archive, outputs
from tracegraph.ingest.edgesets import copies, records
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore
from tracegraph.queries import diff as diff_module
from tracegraph.queries.diff import chakra_view, diff_edge_sets

from ...conftest import TRACES, needs_traces

SETS = ("native", "native:hta-0.5.0")


@pytest.fixture(scope="module")
def job_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("copies") / "ddp.kuzu"
    ingest([TRACES / "hta/trace_filter"], db, IngestOptions(run="ddp"))
    build_native_edge_set(db, all_steps=True)
    build_native_edge_set(db, options=emulate("hta-0.5.0"))
    return db


def dep_rows(store: GraphStore, name: str) -> list[tuple]:
    table = store.run(
        "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel) WHERE d.edge_set = $name "
        "RETURN a.id AS src, d.src_boundary AS sb, b.id AS dst, d.dst_boundary AS db, "
        "d.type AS type, d.weight_ns AS w, d.on_critical_path AS crit, a.rank AS rank",
        {"name": name},
    ).table
    return sorted(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))


def copy_of(store: GraphStore, db: Path, name: str) -> pa.Table | None:
    kept = archive.run_archive(db, store, 0)
    return copies.read_copy(kept, records.edge_set_copies(store, "ddp", 0)[name])


@needs_traces
def test_a_copy_holds_exactly_its_sets_rows(job_db: Path) -> None:
    with GraphStore(job_db, read_only=True) as store:
        kept = archive.run_archive(job_db, store, 0)
        assert kept is not None
        keys = {n: c.key for n, c in records.edge_set_copies(store, "ddp", 0).items()}
        on_disk = {p.stem for p in (kept.folder / copies.FOLDER).glob("*.parquet")}
        assert on_disk == set(keys.values())
        for name in SETS:
            copy = copy_of(store, job_db, name)
            assert copy is not None
            want = dep_rows(store, name)
            assert len(want) > 100, name
            got = sorted(zip(*(copy[c].to_pylist() for c in copy.column_names), strict=True))
            assert got == want, name


@needs_traces
def test_a_replaced_set_leaves_one_copy_and_a_failed_write_none(
    job_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ddp.kuzu"
    shutil.copyfile(job_db, db)
    shutil.copytree(archive.archive_root(job_db), archive.archive_root(db))
    with GraphStore(db, read_only=True) as store:
        before_keys = {n: c.key for n, c in records.edge_set_copies(store, "ddp", 0).items()}
    build_native_edge_set(db, options=emulate("hta-0.5.0"))  # replaced
    with GraphStore(db, read_only=True) as store:
        kept = archive.run_archive(db, store, 0)
        keys = {n: c.key for n, c in records.edge_set_copies(store, "ddp", 0).items()}
    assert kept is not None and keys.keys() == before_keys.keys()
    folder = kept.folder
    assert keys["native:hta-0.5.0"] != before_keys["native:hta-0.5.0"]
    files = {p.stem for p in (folder / copies.FOLDER).iterdir()}
    assert files == set(keys.values())  # the replaced set's copy is gone

    def broken(*args: object) -> dict[str, copies.SetCopy]:
        raise RuntimeError("the write fails after the copies were written")

    monkeypatch.setattr(records, "edge_set_copies", broken)
    before = db.read_bytes()
    with pytest.raises(RuntimeError, match="write fails"):
        build_native_edge_set(db, options=emulate("hta-0.5.0"))
    assert {p.stem for p in (folder / copies.FOLDER).iterdir()} == files
    assert db.read_bytes() == before


@needs_traces
def test_the_diff_from_copies_is_the_diff_from_the_database(
    job_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with GraphStore(job_db, read_only=True) as store:
        read = []
        real_read = copies.read_copy
        monkeypatch.setattr(copies, "read_copy", lambda *a: read.append(a) or real_read(*a))
        for options in ({}, {"rank": 1}, {"edge_type": "dependency"}):
            from_copies = diff_edge_sets(store, *SETS, **options)  # type: ignore[arg-type]
            assert read, "the copies were not read"
            with monkeypatch.context() as only_database:
                only_database.setattr(diff_module.archive, "run_archive", lambda *a: None)
                from_database = diff_edge_sets(store, *SETS, **options)  # type: ignore[arg-type]
            assert from_copies.edges.num_rows > 0, options
            for end in ("src", "dst"):  # cross-rank edges of one rank too: every end named
                assert from_copies.edges[f"{end}_name"].null_count == 0, (options, end)
            for field in ("counts", "path_lengths", "edges"):
                got, want = (plain(getattr(d, field)) for d in (from_copies, from_database))
                assert got.equals(want), field


def plain(table: pa.Table) -> pa.Table:
    """Dictionary columns as their values (two reads may number a dictionary differently)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(i, field.name, table[i].cast(field.type.value_type))
    return table


@needs_traces
def test_the_chakra_view_from_copies_is_the_one_from_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "sync.kuzu"
    ingest([TRACES / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"], db,
           IngestOptions(run="sync"))  # fmt: skip
    build_native_edge_set(db)
    build_native_edge_set(db, options=emulate("hta-0.5.0"))
    with GraphStore(db, read_only=True) as store:
        chakra = chakra_view(store, "sync", list(SETS))
        with monkeypatch.context() as only_database:
            only_database.setattr(diff_module.archive, "run_archive", lambda *a: None)
            assert chakra.equals(chakra_view(store, "sync", list(SETS)))
    assert set(chakra["edge_set"].to_pylist()) == set(SETS)
    assert min(chakra["sync_edges"].to_pylist()) > 0


@needs_traces
def test_a_copy_that_cannot_be_written_leaves_the_build_and_the_diff_whole(
    job_db: Path, tmp_path: Path
) -> None:
    """The copy only speeds reads up: where it cannot be written (here `edgesets` is a file)
    the set is written without one, nothing partial is left, and the diff reads the database."""
    db = tmp_path / "ddp.kuzu"
    shutil.copyfile(job_db, db)
    shutil.copytree(archive.archive_root(job_db), archive.archive_root(db))
    with GraphStore(db, read_only=True) as store:
        kept = archive.run_archive(db, store, 0)
    assert kept is not None
    folder = kept.folder
    shutil.rmtree(folder / copies.FOLDER)
    (folder / copies.FOLDER).write_text("not a folder")
    build_native_edge_set(db, options=emulate("hta-0.5.0"))
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []  # nothing partial
    with GraphStore(db, read_only=True) as store:
        assert copy_of(store, db, "native:hta-0.5.0") is None
        again = diff_edge_sets(store, "native:hta-0.5.0", "native:hta-0.5.0")
        assert again.edges.num_rows == 0 and again.counts.num_rows > 0
        chakra = chakra_view(store, "ddp", ["native", "native", "native:hta-0.5.0"])
        assert len(chakra.to_pylist()) == len(
            {(r["edge_set"], r["rank"]) for r in chakra.to_pylist()}
        )


def test_remove_spares_a_live_writers_partial_file(tmp_path: Path) -> None:
    """`remove` runs after the lock is released: another write may be writing its copy then.
    A partial file of a process that is gone is removed; a live one's stays."""
    import os
    import subprocess

    folder = tmp_path / "run" / copies.FOLDER
    folder.mkdir(parents=True)
    finished = subprocess.Popen(["true"])
    finished.wait()
    replaced, other = folder / "a.parquet", folder / "b.parquet"
    tag = outputs._machine_tag()
    dead = folder / f".c.parquet.{tag}.{finished.pid}.x{outputs.SUFFIX}"
    live = folder / f".d.parquet.{tag}.{os.getpid()}.x{outputs.SUFFIX}"
    for path in (replaced, other, dead, live):
        path.write_bytes(b"")
    copies.remove(tmp_path / "run", {"a"})
    assert sorted(p.name for p in folder.iterdir()) == sorted([other.name, live.name])
