"""The `tracegraph` command: sets up the process, then hands over to the CLI (`cli.main`).

Arrow reads its allocator's name once, when it is first imported: so it is chosen here, before
anything imports pyarrow. From the C heap (glibc's malloc), what an ingest frees goes back to
the system between its stages (`ingest.memory`); Arrow's default mimalloc keeps pages freed on
its compute threads. Set ARROW_DEFAULT_MEMORY_POOL to choose another; spawned ingest workers
inherit the choice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

ALLOCATOR_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"  # as `ingest.memory` (which imports pyarrow)


def choose_allocator() -> None:
    """Arrow allocates from the C heap unless the environment says otherwise (call before
    pyarrow is imported: later it has no effect)."""
    os.environ.setdefault(ALLOCATOR_VARIABLE, "system")


def main(argv: Sequence[str] | None = None) -> int:
    choose_allocator()
    from .cli import main as cli_main

    return cli_main(argv)
