"""Handing freed memory back to the system between the stages of an ingest.

An ingest moves a rank from one copy to the next (read back, sorted, cut into node tables,
loaded into Kuzu); its peak is how many copies are resident at once. Allocators keep what was
freed for reuse, so a copy already freed may still count. Within `returning_memory`, Arrow
allocates from the C heap (not its mimalloc pool, whose pages freed on Arrow's compute threads
stay with those threads), so that `release_freed` hands back what a stage freed; within
`mapped_blocks` (Kuzu's COPYs), large blocks are mapped on their own and go back when freed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pyarrow as pa

ColumnT = TypeVar("ColumnT", pa.Array, pa.ChunkedArray)
ALLOCATOR_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"  # read by Arrow when pyarrow is imported
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MAPPED_FROM = 1 << 20  # within `mapped_blocks`, blocks this large or larger are mapped apart
# glibc raises its threshold as large blocks are freed, up to this: what it is after a while
HEAP_UP_TO = 32 << 20
KEPT_TOP = 128 << 20  # a kept heap's free top goes back to the system past this


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018  (glibc: both exist)
        return libc
    except (OSError, AttributeError):  # not glibc
        return None


_switch = threading.Lock()
_within = 0  # ingests within `returning_memory` now (threads of one process)
_before: pa.MemoryPool | None = None


@contextmanager
def returning_memory() -> Iterator[None]:
    """Within: pyarrow's calls allocate from the C heap, unless ARROW_DEFAULT_MEMORY_POOL names
    the allocator (the `tracegraph` command sets it to the C heap's, `explorer.entry`, before
    pyarrow is imported: only then does Arrow's own C++ code use it too). The pool in use before
    comes back when the last ingest of the process leaves."""
    if _libc() is None or ALLOCATOR_VARIABLE in os.environ:
        yield
        return
    global _within, _before
    with _switch:
        if _within == 0:
            _before = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _within += 1
    try:
        yield
    finally:
        with _switch:
            _within -= 1
            if _within == 0 and _before is not None:
                pa.set_memory_pool(_before)
                _before = None


@contextmanager
def mapped_blocks() -> Iterator[None]:
    """Within (on glibc): blocks of MAPPED_FROM bytes or more get mappings of their own, so a
    block freed goes back to the system at once. Costly where blocks come and go quickly (a
    fresh mapping is zeroed page by page): only for a stage whose peak matters.

    After it, glibc's threshold stays at HEAP_UP_TO (the ceiling its own rule raises it to) for
    the rest of the process. Where MALLOC_MMAP_THRESHOLD_ is set, glibc does as it says."""
    libc = _libc()
    if libc is None or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MAPPED_FROM)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, HEAP_UP_TO)
        libc.malloc_trim(0)


def keeping_freed_heap() -> None:
    """For the rest of this process (on glibc): what is freed stays in the heap for the next
    allocation, blocks up to HEAP_UP_TO come from the heap, and the heap's free top goes back
    to the system only past KEPT_TOP. For a process that allocates and frees about the same
    sizes over and over, a summary worker rank after rank: by its own rules glibc trims and
    maps afresh, and each rank faulted its memory in again (~0.5 ms of a 0.7 MB rank's ~20).
    Its resident memory stays near that of its largest rank. Where MALLOC_MMAP_THRESHOLD_ or
    MALLOC_TRIM_THRESHOLD_ is set, glibc does as it says."""
    libc = _libc()
    if libc is None or {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & set(os.environ):
        return
    libc.mallopt(_M_MMAP_THRESHOLD, HEAP_UP_TO)
    libc.mallopt(_M_TRIM_THRESHOLD, KEPT_TOP)


def release_arrow() -> None:
    """Return the free pages of Arrow's memory pool to the system."""
    pa.default_memory_pool().release_unused()


# From the C heap a hand-back is a malloc_trim, which walks the heap (~1-2 ms): per column of a
# small rank it cost more time than the memory it returned was worth.
RELEASE_EVERY = 16 << 20


class Releases:
    """For a loop that frees as it goes (a table moved a column at a time): what it freed goes
    back to the system each time RELEASE_EVERY bytes have been freed since the last time."""

    def __init__(self, every: int = RELEASE_EVERY) -> None:
        self.every = every
        self.pending = 0

    def freed(self, nbytes: int) -> None:
        self.pending += nbytes
        if self.pending >= self.every:
            self.flush()

    def flush(self) -> None:
        """Hand back what is pending (at the loop's end: what its last steps freed)."""
        if self.pending:
            self.pending = 0
            release_arrow()


def move_columns(
    handover: list[pa.Table], move: Callable[[pa.ChunkedArray], ColumnT]
) -> dict[str, ColumnT]:
    """Each column of the table handed over (the list holds the only reference, and is emptied)
    passed through `move` (a sort, a take), the source column dropped as soon as it is moved:
    peak memory stays near one copy of the table, not two."""
    table = handover.pop()
    moved: dict[str, ColumnT] = {}
    releases = Releases()  # else the allocator keeps the moved columns: two copies resident
    for name in table.column_names:
        column = table[name]
        moved[name] = move(column)
        nbytes = column.nbytes
        del column
        table = table.drop_columns([name])
        releases.freed(nbytes)
    releases.flush()
    return moved


def release_freed() -> None:
    """Return the free pages of Arrow's memory pool and of the C heap to the system."""
    release_arrow()  # from the C heap, this trims it already
    libc = _libc()
    if libc is not None and pa.default_memory_pool().backend_name != "system":
        libc.malloc_trim(0)
