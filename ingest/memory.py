"""Handing freed memory back to the system between the stages of an ingest.

Arrow's allocator (mimalloc in the wheels) and glibc's heap both keep what was freed for reuse;
on a large rank a stage that moves one copy of it into another (reading it back, sorting it)
would leave the process resident at both copies for the rest of the ingest.
"""

from __future__ import annotations

import ctypes

import pyarrow as pa


def release_arrow() -> None:
    """Return the free pages of Arrow's memory pool to the system (cheap: between columns)."""
    pa.default_memory_pool().release_unused()


def release_freed() -> None:
    """Return the free pages of Arrow's memory pool and of the C heap to the system."""
    release_arrow()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
