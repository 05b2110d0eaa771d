"""An ingest's per-file work on a pool of worker processes (`ingest --jobs N`).

Each worker parses one trace file and prepares its ranks (`prepare.prepare_rank`: node and
edge tables, steps, archive rows); the main process takes the results in file order and loads
them in its one transaction, so the database and its errors are the same as with one process.
At most `jobs + 1` files are in flight, so memory holds a few files' ranks, not the job's. A
file read in blocks (over `read.STREAM_BYTES`) is prepared in the main process, rank by rank,
as without workers: a worker would hold all of its ranks at once.

Workers are started fresh (`spawn`): the main process holds an open Kuzu database, which a
forked child must not inherit.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import IngestError, TraceFormatError
from .parse import ParseOptions
from .prepare import PreparedRank, prepare_rank
from .read import STREAM_BYTES, not_a_trace, rank_traces

if TYPE_CHECKING:
    from pathlib import Path

    from .pipeline import _Files, _Source

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FileOutcome:
    """A file's prepared ranks, or why it was passed over (a folder's JSON that is no trace)."""

    ranks: list[PreparedRank]
    not_a_trace: str | None = None


def prepare_file(
    path: Path, in_folder: bool, options: ParseOptions, run: str, run_idx: int
) -> FileOutcome:
    """Parse one file and prepare each of its ranks (in a worker)."""
    traces = rank_traces(path, options)
    try:
        ranks = [prepare_rank(trace, run, run_idx) for trace in traces]
    except TraceFormatError:
        why = not_a_trace(path) if in_folder else None
        if why is None:
            raise
        return FileOutcome([], why)
    finally:
        traces.close()
    return FileOutcome(ranks)


def prepare_in_parallel(
    found: list[_Source],
    options: ParseOptions,
    run: str,
    run_idx: int,
    jobs: int,
    seen: _Files,
    report: Progress,
) -> Generator[PreparedRank, None, None]:
    """The prepared ranks of every file, in file order (see the module docstring)."""
    context = multiprocessing.get_context("spawn")
    with _importable_main(), ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        pending: deque[tuple[int, Future[FileOutcome] | None]] = deque()
        following = 0
        try:
            for i, source in enumerate(found):
                while following < len(found) and len(pending) <= jobs:
                    pending.append((following, _submit(pool, found[following], options, run,
                                                       run_idx)))  # fmt: skip
                    following += 1
                index, future = pending.popleft()
                assert index == i
                report("ingest", i, len(found))
                if future is None:  # read in blocks: here, rank by rank
                    yield from _in_process(source, options, run, run_idx, seen)
                    continue
                try:
                    outcome = future.result()
                except BrokenProcessPool as exc:
                    raise IngestError(
                        f"{source.path}: a worker process died preparing it (out of memory? "
                        "try fewer --jobs)"
                    ) from exc
                if outcome.not_a_trace is not None:
                    seen.skip(source, outcome.not_a_trace)
                    continue
                seen.parsed(source)
                ranks = outcome.ranks
                del outcome
                while ranks:
                    prepared = ranks.pop(0)
                    seen.rank(source, prepared.rank)
                    yield prepared
                    del prepared
        finally:
            for _, future in pending:
                if future is not None:
                    future.cancel()
    seen.finish(found)
    report("ingest", len(found), len(found))


@contextmanager
def _importable_main() -> Iterator[None]:
    """Spawned workers re-import the main script; one that cannot be (`python -` reading
    stdin, `python -c`) is hidden from them while the pool lives: they need none of it."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _submit(
    pool: ProcessPoolExecutor, source: _Source, options: ParseOptions, run: str, run_idx: int
) -> Future[FileOutcome] | None:
    limit = STREAM_BYTES if options.stream_bytes is None else options.stream_bytes
    try:
        size = os.path.getsize(source.path)
        with open(source.path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
    except OSError:
        size, gzipped = 0, False  # the worker says what is wrong with it
    if size > (limit // 16 if gzipped else limit):  # gzip holds ~10x its size of JSON
        return None
    return pool.submit(prepare_file, source.path, source.folder is not None, options, run,
                       run_idx)  # fmt: skip


def _in_process(
    source: _Source, options: ParseOptions, run: str, run_idx: int, seen: _Files
) -> Generator[PreparedRank, None, None]:
    traces = rank_traces(source.path, options)
    try:
        try:
            first = next(traces)
        except TraceFormatError:
            why = not_a_trace(source.path) if source.folder is not None else None
            if why is None:
                raise
            seen.skip(source, why)
            return
        seen.parsed(source)
        held = [first]
        del first
        while held:
            seen.rank(source, held[0].rank)
            yield prepare_rank(held.pop(), run, run_idx)  # it holds the only reference
            following = next(traces, None)
            if following is not None:
                held.append(following)
            del following
    finally:
        traces.close()
