"""A run's archive: what the edge-set builders read of each rank, kept as Parquet beside the
database, so that no command after `ingest` needs the trace files (they may move or go).

`DB.archive/run-<run_idx>-<key>/rank-<r>.parquet` holds one rank's source rows (the event columns
the native builder reads, `frame.FrameSource`); `table-<name>.parquet` a table of the whole run (a
summary tier's per-rank figures and findings, kilobytes per rank); `sources/` holds each trace file
the run was read from, byte for byte (a gzipped file as it is, a plain one zstd-compressed, about a
tenth of its size), listed in `sources.json` by the path the database records. HTA parses the JSON
itself and numbers events by their position in the file, so it is given those bytes: its edges are
keyed to the same events as from the original file. The ingest writes ranks a rank at a time, and
copies files on a thread of its own while the next one parses, into a partial folder, renamed into
place just before the database itself is swapped in; a folder that no run of the database owns (an
ingest that failed or was killed) is removed by the next ingest. `<key>` is derived from the run's
ingest time, so a folder left by an older database of the same name is never taken for a newer
run's.

Each file's content hash is taken as it is written and recorded with the run
(`Run.archive_hashes`, in the same write); a reader checks a file against it before using it
(`checksums`), so a file changed since the ingest is an error naming it, never another answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import checksums
from .errors import IngestError
from .store import GraphStore


def archive_root(db: Path) -> Path:
    """`DB.archive` beside the database file (the file a symbolic link names, if it is one)."""
    target = Path(os.path.realpath(db))
    return target.with_name(target.name + ".archive")


def is_partial_of(folder: Path, token: str) -> bool:
    """`folder` is the partial archive of the writer whose token is `token` (as seen from a
    worker, perhaps on another machine, which may see no such folder or another one)."""
    try:
        return (folder / WRITER).read_text() == token
    except OSError:
        return False


WRITER = ".writer"


def run_folder(db: Path, run_idx: int, ingested_at: str) -> Path:
    key = hashlib.sha256(ingested_at.encode()).hexdigest()[:12]
    return archive_root(db) / f"run-{run_idx}-{key}"


class ArchiveWriter:
    """One run's archive, written a rank at a time; `finish` puts it in place."""

    def __init__(self, db: Path, run_idx: int) -> None:
        self.db, self.run_idx = Path(db), run_idx
        self.partial = archive_root(db) / f".partial-{run_idx}-{os.getpid()}"
        shutil.rmtree(self.partial, ignore_errors=True)
        # a worker on another machine writes rows here only where it sees this very folder
        self.token = secrets.token_hex(8)
        with self._errors():
            (self.partial / SOURCES).mkdir(parents=True)
            (self.partial / WRITER).write_text(self.token)
        self._copier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracegraph-archive")
        self._copies: dict[str, Future[tuple[str, str]]] = {}
        self._hashes: dict[str, str] = {}  # each file written, by its name in the folder

    def add(self, rank: int, rows: pa.Table) -> str:
        """Write a rank's rows; their file's content hash."""
        with self._errors():
            digest = write_rank(self.partial, rank, rows)
        self.written(rank, digest)
        return digest

    def written(self, rank: int, digest: str) -> None:
        """Record the content hash of the rank file a worker wrote into the folder."""
        self._hashes[rank_file(rank)] = digest

    def add_table(self, name: str, table: pa.Table) -> None:
        """Write one of the run's own tables (a summary tier's, `table_file`)."""
        with self._errors(), open(self.partial / table_file(name), "wb") as raw:
            out = checksums.HashingFile(raw)
            pq.write_table(table, out, compression="zstd")
        self._hashes[table_file(name)] = out.hexdigest()

    def add_source(self, path: Path) -> None:
        """Copy a trace file the run is read from (on the writer's thread; `finish` waits)."""
        if str(path) not in self._copies:
            target = self.partial / SOURCES / f"{len(self._copies)}"
            self._copies[str(path)] = self._copier.submit(_copy_source, Path(path), target)

    def seal(self) -> dict[str, str]:
        """Wait for the copies, write the list of them; every file's content hash, by its
        name in the folder (what the run records as `archive_hashes`)."""
        with self._errors():
            copied = {source: copy.result() for source, copy in self._copies.items()}
            self._copier.shutdown()
            names = {source: name for source, (name, _) in copied.items()}
            manifest = json.dumps(names, indent=1).encode()
            (self.partial / MANIFEST).write_bytes(manifest)
        self._hashes.update({f"{SOURCES}/{name}": digest for name, digest in copied.values()})
        self._hashes[MANIFEST] = checksums.bytes_digest(manifest)
        return dict(sorted(self._hashes.items()))

    def finish(self, ingested_at: str) -> None:
        """Put the sealed archive in place."""
        with self._errors():
            (self.partial / WRITER).unlink(missing_ok=True)  # read by the ingest's workers only
            os.replace(self.partial, run_folder(self.db, self.run_idx, ingested_at))

    def abandon(self, ingested_at: str | None) -> None:
        """Remove what this writer wrote (call only when the database was not swapped in)."""
        self._copier.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.partial, ignore_errors=True)
        if ingested_at is not None:
            shutil.rmtree(run_folder(self.db, self.run_idx, ingested_at), ignore_errors=True)
        try:
            archive_root(self.db).rmdir()  # only if empty: the first ingest made it
        except OSError:
            pass

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:  # pyarrow's IO errors are OSErrors too
            root = archive_root(self.db)
            raise IngestError(f"{root}: cannot write the run archive ({exc})") from exc


def sweep(db: Path, store: GraphStore) -> None:
    """Remove archive folders that no run of the open database owns (the caller holds the
    database's write lock, so no other ingest is writing one)."""
    root = archive_root(db)
    if not root.is_dir():
        return
    owned = {run_folder(db, idx, at).name for idx, at, _ in _runs(store)}
    for folder in root.iterdir():
        if folder.name not in owned:
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class RunArchive:
    """A run's archive folder and the content hash ingest recorded of each file in it."""

    folder: Path
    hashes: Mapping[str, str] | None  # by name in the folder; None: recorded by no ingest

    def checked(self, name: str) -> Path:
        """The archive's file `name`, its bytes checked against what ingest recorded."""
        path = self.folder / name
        if self.hashes is None:
            raise checksums.ArchiveChangedError(
                f"{self.folder}: the run was ingested by an older tracegraph, which recorded no "
                "hashes of its archive; re-ingest the run"
            )
        recorded = self.hashes.get(name)
        if recorded is None:
            raise checksums.ArchiveChangedError(
                f"{path}: not a file the ingest wrote (no hash recorded); re-ingest the run"
            )
        checksums.check(path, recorded)
        return path


def run_archive(db: Path, store: GraphStore, run_idx: int) -> RunArchive | None:
    """The run's archive, or None when it has none (ingested before archives existed, or
    removed by hand)."""
    runs = {idx: (at, hashes) for idx, at, hashes in _runs(store)}
    if run_idx not in runs:
        return None
    at, hashes = runs[run_idx]
    folder = run_folder(db, run_idx, at)
    if not folder.is_dir():
        return None
    return RunArchive(folder, json.loads(hashes) if hashes is not None else None)


def rank_file(rank: int) -> str:
    return f"rank-{rank}.parquet"


def write_rank(folder: Path, rank: int, rows: pa.Table) -> str:
    """A rank's source rows into an archive folder (the writer's, or a worker's share of
    it); the file's content hash, taken as it is written."""
    with open(folder / rank_file(rank), "wb") as raw:
        out = checksums.HashingFile(raw)
        # row groups of ARCHIVE_ROW_GROUP rows: the writer holds one group's pages at a time
        pq.write_table(rows, out, compression="zstd", row_group_size=ARCHIVE_ROW_GROUP)
    return out.hexdigest()


ARCHIVE_ROW_GROUP = 1 << 17


def read_rank(archive: RunArchive, rank: int, columns: list[str] | None = None) -> pa.Table | None:
    """A rank's archived rows (these columns; None: not there or unreadable); a file changed
    since the ingest is an ArchiveChangedError."""
    if not (archive.folder / rank_file(rank)).is_file():
        return None
    path = archive.checked(rank_file(rank))
    try:
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException):
        return None


def table_file(name: str) -> str:
    return f"table-{name}.parquet"


def read_table(archive: RunArchive, name: str) -> pa.Table | None:
    """One of the run's own tables (`ArchiveWriter.add_table`); None where it has none."""
    if not (archive.folder / table_file(name)).is_file():
        return None
    path = archive.checked(table_file(name))
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise IngestError(f"{path}: cannot read the run archive's table ({exc})") from exc


SOURCES = "sources"
MANIFEST = "sources.json"
_ZSTD = "zstd"
_STEP = 8 << 20


def _copy_source(path: Path, target: Path) -> tuple[str, str]:
    """Copy `path` to `target` + a suffix saying how it is kept; the copy's name in `sources/`
    and its content hash (taken as it is written)."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        out = target.with_name(target.name + (".json.gz" if gzipped else ".json.zst"))
        with open(out, "wb") as raw:
            hashed = checksums.HashingFile(raw)
            if gzipped:
                shutil.copyfileobj(f, hashed, _STEP)
            else:
                with pa.CompressedOutputStream(hashed, _ZSTD) as dst:
                    while block := f.read(_STEP):
                        dst.write(block)
    return out.name, hashed.hexdigest()


def source_copy(archive: RunArchive, source: str, into: Path) -> Path | None:
    """The archived bytes of trace file `source` as a file HTA can read (a gzipped copy as it
    is; a compressed plain one written out under `into`), or None when the archive lists no
    copy of it (a run ingested before archives kept them). A listed copy that cannot be read
    is an error: the original file may since have been replaced by another capture, and so is
    a list or copy changed since the ingest (ArchiveChangedError)."""
    folder = archive.folder
    if not (folder / MANIFEST).is_file():
        return None
    try:
        name = json.loads(archive.checked(MANIFEST).read_text()).get(source)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise IngestError(f"{folder / MANIFEST}: cannot read the archive's list ({exc})") from exc
    if not isinstance(name, str):
        return None
    copy = folder / SOURCES / name
    if not copy.is_file():
        raise IngestError(f"{copy}: the archived copy of {source} is gone; re-ingest the run")
    archive.checked(f"{SOURCES}/{name}")
    if name.endswith(".json.gz"):
        return copy
    out = into / name.removesuffix(".zst")
    try:
        with pa.input_stream(str(copy), compression=_ZSTD) as src, open(out, "wb") as dst:
            while block := src.read(_STEP):
                dst.write(block)
    except (OSError, pa.ArrowException) as exc:
        raise IngestError(f"{copy}: cannot read the archived copy of {source} ({exc})") from exc
    return out


def _runs(store: GraphStore) -> list[tuple[int, str, str | None]]:
    """Each run's index, ingest time and archive hashes (JSON text; None: an older
    tracegraph's run, or a database without the property)."""
    hashes = "r.archive_hashes" if "archive_hashes" in store.properties("Run") else "NULL"
    table = store.run(
        f"MATCH (r:Run) RETURN r.run_idx AS idx, r.ingested_at AS at, {hashes} AS hashes"
    ).table
    rows = zip(*(table[c].to_pylist() for c in ("idx", "at", "hashes")), strict=True)
    return [(int(i), str(a), h) for i, a, h in rows]
