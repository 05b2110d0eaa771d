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
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .native_frame import FrameSource

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
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    if meta.get("ident") != ident:
        return None
    table = table.replace_schema_metadata(None)
    out = []
    for entry in meta["ranks"]:
        rows = table.slice(entry["offset"], entry["rows"]).drop_columns(["_rank"])
        out.append(FrameSource(entry["rank"], rows))
    return out


def store_sources(db: Path, trace_file: Path, sources: list[FrameSource]) -> None:
    """Write the frame sources of one trace file (best effort: a failure only costs speed)."""
    try:
        digest, ident = _key(trace_file)
        folder = cache_dir(db)
        folder.mkdir(parents=True, exist_ok=True)
        parts, ranks, offset = [], [], 0
        for s in sources:
            rows = s.rows.append_column("_rank", pa.array([s.rank] * s.rows.num_rows, pa.int64()))
            parts.append(rows)
            ranks.append({"rank": s.rank, "offset": offset, "rows": s.rows.num_rows})
            offset += s.rows.num_rows
        table = pa.concat_tables(parts, promote_options="permissive")
        meta = json.dumps({"ident": ident, "ranks": ranks})
        table = table.replace_schema_metadata({"tracegraph": meta})
        tmp = folder / f".{digest}.{os.getpid()}.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, folder / f"{digest}.parquet")
    except (OSError, pa.ArrowException):
        return
