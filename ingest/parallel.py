"""An ingest's per-file work on a pool of worker processes (`ingest --jobs N`).

Each worker parses one trace file, prepares its ranks (`prepare.prepare_rank`: node and edge
tables, steps), writes their archive rows into the run's partial archive folder itself and
writes the node and edge tables as load files into the load batch's folder where the main
process has one (a large ingest: `batch`), else sends them back as Arrow IPC bytes; the main
process takes the ranks in file order and loads them in its one transaction, so the database
and its errors are the same as with one process. (Pickled as they were, the tables cost more
to send than to compute: a sliced table pickles its whole parent, and the archive rows are a
third of a rank.)
`jobs` files are being prepared while the main process loads one more, so memory holds about
twice that many files' ranks (those being prepared, those prepared and waiting), not the
job's. A summary's files go in tasks of several (`FileBatches`): their outcomes are kilobytes.
A large file (over the block-reading size, `read.STREAM_BYTES`) that turns out to hold
several ranks is handed back and prepared in the main process rank by rank, as without
workers: a worker would hold all of its ranks at once.

Workers are started fresh (`spawn`: the main process holds an open Kuzu database, which a forked
child must not inherit) without the main script (they need none of it, and a script without
an `if __name__ == "__main__"` guard would run again in each); on Linux they die with the main
process (see `lifeline`), and a failure or interrupt terminates them at once.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import pickle
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from .archive import is_partial_of, write_rank
from .batch import write_load_files
from .errors import IngestError, TraceFormatError, TracegraphError
from .memory import returning_memory
from .parse import FlowRowsNeeded
from .parse_options import ParseOptions
from .prepare import PreparedRank, Summariser, prepare_rank
from .read import STREAM_BYTES, file_traces, not_a_trace, rank_traces
from .worker_start import start_worker

if TYPE_CHECKING:
    from pathlib import Path

    from .pipeline import FilesSeen, TraceFile

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FileOutcome:
    """A file's prepared ranks (packed: see `_pack`); or why it was passed over (a folder's
    JSON that is no trace); or `too_many` when it is a large file of several ranks, for the
    main process to read."""

    ranks: list[bytes]
    not_a_trace: str | None = None
    too_many: bool = False
    work_s: float = 0.0  # the worker's time on the file
    peak_rss_bytes: int = 0  # the worker process's peak resident memory so far


@dataclass(frozen=True)
class FileWork:
    """What preparing one file cost its worker (reported by `ingest`, for the fleet numbers)."""

    path: Path
    ranks: int
    work_s: float
    peak_rss_bytes: int


def prepare_file(
    path: Path,
    in_folder: bool,
    options: ParseOptions,
    run: str,
    run_idx: int,
    archive_dir: Path | None = None,
    archive_token: str | None = None,
    load_dir: Path | None = None,
    summarise: Summariser | None = None,
) -> FileOutcome:
    """Parse one file and prepare each of its ranks (in a worker), or with `summarise`
    summarise them (`prepare.summary_rank`). Where this worker sees the
    run's partial archive `archive_dir` (the folder whose writer's token is `archive_token`:
    this machine, or a disk shared with it), it writes each rank's archive rows there rather
    than send them back; with `load_dir` (a local pool's, on this machine), its node and edge
    tables as load files there. A summary reads the file without its flow events first, and
    again with them where it needs them or the read fails (which then fails as it would with
    them)."""
    with returning_memory():
        if summarise is not None and options.flow_rows:
            try:
                return _prepare_file(
                    path, in_folder, replace(options, flow_rows=False), run, run_idx,
                    archive_dir, archive_token, load_dir, summarise,
                )  # fmt: skip
            except (FlowRowsNeeded, TraceFormatError):
                pass
        return _prepare_file(
            path, in_folder, options, run, run_idx, archive_dir, archive_token, load_dir, summarise
        )


def _prepare_file(
    path: Path,
    in_folder: bool,
    options: ParseOptions,
    run: str,
    run_idx: int,
    archive_dir: Path | None,
    archive_token: str | None,
    load_dir: Path | None,
    summarise: Summariser | None,
) -> FileOutcome:
    started = time.perf_counter()
    keep_archive = None
    if archive_dir is not None and is_partial_of(archive_dir, archive_token or ""):
        keep_archive = functools.partial(write_rank, archive_dir)
    limit = STREAM_BYTES if options.stream_bytes is None else options.stream_bytes
    traces = rank_traces(path, options)
    ranks: list[bytes] = []
    try:
        for trace in traces:
            if ranks and json_size(path) > limit:
                return FileOutcome([], too_many=True)
            held = [trace]
            del trace  # prepare_rank holds the only reference: the rank is not held twice
            prepared = prepare_rank(held.pop(), run, run_idx, keep_archive, summarise)
            if load_dir is not None and summarise is None:
                prefix = f"{os.getpid()}-{uuid.uuid4().hex}"
                files = write_load_files(
                    load_dir, prefix, prepared.node_tables, prepared.edge_tables
                )
                prepared = replace(
                    prepared,
                    node_tables=_emptied(prepared.node_tables),
                    edge_tables=_emptied(prepared.edge_tables),  # its labels say what it has
                    load_files=files,
                )
            ranks.append(_pack(prepared))
            del prepared
    except TraceFormatError:
        why = not_a_trace(path) if in_folder and not ranks else None
        if why is None:
            raise
        return FileOutcome([], why)
    finally:
        traces.close()
    return FileOutcome(ranks, work_s=time.perf_counter() - started, peak_rss_bytes=_peak_rss())


def prepare_files(
    jobs: list[tuple[object, ...]],
) -> list[FileOutcome | TracegraphError]:
    """`prepare_file` of several files in one task (a summary's small files on Ray: a task per
    file costs the driver more than the summary), each file's own error in its place."""
    out: list[FileOutcome | TracegraphError] = []
    for args in jobs:
        try:
            out.append(prepare_file(*args))  # type: ignore[arg-type]
        except TracegraphError as exc:
            out.append(exc)
    return out


# A summary's files go to local workers in tasks of a few files (`FileBatches`): their outcomes
# are kilobytes, and the main process's cost is per task (its submission, its result, a wake-up);
# more files a task would leave a worker idle longer at the end (0.45 s a task of 16 here)
LOCAL_BATCH_FILES = 4
BATCH_BYTES = 64 << 20


@dataclass(frozen=True)
class InBatch:
    """A file's place in a batch task."""

    batch: int
    index: int


class FileBatches:
    """Files gathered into tasks of up to `files` files and BATCH_BYTES of JSON, each sent by
    `send` (a list of `prepare_file` arguments → the task's handle) and its outcomes taken by
    `fetch` (handle → `prepare_files`' list) once, then handed out file by file."""

    def __init__(
        self,
        send: Callable[[list[tuple[object, ...]]], object],
        fetch: Callable[[object], list[FileOutcome | TracegraphError]],
        files: int,
    ) -> None:
        self.send, self.fetch, self.files = send, fetch, files
        self.pending: list[tuple[object, ...]] = []  # the batch being gathered
        self.pending_bytes = 0
        self.sent = 0  # batches sent so far
        self.batches: dict[int, object] = {}  # a sent batch's handle, until its files are taken
        self.outcomes: dict[int, list[FileOutcome | TracegraphError]] = {}  # until taken
        self.left: dict[int, int] = {}  # a batch's outcomes not yet taken

    def add(self, args: tuple[object, ...], path: Path) -> InBatch:
        """Gather one file's task arguments; the batch goes once full."""
        handle = InBatch(self.sent, len(self.pending))
        self.pending.append(args)
        try:
            self.pending_bytes += json_size(path)
        except OSError:
            pass  # its task says why
        if len(self.pending) >= self.files or self.pending_bytes >= BATCH_BYTES:
            self.flush()
        return handle

    def flush(self) -> None:
        """Send the batch gathered so far."""
        if self.pending:
            self.batches[self.sent] = self.send(self.pending)
            self.left[self.sent] = len(self.pending)
            self.sent += 1
            self.pending, self.pending_bytes = [], 0

    def result(self, handle: InBatch) -> FileOutcome:
        """The file's outcome (its error raised as itself)."""
        if handle.batch == self.sent:
            self.flush()  # the last, short batch
        if handle.batch not in self.outcomes:
            self.outcomes[handle.batch] = self.fetch(self.batches.pop(handle.batch))
        outcome = self.outcomes[handle.batch][handle.index]
        self.left[handle.batch] -= 1
        if not self.left[handle.batch]:
            del self.outcomes[handle.batch], self.left[handle.batch]
        if isinstance(outcome, TracegraphError):
            raise outcome
        assert isinstance(outcome, FileOutcome)
        return outcome


def _emptied(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    return {label: t.schema.empty_table() for label, t in tables.items()}


def _peak_rss() -> int:
    """This process's peak resident memory in bytes (ru_maxrss is KiB on Linux)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _pack(prepared: PreparedRank) -> bytes:
    """The rank as bytes: its tables as Arrow IPC streams (which hold only a sliced table's
    own rows; pickling a slice sends its whole parent), the rest (a summary rank's facts, rows
    of a few kilobytes, among them) pickled around them."""
    tables: dict[str, bytes] = {}

    def ipc(key: str, table: pa.Table) -> str:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as stream:
            stream.write_table(table)
        tables[key] = sink.getvalue().to_pybytes()
        return key

    shell = replace(
        prepared,
        node_tables={k: ipc(f"node:{k}", t) for k, t in prepared.node_tables.items()},  # type: ignore[misc]
        edge_tables={k: ipc(f"edge:{k}", t) for k, t in prepared.edge_tables.items()},  # type: ignore[misc]
        participants=ipc("participants", prepared.participants),  # type: ignore[arg-type]
        steps=ipc("steps", prepared.steps),  # type: ignore[arg-type]
        archive_rows=ipc("archive", prepared.archive_rows),  # type: ignore[arg-type]
    )
    return pickle.dumps((shell, tables), protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(packed: bytes) -> PreparedRank:
    shell, tables = pickle.loads(packed)

    def table(key: str) -> pa.Table:
        return pa.ipc.open_stream(pa.py_buffer(tables[key])).read_all()

    return replace(
        shell,
        node_tables={k: table(v) for k, v in shell.node_tables.items()},
        edge_tables={k: table(v) for k, v in shell.edge_tables.items()},
        participants=table(shell.participants),
        steps=table(shell.steps),
        archive_rows=table(shell.archive_rows),
    )


def json_size(path: Path) -> int:
    """The file's size, or for a gzipped one a lower bound of its JSON (4 × its size)."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        size = f.seek(0, 2)
    return size * 4 if gzipped else size


class WorkerLost(Exception):
    """A worker died (or its node left) while it prepared a file; the message says why."""


class FilePool(Protocol):
    """Where files are prepared: `slots` of them at once (a local process pool, or Ray)."""

    slots: int
    summarise: Summariser | None  # summary tier: the ranks summarised (`prepare.Summariser`)

    def submit(self, source: TraceFile, options: ParseOptions, run: str, run_idx: int) -> object:
        """Start preparing `source`; a handle for `result`."""
        ...

    def result(self, handle: object) -> FileOutcome:
        """The file's outcome (a worker's error raised as itself)."""
        ...

    def close(self, failed: bool) -> None:
        """Release the workers; on a failure, stop them now rather than at their end."""
        ...


@dataclass(frozen=True)
class LocalWorkers:
    """Spawned worker processes, started before there is work for them (`start_local_workers`);
    a `ProcessFilePool` feeds and closes them."""

    executor: ProcessPoolExecutor
    jobs: int

    def terminate(self) -> None:
        """End them now (the ingest failed before a pool took them over)."""
        _terminate(self.executor)


def start_local_workers(jobs: int, summarise: Summariser | None = None) -> LocalWorkers:
    """`jobs` worker processes, started at once: each imports what it will run (the parse, and
    with `summarise` its module) while this process opens the database, ~0.3 s of a worker's
    start that an ingest no longer waits for."""
    with _main_hidden():
        executor = ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=start_worker,
            initargs=(os.getpid(), summarise is not None),
        )
        for _ in range(jobs):  # a worker is spawned per task while none is idle
            executor.submit(_ready, summarise)
    return LocalWorkers(executor, jobs)


def _ready(summarise: Summariser | None) -> None:
    """A worker's first task, which does nothing: unpickled, it imported this module and the
    summariser's."""


class ProcessFilePool:
    """Spawned local worker processes (`start_local_workers`) that write their ranks' archive
    rows themselves (and their load files, given the load batch's folder `load_dir`)."""

    def __init__(
        self,
        workers: LocalWorkers,
        archive_dir: Path,
        archive_token: str,
        load_dir: Path | None = None,
        summarise: Summariser | None = None,
    ) -> None:
        self.slots = workers.jobs
        self.summarise = summarise
        self.archive = (archive_dir, archive_token)
        self.load_dir = load_dir
        self.pool = workers.executor
        # a summary's files go in batches (`FileBatches`), a batch more than the workers
        self.batches: FileBatches | None = None
        if summarise is not None:
            self.batches = FileBatches(self._send, self._get, LOCAL_BATCH_FILES)
            self.slots = (workers.jobs + 1) * LOCAL_BATCH_FILES

    def submit(self, source: TraceFile, options: ParseOptions, run: str, run_idx: int) -> object:
        args = (source.path, source.folder is not None, options, run, run_idx, *self.archive,
                self.load_dir, self.summarise)  # fmt: skip
        if self.batches is not None:
            return self.batches.add(args, source.path)
        with _main_hidden():  # workers start on demand
            return self.pool.submit(prepare_file, *args)

    def _send(self, jobs: list[tuple[object, ...]]) -> Future[list[FileOutcome | TracegraphError]]:
        with _main_hidden():
            return self.pool.submit(prepare_files, jobs)

    def result(self, handle: object) -> FileOutcome:
        if isinstance(handle, InBatch):
            assert self.batches is not None
            return self.batches.result(handle)
        return self._get(handle)

    @staticmethod
    def _get(handle: object) -> Any:
        assert isinstance(handle, Future)
        try:
            return handle.result()
        except BrokenProcessPool as exc:
            raise WorkerLost(
                "a worker process died while files were prepared (out of memory? try fewer --jobs)"
            ) from exc

    def close(self, failed: bool) -> None:
        if failed:
            _terminate(self.pool)
        else:
            self.pool.shutdown(wait=True)


def prepare_in_parallel(
    found: list[TraceFile],
    options: ParseOptions,
    run: str,
    run_idx: int,
    pool: FilePool,
    seen: FilesSeen,
    report: Progress,
    work: list[FileWork] | None = None,
    keep_going: bool = False,
) -> Generator[PreparedRank, None, None]:
    """The prepared ranks of every file, in file order, `pool.slots` files being prepared
    beyond the one loaded (see the module docstring); each file's worker time and memory
    appended to `work`; with `keep_going`, a file that is no readable trace reported to `seen`
    and passed over."""
    handles = _ahead(pool, found, options, run, run_idx)
    done = False
    try:
        for i, (source, handle) in enumerate(zip(found, handles, strict=True)):
            report("ingest", i, len(found))
            try:
                outcome = pool.result(handle)
            except WorkerLost as exc:
                raise IngestError(f"{source.path}: {exc}") from exc.__cause__
            except TraceFormatError as exc:
                if not keep_going:
                    raise
                seen.failed(source, exc.reason)
                continue
            if outcome.too_many:  # a large file of several ranks: here, rank by rank
                yield from _in_process(source, options, run, run_idx, seen, pool.summarise)
                continue
            if outcome.not_a_trace is not None:
                seen.skip(source, outcome.not_a_trace)
                continue
            seen.parsed(source)
            if work is not None:
                work.append(FileWork(source.path, len(outcome.ranks), outcome.work_s,
                                     outcome.peak_rss_bytes))  # fmt: skip
            ranks = outcome.ranks
            del outcome
            while ranks:
                handover = [_unpack(ranks.pop(0))]  # not held here while the consumer loads it
                seen.rank(source, handover[0].rank)
                yield handover.pop()
        done = True
    finally:
        pool.close(failed=not done)
    seen.finish(found)
    report("ingest", len(found), len(found))


def _ahead(
    pool: FilePool, found: list[TraceFile], options: ParseOptions, run: str, run_idx: int
) -> Iterator[object]:
    """Each file's handle in file order, `pool.slots` files submitted beyond the one taken: while
    this process loads a file's ranks, every worker is already on a later file."""
    pending: deque[object] = deque()
    for source in found:
        pending.append(pool.submit(source, options, run, run_idx))
        if len(pending) > pool.slots:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


def _terminate(pool: ProcessPoolExecutor) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


@contextmanager
def _main_hidden() -> Iterator[None]:
    """While workers start: no main module for them to import (see the module docstring)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: getattr(main, k) for k in ("__file__", "__spec__") if hasattr(main, k)}
    for key in saved:
        if key == "__spec__":
            main.__spec__ = None
        else:
            delattr(main, key)
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(main, key, value)


def _in_process(
    source: TraceFile,
    options: ParseOptions,
    run: str,
    run_idx: int,
    seen: FilesSeen,
    summarise: Summariser | None,
) -> Generator[PreparedRank, None, None]:
    traces = file_traces(source, options, seen)
    try:
        while (following := next(traces, None)) is not None:
            held = [following]
            del following
            yield prepare_rank(held.pop(), run, run_idx, None, summarise)  # the only reference
    finally:
        traces.close()
