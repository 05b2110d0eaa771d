"""A cache of frame sources beside the database, so a trace's JSON is decoded once.

The native builder needs events that are not graph nodes (cuda_sync events, GPU annotations),
so it reads each rank's file again; decoding the JSON is most of that cost. The first build
writes each file's frame sources (a few columns of the events HTA reads) to
`DB.native-cache/<key>.parquet`; later builds (other versions, --all-steps, after a what-if)
read that instead. An entry is keyed by the file's resolved path, size and mtime, and by
`CACHE_FORMAT`; a stale or unreadable entry is rebuilt. `store_sources` is also what an ingest
can call to fill the cache while it has the events in hand.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...outputs import PartialFile
from .frame import FrameSource

CACHE_FORMAT = 2


def cache_dir(db: Path) -> Path:
    return Path(db).with_name(Path(db).name + ".native-cache")


def _key(trace_file: Path) -> tuple[str, dict[str, object]]:
    resolved = Path(trace_file).resolve()
    stat = resolved.stat()
    ident = {
        "file": str(resolved),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "format": CACHE_FORMAT,
    }
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
    return digest, ident


def load_sources(db: Path, trace_file: Path) -> list[FrameSource] | None:
    """The cached frame sources of a trace file, or None (absent, stale or unreadable)."""
    try:
        digest, ident = _key(trace_file)
        path = cache_dir(db) / f"{digest}.parquet"
        if not path.exists():
            return None
        table = pq.read_table(path)
        meta = json.loads(table.schema.metadata[b"tracegraph"])
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
        return None
    if meta.get("ident") != ident or "_rank" not in table.column_names or not table.num_rows:
        return None
    table = table.replace_schema_metadata(None)
    ranks = table["_rank"].to_numpy()
    bounds = [0, *(np.flatnonzero(ranks[1:] != ranks[:-1]) + 1).tolist(), len(ranks)]
    return [
        FrameSource(int(ranks[a]), table.slice(a, b - a).drop_columns(["_rank"]))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def store_sources(db: Path, trace_file: Path, sources: list[FrameSource]) -> None:
    """Write the frame sources of one trace file (best effort: a failure only costs speed)."""
    writer = SourcesWriter(db, trace_file)
    for source in sources:
        writer.add(source)
    writer.finish()


class SourcesWriter:
    """One trace file's cache entry, written a rank at a time (so that an ingest never holds
    more than the rank in hand) to a temporary file that `finish` puts in place. Best effort:
    a failure drops the entry, never the caller's work."""

    def __init__(self, db: Path, trace_file: Path) -> None:
        self.writer: pq.ParquetWriter | None = None
        self.partial: PartialFile | None = None
        try:
            self.digest, self.ident = _key(trace_file)
            self.folder: Path | None = cache_dir(db)
        except OSError:
            self.folder = None

    def add(self, source: FrameSource) -> None:
        if self.folder is None:
            return
        n = source.rows.num_rows
        rows = source.rows.append_column("_rank", pa.array([source.rank] * n, pa.int64()))
        try:
            if self.writer is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                self.partial = PartialFile(self.folder / f"{self.digest}.parquet", binary=True)
                meta = {"tracegraph": json.dumps({"ident": self.ident})}
                schema = rows.schema.with_metadata(meta)
                self.writer = pq.ParquetWriter(self.partial.file, schema, compression="zstd")
            self.writer.write_table(rows.cast(self.writer.schema))
        except (OSError, ValueError, pa.ArrowException):
            self.abandon()
            return

    def finish(self) -> None:
        if self.partial is None or self.writer is None:
            return
        try:
            self.writer.close()
            self.partial.commit()
        except (OSError, pa.ArrowException):
            self.abandon()

    def abandon(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            except (OSError, pa.ArrowException):
                pass
        if self.partial is not None:
            self.partial.discard()
        self.writer, self.partial, self.folder = None, None, None
