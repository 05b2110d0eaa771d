"""Which run a user means: the one place a run name (or none) becomes a run of the database."""

from __future__ import annotations

from .errors import UnknownRunError
from .store import GraphStore


def resolve_run(store: GraphStore, run: str | None) -> tuple[str, int]:
    """The run's name and index; `run` may be omitted when the database holds only one."""
    runs = store.run("MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx").table
    names, indexes = runs["name"].to_pylist(), runs["idx"].to_pylist()
    if run is None:
        if len(names) != 1:
            held = f"holds runs {sorted(names)}" if names else "holds no runs"
            raise UnknownRunError(f"{store.path}: {held}; choose one with --run")
        run = names[0]
    if run not in names:
        raise UnknownRunError(f"{store.path}: no run '{run}' (runs: {sorted(names)})")
    return run, int(indexes[names.index(run)])
