"""Traces to a database that holds them, ingesting only when it does not yet: what `tracegraph
report TRACES` (and `path`, `edges`) run first, so that the first answer takes one command and
the next ones no ingest.

Without a database named, each set of traces gets its own in the cache
($XDG_CACHE_HOME or ~/.cache)/tracegraph/traces/KEY/traces.kuzu, KEY a hash of every file's path,
size, modification time and first MiB: a changed file is another key, so it is ingested again.
The cache keeps the `CACHE_KEEP` sets used last. In a database the caller names, the run (`--run`,
else the default name) is reused when it was ingested from the same files (its `sources`) after
each last changed; an older ingest of those files is replaced in the same all-or-nothing write; a
run of that name from none of them is an error (another job's run is never replaced unasked).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .checksums import new_hash
from .errors import DatabaseBusy, TracegraphError
from .pipeline import IngestOptions, IngestResult, default_run_name, ingest, trace_files
from .prepare import Summariser
from .store import GraphStore, wait_for_writer

HEAD_BYTES = 1 << 20
CACHE_KEEP = 8
CACHED_DB = "traces.kuzu"
# a file whose modification time is the set's last use (the folder's own changes whenever the
# database writes inside it, even after its command is done)
USED = "used"
# how long a command on traces waits for another process writing the same database (the same
# traces asked about twice at once: the second reuses what the first ingests)
WRITER_WAIT_S = 30 * 60

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
    answer: Callable[[Ingested, GraphStore], None] | None = None,
    waiting: Callable[[Path], None] = lambda db: None,
    summarise: Summariser | None = None,
) -> Ingested:
    """The database holding the trace files or folders `paths` (ingested now unless already
    there): `db`, else the cache's database for exactly these files. When they are ingested
    now, `answer` is called with the open store before the write commits (see `ingest`).

    Another process writing that database is waited for (`waiting` is told), then what it
    wrote is looked at: the same traces asked about twice at once are ingested once. With
    `summarise`, they are ingested as summaries (`ingest --summary`; the cache keeps them
    apart from a full ingest of the same files)."""
    files = trace_files(paths)
    name = run or default_run_name(paths, files)
    cached = db is None
    if db is None:
        root = cache_root or default_cache_root()
        folder = root / (fingerprint(files)[:32] + ("-summary" if summarise else ""))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / USED).touch()  # used now: the last to be pruned
        _prune(root, keep=folder)
        db = folder / CACHED_DB
    into = db

    def answered(result: IngestResult, store: GraphStore) -> None:
        assert answer is not None
        answer(Ingested(into, result.run, result), store)

    deadline = time.monotonic() + WRITER_WAIT_S
    while True:
        wait_for_writer(db, max(0.0, deadline - time.monotonic()), lambda: waiting(into))
        if cached:  # a database of the cache holds these very files (its key says so)
            held = next((r["name"] for r in _runs(db) if r["name"] == name), None)
        else:
            held = held_run(db, files, name)
        if held is not None and (summarise is not None or not _has_summaries(db, held)):
            return Ingested(db, held, None)  # (every event asked for: a summary run is redone)
        options = IngestOptions(run=name, replace=True, summarise=summarise)
        try:
            result = ingest(list(paths), db, options, progress, answered if answer else None)
        except DatabaseBusy:
            if time.monotonic() >= deadline:
                raise
            continue  # another process began writing it first: wait for it, then look again
        return Ingested(db, result.run, result)


def held_run(db: Path, files: Sequence[Path], run: str) -> str | None:
    """`run` when `db` holds it ingested from exactly `files` after each last changed (or had
    its status changed: a copy that keeps the old modification time still changes that);
    None when it holds no run of that name, or an older ingest of these files (some changed,
    added or removed since) that is to be replaced. A run of that name from none of these files
    is an error: replacing it would lose another job's run."""
    rows = [r for r in _runs(db) if r["name"] == run]
    if not rows:
        return None
    sources = json.loads(rows[0]["sources"] or "[]")
    wanted = [str(f) for f in files]  # as the ingest records them
    if sources and not set(sources) & set(wanted):  # no file in common: another job's run
        raise TracegraphError(
            f"{db}: run '{run}' holds other trace files; choose another name with --run"
        )
    changed = max((max(f.stat().st_mtime, f.stat().st_ctime) for f in files), default=0.0)
    if sources == wanted and datetime.fromisoformat(rows[0]["at"]).timestamp() > changed:
        return run
    return None  # the same files, changed since or some skipped: ingested again


def _runs(db: Path) -> list[dict[str, str]]:
    """Each run's name, sources and ingest time; none where there is no database yet."""
    if not db.is_file() or db.stat().st_size == 0:
        return []
    store = GraphStore(db, read_only=True)
    try:
        return store.run(
            "MATCH (r:Run) RETURN r.name AS name, r.sources AS sources, r.ingested_at AS at"
        ).table.to_pylist()
    except TracegraphError:
        return []  # not a tracegraph database yet: the ingest says what is wrong with it
    finally:
        store.close()


def _has_summaries(db: Path, run: str) -> bool:
    """Whether some rank of `run` is a summary (`ingest --summary`): its events not loaded."""
    store = GraphStore(db, read_only=True)
    try:
        if "tier" not in store.properties("Rank"):
            return False
        table = store.run(
            "MATCH (k:Rank) WHERE k.run = $run AND k.tier = 'summary' RETURN count(*) AS n",
            {"run": run},
        ).table
        return bool(table["n"][0].as_py())
    finally:
        store.close()


def _prune(root: Path, keep: Path) -> None:
    """Remove the cached databases beyond the CACHE_KEEP used last (never `keep`)."""
    used: list[tuple[float, Path]] = []
    for p in root.iterdir():
        try:
            if p.is_dir() and p != keep:
                used.append(((p / USED).stat().st_mtime if (p / USED).exists() else 0.0, p))
        except OSError:  # removed meanwhile by another command's pruning
            continue
    for _, stale in sorted(used, reverse=True)[CACHE_KEEP - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)
