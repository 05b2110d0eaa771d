"""The store: checked query parameters, and all-or-nothing writes — an ingest that fails, meets
another writer, or is killed with SIGKILL at any moment leaves the database as it was."""

from __future__ import annotations

import fcntl
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tracegraph.ingest import archive
from tracegraph.ingest.errors import IngestError
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore, QueryError, ReadOnlyStoreError, recovery_files

from ..conftest import label_counts, needs_traces, rows, trace

SMALL = "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"
MULTI_STREAM = "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"
BIG = "hta/trace_diff/control/control.json.gz"


class Snapshot:
    """A database holding one run ("base"), its bytes and its counts."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.data = db.read_bytes()
        with GraphStore(db) as store:
            self.counts = label_counts(store)
            self.runs = run_names(store)

    def copy_to(self, folder: Path) -> Path:
        db = folder / "graph.kuzu"
        shutil.copyfile(self.db, db)
        shutil.copytree(archive.archive_root(self.db), archive.archive_root(db))
        return db

    def assert_unchanged(self, db: Path) -> None:
        assert db.read_bytes() == self.data, "the database file changed"
        assert not db.with_name(db.name + ".wal").exists()
        with GraphStore(db) as store:
            assert (run_names(store), label_counts(store)) == (self.runs, self.counts)
            assert archive_folders(db, store) == {"base"}  # a killed ingest's folder is no run's


def archive_folders(db: Path, store: GraphStore) -> set[str]:
    """The runs whose archive folder is in place (rank rows and trace bytes both there)."""
    owned = {}
    for r in rows(store, "MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx"):
        kept = archive.run_archive(db, store, r["idx"])
        folder = kept.folder if kept is not None else None
        if folder is not None and list(folder.glob("rank-*.parquet")):
            assert list((folder / archive.SOURCES).iterdir()), folder
            owned[r["name"]] = folder
    return set(owned)


def run_names(store: GraphStore) -> list[str]:
    return [r["name"] for r in rows(store, "MATCH (r:Run) RETURN r.name AS name ORDER BY name")]


def staging_files(db: Path) -> list[Path]:
    return sorted(db.parent.glob(f".{db.name}.staging-*"))


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    if not trace(SMALL).exists():
        pytest.skip("real traces absent")
    db = tmp_path_factory.mktemp("one_run") / "graph.kuzu"
    ingest([trace(SMALL)], db, IngestOptions(run="base"))
    return Snapshot(db)


@needs_traces
def test_queries_check_their_parameters_and_a_reader_cannot_write(one_run: Snapshot):
    with GraphStore(one_run.db) as store:
        count = "MATCH (n:Kernel) WHERE n.rank = $r RETURN count(*) AS n"
        assert rows(store, count, {"r": 0}) == [{"n": one_run.counts["Kernel"]}]
        with pytest.raises(QueryError, match="missing parameter"):
            store.run(count)
        with pytest.raises(QueryError, match="unknown parameter"):
            store.run(count, {"r": 0, "rank": 0})
        with pytest.raises(QueryError):
            store.run("MATCH (n:Nope) RETURN n")
        with pytest.raises(QueryError):
            store.run("CREATE (:Run {name: 'x', run_idx: 9})")
        assert store.run(count, {"r": 0}, limit=0).truncated


@needs_traces
def test_a_process_holds_many_readers_at_once(one_run: Snapshot, tmp_path: Path):
    """Kuzu reserves 8 TB of address space per open database by default (a process could hold
    15, 128 TB in all); a reader reserves a few times its file's size, so 40 open together, each
    answering, and a file bigger than its first reservation still opens."""
    stores = [GraphStore(one_run.db) for _ in range(40)]
    try:
        count = "MATCH (n:Kernel) RETURN count(*) AS n"
        assert {rows(s, count)[0]["n"] for s in stores} == {one_run.counts["Kernel"]}
    finally:
        for s in stores:
            s.close()
    grown = shutil.copyfile(one_run.db, tmp_path / "grown.kuzu")
    with grown.open("ab") as fh:  # pages no table uses: the file is larger than 1 GiB / 4
        fh.truncate(grown.stat().st_size + (300 << 20))
    with GraphStore(grown) as store:
        assert rows(store, count)[0]["n"] == one_run.counts["Kernel"]


@needs_traces
@pytest.mark.parametrize("failing_label", ["Kernel", "SYNCS", "Run"])
def test_ingest_failing_midway_leaves_the_database_as_it_was(
    one_run: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_label: str
):
    db = one_run.copy_to(tmp_path)
    real_copy = GraphStore.copy
    loaded: list[str] = []

    def copy(self: GraphStore, label: str, data, pair=None) -> None:  # noqa: ANN001
        if label == failing_label:
            raise IngestError(f"injected failure loading {label}")
        loaded.append(label)
        real_copy(self, label, data, pair)

    monkeypatch.setattr(GraphStore, "copy", copy)
    with pytest.raises(IngestError, match="injected"):
        ingest([trace(MULTI_STREAM)], db, IngestOptions(run="second"))
    assert loaded[:2] == ["Op", "Runtime"]  # it failed after loading part of the run
    monkeypatch.undo()
    one_run.assert_unchanged(db)
    assert staging_files(db) == []


@needs_traces
def test_failed_first_ingest_leaves_no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def copy(self: GraphStore, label: str, data, pair=None) -> None:  # noqa: ANN001
        raise IngestError("injected")

    monkeypatch.setattr(GraphStore, "copy", copy)
    db = tmp_path / "new.kuzu"
    with pytest.raises(IngestError):
        ingest([trace(SMALL)], db)
    assert not db.exists() and staging_files(db) == []


@needs_traces
def test_second_writer_is_refused_while_one_holds_the_lock(one_run: Snapshot, tmp_path: Path):
    db = one_run.copy_to(tmp_path)
    with open(db.with_name(db.name + ".lock"), "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(IngestError, match="another tracegraph process"):
            ingest([trace(MULTI_STREAM)], db, IngestOptions(run="second"))
    one_run.assert_unchanged(db)


# The ingest a test kills: it announces each COPY and the final swap on stdout, and, at the
# point named by argv[3], waits on stdin (for a kill that the parent sends) before going on.
CHILD = r"""
import os, sys
from pathlib import Path
from tracegraph.ingest import store
from tracegraph.ingest.pipeline import IngestOptions, ingest

db, path, hold_at = sys.argv[1:4]

def reached(point):
    print(point, flush=True)
    if point == hold_at:
        sys.stdin.readline()

real_copy, real_replace = store.GraphStore.copy, os.replace

def copy(self, label, data, pair=None):
    reached("copy " + label)
    return real_copy(self, label, data, pair)

def replace(src, dst):
    reached("replace")
    return real_replace(src, dst)

store.GraphStore.copy, os.replace = copy, replace
ingest([Path(path)], Path(db), IngestOptions(run="killed"))
print("done", flush=True)
"""


class Child:
    """An ingest of the big trace into `db` in a subprocess, to be killed with SIGKILL."""

    def __init__(self, db: Path, hold_at: str = "-") -> None:
        self.db = db
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db), str(trace(BIG)), hold_at],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.staging = db.with_name(f".{db.name}.staging-{self.proc.pid}")
        self._watchdog = threading.Timer(120, self.proc.kill)  # never hang the suite
        self._watchdog.start()

    def wait_for_line(self, wanted: str) -> float:
        """Read announcements until `wanted`; the time it came."""
        for line in self.proc.stdout:
            if line.strip() == wanted:
                return time.monotonic()
        pytest.fail(f"the ingest ended (rc={self.proc.wait()}) before {wanted!r}")

    def wait_for_staging(self) -> float:
        while not self.staging.exists():
            assert self.proc.poll() is None, "the ingest ended before its staging file appeared"
            time.sleep(0.005)
        return time.monotonic()

    def kill(self) -> bool:
        """SIGKILL; whether the ingest was still mid-way (its staging file not yet swapped in)."""
        midway = self.proc.poll() is None and self.staging.exists()
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait() == -signal.SIGKILL
        self._watchdog.cancel()
        return midway


@needs_traces
def test_ingest_killed_at_any_moment_leaves_the_database_as_it_was(
    one_run: Snapshot, tmp_path: Path
):
    def child(name: str, hold_at: str = "-") -> Child:
        (tmp_path / name).mkdir()
        return Child(one_run.copy_to(tmp_path / name), hold_at)

    # all three run at once: two stop at a point of their own, one is killed by the clock
    before_kernels = child("before_kernels", hold_at="copy Kernel")
    before_swap = child("before_swap", hold_at="replace")
    timed = child("timed")
    time.sleep(max(0.0, timed.wait_for_staging() + 0.3 - time.monotonic()))
    assert timed.kill(), "the ingest finished within 0.3 s of starting to load"
    one_run.assert_unchanged(timed.db)

    before_kernels.wait_for_line("copy Kernel")  # Op and Runtime are loaded in staging
    assert before_kernels.kill()
    one_run.assert_unchanged(before_kernels.db)

    before_swap.wait_for_line("replace")  # staging is complete and checkpointed
    assert before_swap.kill()
    one_run.assert_unchanged(before_swap.db)

    # a killed writer leaves its staging file; the next writer removes it and commits
    assert before_swap.staging.exists()
    ingest([trace(MULTI_STREAM)], before_swap.db, IngestOptions(run="after"))
    assert staging_files(before_swap.db) == []
    with GraphStore(before_swap.db) as store:
        assert run_names(store) == ["after", "base"]
        base_ops = "MATCH (n:Op) WHERE n.run = 'base' RETURN count(*) AS n"
        assert rows(store, base_ops) == [{"n": one_run.counts["Op"]}]
        assert archive_folders(before_swap.db, store) == {"after", "base"}
    # the killed ingests' folders are gone: only the two runs' remain
    assert len(list(archive.archive_root(before_swap.db).iterdir())) == 2


def _failed_checkpoint(db: Path) -> None:
    """What a CHECKPOINT on a read-only connection leaves (Kuzu 0.11.3): .wal and .shadow."""
    import kuzu

    database = kuzu.Database(str(db), read_only=True)
    connection = kuzu.Connection(database)
    with pytest.raises(RuntimeError):
        connection.execute("CHECKPOINT")
    connection.close()
    database.close()


@needs_traces
def test_a_writer_refuses_stale_recovery_files_and_leaves_everything_as_it_was(
    one_run: Snapshot, tmp_path: Path
):
    db = one_run.copy_to(tmp_path)
    _failed_checkpoint(db)
    assert sorted(p.name for p in recovery_files(db)) == ["graph.kuzu.shadow", "graph.kuzu.wal"]
    before = {p.name: p.read_bytes() for p in tmp_path.glob("graph.kuzu*") if p.is_file()}
    with pytest.raises(IngestError) as caught:
        ingest([trace(MULTI_STREAM)], db, IngestOptions(run="second"))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{db}: stale graph.kuzu.wal and ")
    assert "remove them" in message
    after = {p.name: p.read_bytes() for p in tmp_path.glob("graph.kuzu*") if p.is_file()}
    after.pop("graph.kuzu.lock", None)  # the writer's lock, empty
    assert after == before and not staging_files(db)
    for path in recovery_files(db):  # removed as the message says: all works again
        path.unlink()
    one_run.assert_unchanged(db)
    ingest([trace(MULTI_STREAM)], db, IngestOptions(run="second"))
    with GraphStore(db) as store:
        assert run_names(store) == ["base", "second"]


@needs_traces
def test_a_read_only_store_refuses_every_write_method_before_kuzu_sees_it(
    one_run: Snapshot, tmp_path: Path
):
    """On a read-only connection Kuzu 0.11.3 crashes on BEGIN TRANSACTION: never sent."""
    db = one_run.copy_to(tmp_path)
    with GraphStore(db) as store:
        writes = {
            "begin": store.begin,
            "commit": store.commit,
            "commit_and_pause": store.commit_and_pause,
            "create_schema": store.create_schema,
            "recreate_rel_table": lambda: store.recreate_rel_table("DEP"),
            "copy": lambda: store.copy("Run", store.run("MATCH (r:Run) RETURN r.*").table),
        }
        for name, write in writes.items():
            with pytest.raises(ReadOnlyStoreError, match="open read-only"):
                write()
            assert run_names(store) == ["base"], name
    one_run.assert_unchanged(db)


def test_waiting_for_a_writer_ends_when_it_lets_go_or_times_out(tmp_path: Path) -> None:
    from tracegraph.ingest.errors import DatabaseBusy
    from tracegraph.ingest.store import wait_for_writer

    db = tmp_path / "x.kuzu"
    told: list[bool] = []
    wait_for_writer(db, 0, lambda: told.append(True))  # no lock file: no writer
    with open(db.with_name(db.name + ".lock"), "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(DatabaseBusy, match="still writing it after 0 s"):
            wait_for_writer(db, 0.2, lambda: told.append(True))
        assert told == [True]
        threading.Timer(0.3, fcntl.flock, (held, fcntl.LOCK_UN)).start()
        start = time.monotonic()
        wait_for_writer(db, 60, lambda: told.append(True))
        assert 0.25 <= time.monotonic() - start < 30 and told == [True, True]
    wait_for_writer(db, 0, lambda: told.append(True))  # unlocked: at once, nothing said
    assert told == [True, True]
