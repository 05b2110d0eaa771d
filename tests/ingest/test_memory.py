"""Within an ingest Arrow allocates from the C heap, and the pool the caller had comes back;
within a load, a large block freed goes back to the system at once."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from tracegraph.ingest import memory
from tracegraph.ingest.memory import (
    ALLOCATOR_VARIABLE,
    release_freed,
    returning_memory,
)

glibc = pytest.mark.skipif(
    ctypes.util.find_library("c") is None or not hasattr(ctypes.CDLL("libc.so.6"), "mallopt"),
    reason="glibc only",
)


@pytest.fixture
def callers_pool(monkeypatch: pytest.MonkeyPatch) -> str:
    """The pool pyarrow uses here, with no allocator named in the environment."""
    monkeypatch.delenv(ALLOCATOR_VARIABLE, raising=False)
    return pa.default_memory_pool().backend_name


@glibc
def test_returning_memory_allocates_from_the_c_heap_and_restores_the_pool(
    callers_pool: str,
) -> None:
    before = callers_pool
    with returning_memory():
        assert pa.default_memory_pool().backend_name == "system"
        column = pa.array(range(1 << 18))  # a MiB or more, from the C heap
        assert column.nbytes >= 1 << 20
        del column
        release_freed()
    assert pa.default_memory_pool().backend_name == before


@glibc
def test_the_caller_gets_its_pool_back_after_an_error(callers_pool: str) -> None:
    before = callers_pool
    with pytest.raises(KeyError), returning_memory():
        raise KeyError("x")
    assert pa.default_memory_pool().backend_name == before


@glibc
def test_the_pool_comes_back_when_the_last_of_two_overlapping_ingests_leaves(
    callers_pool: str,
) -> None:
    before = callers_pool
    first, second = returning_memory(), returning_memory()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start leaves first: the second is still in
    assert pa.default_memory_pool().backend_name == "system"
    second.__exit__(None, None, None)
    assert pa.default_memory_pool().backend_name == before


@glibc
def test_an_allocator_the_environment_names_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOCATOR_VARIABLE, "mimalloc")
    before = pa.default_memory_pool().backend_name
    if before == "system":
        pytest.skip("pyarrow here allocates from the C heap already")
    with returning_memory():
        assert pa.default_memory_pool().backend_name == before


# In a process of its own: in the test run's, other threads' allocations move its RSS.
FREED_MIB = """
import sys
import numpy as np
from contextlib import nullcontext
from tracegraph.ingest.memory import mapped_blocks

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

risen = np.ones(16 << 20, np.uint8)  # a large mapped block freed: glibc's threshold rises
del risen
with mapped_blocks() if sys.argv[1] == "mapped" else nullcontext():
    blocks, pins = [], []
    for _ in range(16):
        blocks.append(np.ones(4 << 20, np.uint8))  # 4 MiB, touched
        pins.append(b"x" * (128 << 10))  # kept: the blocks are not the heap's top
    held = resident()
    del blocks
    print((held - resident()) >> 20)
"""


@glibc
def test_blocks_freed_within_mapped_blocks_leave_the_process_at_once() -> None:
    """Blocks of a few MiB between others still held: from the heap (as glibc serves them once
    its threshold has risen) they stay resident when freed; within mapped_blocks they go."""

    def freed_mib(mode: str) -> int:
        env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
        done = subprocess.run(
            [sys.executable, "-c", FREED_MIB, mode], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    assert freed_mib("mapped") >= 60
    assert freed_mib("heap") <= 8


def test_a_loop_hands_back_once_enough_has_been_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    handed_back: list[int] = []
    releases = memory.Releases(every=10)
    monkeypatch.setattr(memory, "release_arrow", lambda: handed_back.append(1))
    for freed, calls in ((4, 0), (5, 0), (1, 1), (9, 1), (30, 2)):
        releases.freed(freed)
        assert len(handed_back) == calls, (freed, calls)
    assert releases.pending == 0
