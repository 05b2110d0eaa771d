"""Removing a run from a database: its events and their edges, its collectives, steps, ranks,
edge sets and the Run node, in the caller's write transaction; its archive folder goes when
that transaction is in place (an ingest's sweep removes a folder no run owns)."""

from __future__ import annotations

import shutil
from pathlib import Path

from . import archive, schema
from .runs import resolve_run
from .store import GraphStore, write_transaction


def remove_runs(db: Path, runs: list[str]) -> None:
    """Remove these runs from the database at `db`, all or none, and their archives."""
    folders = []
    with write_transaction(db) as store:
        for run in runs:
            folders.append(run_folder_of(db, store, run))
            remove_run(store, run)
    for folder in folders:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def run_folder_of(db: Path, store: GraphStore, run: str) -> Path | None:
    """The run's archive folder (None: it has none)."""
    _, run_idx = resolve_run(store, run)
    kept = archive.run_archive(db, store, run_idx)
    return kept.folder if kept is not None else None


def remove_run(store: GraphStore, run: str) -> int:
    """Delete run `run` (it must exist) inside the open write; its run_idx."""
    name, run_idx = resolve_run(store, run)
    lo, hi = schema.key_range(run_idx)
    keyed_labels = [*schema.EVENT_LABELS, schema.MEMORY_EVENT.label]
    for label in (label for label in keyed_labels if store.has_table(label)):
        # validated integers inlined: Kuzu prunes the id scan only for literals
        store.run(
            f"MATCH (n:{label}) WHERE n.id >= {lo} AND n.id < {hi} DETACH DELETE n "
            "RETURN count(*) AS deleted"
        )
    for label in ("Collective", "CollectiveArrival", "Step", "Rank", "EdgeSet"):
        store.run(
            f"MATCH (n:{label}) WHERE n.run = $run DETACH DELETE n RETURN count(*) AS deleted",
            {"run": name},
        )
    store.run(
        "MATCH (r:Run) WHERE r.name = $run DELETE r RETURN count(*) AS deleted", {"run": name}
    )
    return run_idx
