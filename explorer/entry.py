"""The `tracegraph` command: sets up the process, then hands over to the CLI (`cli.main`).

Arrow reads its allocator's name once, when it is first imported: so it is chosen here, before
anything imports pyarrow. From the C heap (glibc's malloc), what an ingest frees goes back to
the system between its stages (`ingest.memory`); Arrow's default mimalloc keeps pages freed on
its compute threads. Set ARROW_DEFAULT_MEMORY_POOL to choose another; spawned ingest workers
inherit the choice. And the process never imports pandas, which it does not use
(`keep_pandas_out`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

ALLOCATOR_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"  # as `ingest.memory` (which imports pyarrow)


def choose_allocator() -> None:
    """Arrow allocates from the C heap unless the environment says otherwise (call before
    pyarrow is imported: later it has no effect)."""
    os.environ.setdefault(ALLOCATOR_VARIABLE, "system")


def keep_pandas_out() -> None:
    """The CLI never uses pandas, yet two of its dependencies import it (0.3 s, more than the
    rest of a report's imports): pyarrow at its first conversion of a list, to ask whether the
    list is a pandas object, and kuzu at each COPY of an Arrow table, to ask whether it is a
    DataFrame. pyarrow asks once and keeps the answer: it is asked while pandas cannot be
    imported. Then pandas is marked absent (None in sys.modules), which kuzu's
    `importlib.util.find_spec` reads as not installed. (Call after `choose_allocator`.)"""
    if "pandas" in sys.modules:
        return
    from tracegraph.ingest.worker_start import pandas_kept_out

    with pandas_kept_out():
        import pyarrow as pa

        pa.array([0])  # pyarrow's one question
    sys.modules["pandas"] = None  # type: ignore[assignment]


def main(argv: Sequence[str] | None = None) -> int:
    choose_allocator()
    if _uses_arrow(sys.argv[1:] if argv is None else argv):
        keep_pandas_out()
    from .cli import main as cli_main

    return cli_main(argv)


def _uses_arrow(argv: Sequence[str]) -> bool:
    """Whether the command line runs a command that reads or writes a database (and so imports
    pyarrow anyway): not help, the version or the list of canned queries."""
    if any(a in ("-h", "--help", "--version") for a in argv):
        return False
    command = next((a for a in argv if not a.startswith("-")), None)
    return command is not None and command != "queries"
