"""Traces to a database that holds them, ingesting only when it does not yet: what `tracegraph
report TRACES` (and `path`, `edges`) run first, so that the first answer takes one command and
the next ones no ingest.

Without a database named, each set of traces gets its own in the cache
($XDG_CACHE_HOME or ~/.cache)/tracegraph/traces/KEY/traces.kuzu, KEY a hash of every file's path,
size, modification time and first MiB: a changed file is another key, so it is ingested again.
The cache keeps the `CACHE_KEEP` sets used last. In a database the caller names, a run is reused
when it was ingested from the same files (its `sources`) after each last changed; else the run of
that name is ingested again, replacing the old one in the same all-or-nothing write.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .checksums import new_hash
from .errors import TracegraphError
from .pipeline import IngestOptions, IngestResult, ingest, trace_files

HEAD_BYTES = 1 << 20
CACHE_KEEP = 8
CACHED_DB = "traces.kuzu"

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Ingested:
    """A database holding the traces as `run`; `result` is the ingest's, None when reused."""

    db: Path
    run: str
    result: IngestResult | None


def default_cache_root() -> Path:
    """Where the databases of traces named without --db live."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracegraph" / "traces"


def fingerprint(files: Sequence[Path]) -> str:
    """A hash of each file's resolved path, size, modification time (ns) and first MiB."""
    digest = new_hash()
    for path in files:
        state = path.stat()
        with path.open("rb") as f:
            head = new_hash(f.read(HEAD_BYTES)).hexdigest()
        digest.update(f"{path.resolve()}\0{state.st_size}\0{state.st_mtime_ns}\0{head}\n".encode())
    return digest.hexdigest()


def ingested(
    paths: Sequence[Path],
    db: Path | None = None,
    *,
    run: str | None = None,
    cache_root: Path | None = None,
    progress: Progress | None = None,
) -> Ingested:
    """The database holding the trace files or folders `paths` (ingested now unless already
    there): `db`, else the cache's database for exactly these files."""
    files = trace_files(paths)
    if db is None:
        root = cache_root or default_cache_root()
        folder = root / fingerprint(files)[:32]
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)  # used now: the last to be pruned
        _prune(root, keep=folder)
        db = folder / CACHED_DB
    held = held_run(db, files, run)
    if held is not None:
        return Ingested(db, held, None)
    result = ingest(list(paths), db, IngestOptions(run=run, replace=True), progress)
    return Ingested(db, result.run, result)


def held_run(db: Path, files: Sequence[Path], run: str | None = None) -> str | None:
    """The run of `db` (named `run`, or any) ingested from exactly `files` after each last
    changed; None when there is none (or no database)."""
    from .store import GraphStore

    if not db.is_file() or db.stat().st_size == 0:
        return None
    wanted = [str(f.resolve()) for f in files]
    changed = max((f.stat().st_mtime for f in files), default=0.0)
    store = GraphStore(db, read_only=True)
    try:
        rows = store.run(
            "MATCH (r:Run) RETURN r.name AS name, r.sources AS sources, "
            "r.ingested_at AS at ORDER BY r.run_idx"
        ).table.to_pylist()
    except TracegraphError:
        return None  # not a tracegraph database yet: the ingest says what is wrong with it
    finally:
        store.close()
    for row in rows:
        if run is not None and row["name"] != run:
            continue
        if json.loads(row["sources"] or "[]") != wanted:
            continue
        if datetime.fromisoformat(row["at"]).timestamp() > changed:
            return str(row["name"])
    return None


def _prune(root: Path, keep: Path) -> None:
    """Remove the cached databases beyond the CACHE_KEEP used last (never `keep`)."""
    folders = sorted(
        (p for p in root.iterdir() if p.is_dir() and p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in folders[CACHE_KEEP - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)
