"""Within an ingest Arrow allocates from the C heap, and the pool the caller had comes back;
within a load, a large block freed goes back to the system at once."""

from __future__ import annotations

import ctypes.util

import pyarrow as pa
import pytest

from tracegraph.ingest.memory import mapped_blocks, release_freed, returning_memory

glibc = pytest.mark.skipif(
    ctypes.util.find_library("c") is None or not hasattr(ctypes.CDLL("libc.so.6"), "mallopt"),
    reason="glibc only",
)


@glibc
def test_returning_memory_allocates_from_the_c_heap_and_restores_the_pool() -> None:
    before = pa.default_memory_pool().backend_name
    with returning_memory():
        assert pa.default_memory_pool().backend_name == "system"
        column = pa.array(range(1 << 18))  # a MiB or more: mapped on its own, freed at once
        assert column.nbytes >= 1 << 20
        del column
        release_freed()
    assert pa.default_memory_pool().backend_name == before


@glibc
def test_the_caller_gets_its_pool_back_after_an_error() -> None:
    before = pa.default_memory_pool().backend_name
    with pytest.raises(KeyError), returning_memory():
        raise KeyError("x")
    assert pa.default_memory_pool().backend_name == before


@glibc
def test_blocks_freed_within_mapped_blocks_leave_the_process_at_once() -> None:
    """Blocks of a few MiB between others still held: from the heap (as glibc serves them once
    its threshold has risen) they stay resident when freed; within mapped_blocks they go."""
    import numpy as np

    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    with mapped_blocks():
        blocks, pins = [], []
        for _ in range(16):
            blocks.append(np.ones(4 << 20, np.uint8))  # 4 MiB, touched
            pins.append(b"x" * (128 << 10))  # kept: the blocks are not the heap's top
        held = resident()
        del blocks
        assert held - resident() >= 60 << 20
