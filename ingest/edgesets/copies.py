"""Each edge set's edges also as one Parquet file in the run's archive, for reads that take a
whole set (the diff): Kuzu returns a million DEP rows with their endpoint ids in seconds, Parquet
in a tenth of that.

A copy is named by a key of its EdgeSet row (run index, name, creation time to the µs), so a
copy always belongs to exactly one build: one written for a build whose database write then
failed is never named by the database, and a set replaced since names another key. Readers
that find no copy (a run ingested before copies existed, a removed file) read Kuzu instead.
Copies are written before the database write that makes their set current; those of the
sets it replaced are removed after it. A copy's content hash, taken as it is written, is
recorded on its EdgeSet row (`copy_hash`) and checked before the copy is read: a copy changed
since (another set's copied over it, truncated) is an error, never another set's edges.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .. import checksums, outputs, schema
from ..archive import RunArchive

FOLDER = "edgesets"
# what a whole-set read needs of an edge: its identity, weight and path flag, its rank
COLUMNS = ("src", "src_boundary", "dst", "dst_boundary", "type", "weight_ns",
           "on_critical_path", "rank")  # fmt: skip


WRITER = (
    "what its edge set's build recorded (changed since the build)",
    "build the edge set again (tracegraph edges)",
)


def copy_key(run_idx: int, name: str, created_at: str) -> str:
    """The file stem of the copy of the edge set built at `created_at`."""
    return hashlib.sha256(f"{run_idx}\0{name}\0{created_at}".encode()).hexdigest()[:20]


@dataclass(frozen=True)
class SetCopy:
    """What the database says of an edge set's copy: its key and content hash (None: no copy
    was written, or an older tracegraph wrote it without one; reads then take the database)."""

    key: str
    digest: str | None


def copy_path(run_folder: Path, key: str) -> Path:
    return run_folder / FOLDER / f"{key}.parquet"


def write_copy(run_folder: Path, key: str, edges: pa.Table) -> tuple[Path, str] | None:
    """Write a set's DEP rows (from_id, to_id, ... as loaded) as its copy; the path written
    and its content hash, or None where it cannot be written (a full disk, an archive not
    writable): the copy only speeds reads up, which then read the database."""
    rank = pa.array(schema.key_rank(edges["from_id"].to_numpy()))
    table = pa.table(
        {
            "src": edges["from_id"],
            "src_boundary": edges["src_boundary"],
            "dst": edges["to_id"],
            "dst_boundary": edges["dst_boundary"],
            "type": edges["type"],
            "weight_ns": edges["weight_ns"],
            "on_critical_path": edges["on_critical_path"],
            "rank": rank,
        }
    )
    path = copy_path(run_folder, key)
    try:
        path.parent.mkdir(exist_ok=True)
        with outputs.written(path, binary=True) as raw:
            out = checksums.HashingFile(raw)
            pq.write_table(table, out, compression="zstd")
    except OSError:
        return None
    return path, out.hexdigest()


def read_copy(
    archive: RunArchive | None,
    copy: SetCopy,
    edge_type: str | None = None,
    rank: int | None = None,
) -> pa.Table | None:
    """The set's edges (of one type, one rank) from its copy; None where there is no copy
    (none recorded, or the file is gone); a copy changed since it was written is an
    ArchiveChangedError."""
    if archive is None or copy.digest is None:
        return None
    path = copy_path(archive.folder, copy.key)
    if not path.is_file():
        return None
    checksums.check(path, copy.digest, WRITER)
    filters: list[tuple[str, str, object]] = []
    if edge_type is not None:
        filters.append(("type", "=", edge_type))
    if rank is not None:
        filters.append(("rank", "=", rank))
    try:
        return pq.read_table(path, columns=list(COLUMNS), filters=filters or None)
    except FileNotFoundError:
        return None


def remove(run_folder: Path, keys: set[str]) -> None:
    """Remove these copies (of sets a write replaced), and partial files killed writes left
    (this runs after the database lock is released: a live writer's partial file stays)."""
    folder = run_folder / FOLDER
    if not folder.is_dir():
        return
    for key in keys:
        copy_path(run_folder, key).unlink(missing_ok=True)
    outputs.sweep(folder)
