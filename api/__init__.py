"""tracegraph: PyTorch profiler (Kineto) traces of distributed training as a graph database.

The front door for notebooks and scripts (the CLI and the TUI are built on the same calls)::

    import tracegraph

    g = tracegraph.open("run.kuzu")
    g.ingest("traces/", run="job42")
    g.edges("native", run="job42", all_steps=True)
    g.query("MATCH (k:Kernel) RETURN k.name AS name, k.dur AS ns LIMIT $n", n=5).to_pandas()

Every refusal is a `TracegraphError` whose message is one line naming the file and the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ingest.errors import TracegraphError

if TYPE_CHECKING:
    from .graph import Graph

__all__ = ["Graph", "TracegraphError", "__version__", "open"]


def open(path: str | Path) -> Graph:  # noqa: A001 (the verb users expect, as sqlite-utils' Database)
    """The tracegraph database at `path` (created by the first `ingest` if it does not exist)."""
    from .graph import Graph

    return Graph(path)


def __getattr__(name: str) -> Any:
    # `Graph` loads the queries layer: only when asked, so that `import tracegraph.ingest.x`
    # (every submodule import runs this file first) stays light
    if name == "Graph":
        from .graph import Graph

        return Graph
    if name == "__version__":  # package metadata costs ~40 ms to read: only when asked
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("tracegraph")
        except PackageNotFoundError:  # running from a source tree that is not installed
            return "0+unknown"
    raise AttributeError(f"module 'tracegraph' has no attribute {name!r}")
