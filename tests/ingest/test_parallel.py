"""`ingest --jobs N`: files parsed and prepared by worker processes give the same database, the
same archive and the same errors as one process."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_merged, write_per_rank
from tracegraph.ingest import archive, parallel
from tracegraph.ingest.errors import TraceFormatError
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ..conftest import TRACES, dump, needs_traces


def archived(db: Path) -> dict[str, object]:
    root = archive.archive_root(db)
    (folder,) = list(root.iterdir())
    return {p.name: pq.read_table(p) for p in sorted(folder.glob("rank-*.parquet"))}


def both(paths: list[Path], tmp_path: Path, **options: object) -> tuple[Path, Path]:
    dbs = []
    for jobs in (1, 2):
        db = tmp_path / f"jobs{jobs}.kuzu"
        ingest(paths, db, IngestOptions(run="job", jobs=jobs, **options))  # type: ignore[arg-type]
        dbs.append(db)
    return dbs[0], dbs[1]


def test_workers_give_the_database_one_process_gives(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=4, steps=2, layers=2, python_stacks=True, annotate=True)
    folder = tmp_path / "traces"
    files = write_per_rank(config, folder)
    gzipped = folder / "rank3.trace.json.gz"  # one file gzipped, as captures mix them
    gzipped.write_bytes(gzip.compress(files[3].read_bytes()))
    files[3].unlink()
    one, two = both([folder], tmp_path)
    want_db = dump(one)
    assert len(want_db["Kernel"]) > 100 and len(want_db["CALLS Op->Op"]) > 100
    assert dump(two) == want_db
    got, want = archived(two), archived(one)
    assert got.keys() == want.keys() and all(got[k].equals(want[k]) for k in want)


@needs_traces
def test_workers_give_the_same_database_on_real_traces(tmp_path: Path) -> None:
    for name in ("cpu_ddp_2r", "hta/trace_filter"):
        copy = tmp_path / name.replace("/", "_")
        one, two = both([TRACES / name], copy)
        assert dump(one) == dump(two), name


@needs_traces
def test_workers_that_write_the_load_files_give_the_database_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large ingest: each worker writes its ranks' node and edge tables as load files into
    the batch's folder and sends none back; the database, its edge counts and the archive are
    those of one process holding its tables in memory, and no file is left."""
    from tracegraph.ingest import pipeline
    from tracegraph.ingest.store import GraphStore

    loaded: list[str] = []
    copy_files = GraphStore.copy_files

    def counted(store: GraphStore, label: str, paths: list[Path], pair: object = None) -> None:
        loaded.extend(p.name for p in paths)
        copy_files(store, label, paths, pair)  # type: ignore[arg-type]

    for name in ("cpu_ddp_2r_faults", "hta/trace_filter"):
        held, files = tmp_path / name.replace("/", "_") / "held", tmp_path / name / "files"
        ingest([TRACES / name], held, IngestOptions(run="job", jobs=1))
        with monkeypatch.context() as m:
            m.setattr(pipeline, "LARGE_FROM_BYTES", 0)
            m.setattr(GraphStore, "copy_files", counted)
            ingest([TRACES / name], files, IngestOptions(run="job", jobs=2))
        assert loaded and not any(n.startswith("main-") for n in loaded), loaded  # workers'
        loaded.clear()
        assert dump(files) == dump(held), name
        with GraphStore(held) as a, GraphStore(files) as b:
            counts = "MATCH (r:Run) RETURN r.edge_counts"
            assert a.run(counts).table.to_pylist() == b.run(counts).table.to_pylist()
        got, want = archived(files), archived(held)
        assert got.keys() == want.keys() and all(got[k].equals(want[k]) for k in want)
        assert [p.name for p in files.parent.iterdir() if p.name.startswith(".")] == []


def test_a_file_read_in_blocks_is_prepared_here_beside_the_workers(tmp_path: Path) -> None:
    """A merged file above the block-reading size stays in this process; the per-rank files
    after it go to workers; ranks load in file order either way."""
    config = SyntheticConfig(ranks=2, steps=1, layers=1)
    merged = write_merged(config, tmp_path / "merged.json")
    extra = write_per_rank(SyntheticConfig(ranks=4, steps=1, layers=1), tmp_path / "more")[2:]
    parse = ParseOptions(stream_bytes=merged.stat().st_size - 1)
    one, two = both([merged, *extra], tmp_path, parse=parse)
    assert dump(one) == dump(two)


def test_errors_are_the_ones_one_process_gives(tmp_path: Path) -> None:
    job = tmp_path / "job"
    files = write_per_rank(SyntheticConfig(ranks=3, steps=1, layers=1), job)
    (job / "meta.json").write_text('{"world_size": 3}')  # JSON, no trace: skipped in a folder
    one, two = both([job], tmp_path)
    skipped = [(n, why) for n, why in ingest_skipped(job, tmp_path)]
    assert skipped == [("meta.json", "not a trace (no traceEvents)")] * 2
    assert dump(one) == dump(two)

    broken = tmp_path / "broken"
    shutil.copytree(job, broken)
    data = gzip.compress(files[1].read_bytes())
    (broken / files[1].name).unlink()
    (broken / "rank1.json.gz").write_bytes(data[: len(data) // 2])
    twice = tmp_path / "twice"
    twice.mkdir()
    shutil.copy(files[0], twice / "a.json")
    shutil.copy(files[0], twice / "b.json")
    for folder, says in ((broken, "gzip"), (twice, "rank 0 is also in")):
        errors = []
        for jobs in (1, 2):
            db = tmp_path / f"err-{folder.name}-{jobs}.kuzu"
            with pytest.raises(TraceFormatError) as caught:
                ingest([folder], db, IngestOptions(jobs=jobs))
            errors.append((caught.value.path, caught.value.reason))
            assert not db.exists()  # nothing half-written
        assert errors[0] == errors[1] and says in errors[0][1], errors


def ingest_skipped(job: Path, tmp_path: Path) -> list[tuple[str, str]]:
    out = []
    for jobs in (1, 2):
        result = ingest([job], tmp_path / f"skip{jobs}.kuzu", IngestOptions(jobs=jobs))
        out += [s for s in result.skipped if s[0] == "meta.json"]
    return out


def test_a_failure_stops_the_workers_at_once(tmp_path: Path) -> None:
    """The second file repeats rank 0: the ingest fails there, and no worker process is left
    parsing the files after it."""
    import multiprocessing

    folder = tmp_path / "job"
    files = write_per_rank(SyntheticConfig(ranks=6, steps=1, layers=8), folder)
    shutil.copy(files[0], folder / "rank1.trace.json")  # rank 0 again, second in order
    before = {p.pid for p in multiprocessing.active_children()}  # e.g. the suite's own pool
    with pytest.raises(TraceFormatError, match="rank 0 is also in"):
        ingest([folder], tmp_path / "x.kuzu", IngestOptions(jobs=2))
    assert {p.pid for p in multiprocessing.active_children()} - before == set()
    assert not (tmp_path / "x.kuzu").exists()


def test_a_worker_writes_archive_rows_only_where_it_sees_the_writers_folder(
    tmp_path: Path,
) -> None:
    """A worker on a machine that does not share the disk (here: a folder with another
    writer's token) sends the rows back; one that sees the folder writes them there."""
    from tracegraph.ingest.parallel import _unpack, prepare_file

    (file,) = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "t")
    folder = tmp_path / "partial"
    folder.mkdir()
    (folder / archive.WRITER).write_text("theirs")
    for token, writes in (("mine", False), ("theirs", True)):
        outcome = prepare_file(file, False, ParseOptions(), "r", 0, folder, token)
        (prepared,) = [_unpack(packed) for packed in outcome.ranks]
        assert prepared.archived is writes
        assert (prepared.archive_rows.num_rows == 0) is writes
        assert (folder / "rank-0.parquet").exists() is writes, token


def test_ray_without_the_extra_is_one_line_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tracegraph.ingest.errors import IngestError

    monkeypatch.setitem(sys.modules, "ray", None)  # as if tracegraph[ray] were not installed
    (file,) = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "t")
    db = tmp_path / "x.kuzu"
    with pytest.raises(IngestError, match=r"pip install 'tracegraph\[ray\]'"):
        ingest([file], db, IngestOptions(ray="auto"))
    assert not db.exists() and not archive.archive_root(db).exists()


class _CountingPool:
    """A pool that records what was submitted; its handles are the files' indices."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.submitted: list[str] = []

    def submit(self, source: object, options: object, run: str, run_idx: int) -> int:
        self.submitted.append(str(source))
        return len(self.submitted) - 1


def test_every_worker_has_a_file_while_one_is_loaded() -> None:
    """The file being loaded here is taken with `slots` more already submitted, so no worker
    idles while this process loads (before, the next file was submitted only after the load)."""
    files = [f"f{i}" for i in range(7)]
    pool = _CountingPool(slots=2)
    handles = parallel._ahead(pool, files, ParseOptions(), "run", 0)  # type: ignore[arg-type]
    taken = []
    for handle in handles:
        taken.append(handle)
        # while handle is loaded, the files after it up to `slots` are with the workers
        assert len(pool.submitted) == min(handle + 1 + pool.slots, len(files))
    assert taken == list(range(len(files)))
    assert pool.submitted == files


def session_processes(session: int) -> list[str]:
    """The command lines of the live processes of the session `session` (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except (OSError, ValueError):  # not a process, or it ended meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if fields[0] != b"Z" and int(fields[3]) == session:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace").strip())
    return found


def kill_mid_ingest(
    folder: Path, db: Path, options: list[str], ready: Callable[[list[str]], bool]
) -> int:
    """Start `tracegraph ingest` in a session of its own, kill -9 it once `ready(its session's
    command lines)`, while it still works; the session's id (its pid)."""
    cli = shutil.which("tracegraph", path=os.path.dirname(sys.executable))
    assert cli is not None
    args = [cli, "ingest", str(folder), "--db", str(db), *options]
    process = subprocess.Popen(args, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not ready(session_processes(process.pid)):
            assert process.poll() is None and time.monotonic() < deadline, "it ended first"
            time.sleep(0.01)
        assert process.poll() is None, "it ended first"
    finally:
        process.kill()
        process.wait()
    return process.pid


def survivors(session: int, within_s: float) -> list[str]:
    """The session's processes still alive `within_s` seconds after now (none: at once)."""
    deadline = time.monotonic() + within_s
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def kill_leaves_nothing(session: int, within_s: float) -> None:
    left = survivors(session, within_s)
    for_cleanup = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    for pid in for_cleanup if left else []:  # this test's own leftovers, so as not to leak
        try:
            if os.getsid(pid) == session:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert left == [], f"alive {within_s} s after the kill"


@pytest.mark.parametrize("after_s", [0.0, 0.5])
def test_a_killed_ingest_leaves_no_worker(after_s: float, tmp_path: Path) -> None:
    """kill -9 of `ingest --jobs 2` as its workers start (before their first task: the parent
    can die before a worker has asked to die with it) and mid-work: its workers (and
    multiprocessing's resource tracker) are gone within 1 s. The job is large enough that its
    ingest outlives `after_s` on a fast machine (8 ranks of 10 steps once ended within 1 s)."""
    folder = tmp_path / "job"
    write_per_rank(SyntheticConfig(ranks=16, steps=20, layers=8), folder)
    started: list[float] = []

    def workers_started(processes: list[str]) -> bool:
        if sum("spawn_main" in p for p in processes) < 2:
            return False
        started.append(started[0] if started else time.monotonic())
        return time.monotonic() >= started[0] + after_s

    session = kill_mid_ingest(folder, tmp_path / "x.kuzu", ["--jobs", "2"], workers_started)
    kill_leaves_nothing(session, within_s=1.0)


def test_a_summary_goes_in_batches_and_is_one_process_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summary's files go to the workers in tasks of several (3 here, over 7 files: the last
    task short): the same database and report as one process, and a bad file's own error in its
    place, passed over with keep_going as in one process."""
    from tracegraph import open as open_graph
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER

    monkeypatch.setattr(parallel, "LOCAL_BATCH_FILES", 3)
    sent: list[int] = []
    monkeypatch.setattr(parallel.FileBatches, "flush", _counting(parallel.FileBatches.flush, sent))
    job = tmp_path / "job"
    files = write_per_rank(SyntheticConfig(ranks=7, steps=2, layers=1), job)
    one, two = tmp_path / "one.kz", tmp_path / "two.kz"
    ingest([job], one, IngestOptions(run="job", jobs=1, summarise=SUMMARY_TIER))
    ingest([job], two, IngestOptions(run="job", jobs=2, summarise=SUMMARY_TIER))
    assert sent == [3, 3, 1]  # three tasks, the last short
    assert dump(two) == dump(one)
    assert open_graph(two).report().to_json() == open_graph(one).report().to_json()
    files[4].write_text(files[4].read_text()[:1000])  # cut short, in the second task
    kept = {}
    for jobs in (1, 2):
        options = IngestOptions(jobs=jobs, summarise=SUMMARY_TIER)
        with pytest.raises(TraceFormatError, match="rank4"):
            ingest([job], tmp_path / f"bad-{jobs}.kz", options)
        going = IngestOptions(jobs=jobs, summarise=SUMMARY_TIER, keep_going=True, run="job")
        kept[jobs] = ingest([job], tmp_path / f"kept-{jobs}.kz", going)
    assert [r.rank for r in kept[2].ranks] == [0, 1, 2, 3, 5, 6]
    assert kept[2].skipped == kept[1].skipped
    assert dump(tmp_path / "kept-2.kz") == dump(tmp_path / "kept-1.kz")


def _counting(flush: Callable[..., None], sent: list[int]) -> Callable[..., None]:
    """FileBatches.flush, noting the size of each batch it sends."""

    def counted(self: parallel.FileBatches) -> None:
        if self.pending:
            sent.append(len(self.pending))
        flush(self)

    return counted


@needs_traces
def test_a_summary_reads_the_flow_events_only_where_it_needs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summary worker reads a file without its flow events first, and again with them where a
    collective kernel has no call of its correlation (the launch is its flow's), the file is
    merged (each flow is given its rank) or the read fails: it sends what one read with them
    gives, and fails as that read fails."""
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER

    config = SyntheticConfig(ranks=2, steps=2, layers=1)
    plain = write_per_rank(config, tmp_path / "job")[1]
    cut = tmp_path / "cut.json"
    cut.write_text(plain.read_text()[:5000])
    read = parallel._prepare_file
    reads: list[bool] = []

    def spied(*args: object) -> parallel.FileOutcome:
        reads.append(args[2].flow_rows)  # type: ignore[attr-defined]
        return read(*args)  # type: ignore[arg-type]

    def summary(prepare: Callable[..., parallel.FileOutcome], path: Path) -> object:
        try:
            outcome = prepare(path, False, ParseOptions(), "r", 0, None, None, None, SUMMARY_TIER)
        except TraceFormatError as exc:
            return str(exc)
        ranks = [parallel._unpack(packed) for packed in outcome.ranks]
        return [(p.rank_row, p.facts, p.participants, p.steps, p.summary) for p in ranks]

    expected = {
        plain: [False],
        write_merged(config, tmp_path / "merged.json"): [False, True],
        TRACES / "hta/negative_queue_length_values_check/rank0.json.gz": [False, True],
        cut: [False, True],
    }
    monkeypatch.setattr(parallel, "_prepare_file", spied)
    for path, taken in expected.items():
        reads.clear()
        first = summary(parallel.prepare_file, path)
        assert reads == taken, path
        assert first == summary(read, path), path  # one read, with the flow rows
