"""Node and edge tables of several ranks, loaded into the database together.

Few large COPYs are much faster than many small ones, so ranks are gathered into a batch of up
to BATCH_ROWS rows or BATCH_BYTES bytes, and loaded nodes before edges. A batch holds its
tables in memory, or, for a large ingest, writes them to Parquet files as they come (a rank's
table, or its edges of one FROM/TO pair, a file) and has Kuzu load those: Kuzu keeps every Arrow
table a COPY was given until its connection closes, so tables held for a COPY count twice at
the write's peak, while a file's rows are read and let go. Workers preparing ranks write such
files themselves (`write_load_files`) into the batch's folder, and the batch loads them with
its own: the tables never travel between processes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from . import schema
from .errors import IngestError
from .memory import mapped_blocks, release_freed
from .spill import aside_folder
from .store import GraphStore, edge_pairs

BATCH_ROWS = 4_000_000
BATCH_BYTES = 256 << 20

Pair = tuple[str, str] | None


@dataclass(frozen=True)
class LoadFile:
    """A Parquet file of one table's rows (an edge table's for one FROM/TO `pair`), in its load
    order, written for a batch to load."""

    label: str
    pair: Pair
    path: Path
    rows: int
    nbytes: int  # the rows' size in memory, as a batch counts what it holds


def write_load_files(
    folder: Path, prefix: str, node_tables: dict[str, pa.Table], edge_tables: dict[str, pa.Table]
) -> tuple[LoadFile, ...]:
    """One rank's tables as load files in `folder` (names starting with `prefix`)."""
    import pyarrow.parquet as pq

    parts: list[tuple[str, Pair, pa.Table]] = [(k, None, t) for k, t in node_tables.items()]
    for label, table in edge_tables.items():
        parts.extend((label, pair, part) for pair, part in edge_pairs(label, table))
    out = []
    for i, (label, pair, table) in enumerate(parts):
        if not table.num_rows:
            continue
        path = folder / f"{prefix}-{i}.parquet"
        try:
            pq.write_table(table, path)
        except OSError as exc:  # pyarrow's IO errors are OSErrors too
            raise IngestError(f"{folder}: cannot set rows aside ({exc})") from exc
        out.append(LoadFile(label, pair, path, table.num_rows, table.nbytes))  # a slice: its rows
    return tuple(out)


class LoadBatch:
    """The ranks' tables not loaded yet; `flush` loads them. With `spill_at` (a path whose
    parent folder is beside the database), they wait in Parquet files in a folder named after
    it, removed by `close`."""

    def __init__(self, store: GraphStore, spill_at: Path | None = None) -> None:
        self.store = store
        self.nodes: dict[str, list[pa.Table]] = {label: [] for label in schema.EVENT_LABELS}
        self.edges: dict[str, list[pa.Table]] = {}
        self.rows = 0
        self.buffers: dict[int, int] = {}  # the memory the batch holds: size by buffer address
        self.adopted_bytes = 0  # the size of the rows of the load files workers wrote
        self.files: _Files | None = None
        if spill_at is not None:
            self.files = _Files(spill_at)

    @property
    def folder(self) -> Path | None:
        """Where workers write their ranks' load files (None: the batch holds tables)."""
        return self.files.folder if self.files is not None else None

    @property
    def bytes(self) -> int:
        return sum(self.buffers.values()) + self.adopted_bytes

    @property
    def full(self) -> bool:
        return self.rows >= BATCH_ROWS or self.bytes >= BATCH_BYTES

    def add(self, node_tables: dict[str, pa.Table], edge_tables: dict[str, pa.Table]) -> None:
        if self.files is not None:
            prefix = self.files.next_prefix()
            self.adopt(write_load_files(self.files.folder, prefix, node_tables, edge_tables))
            return
        for label, table in node_tables.items():
            self._hold(table)
            self.nodes.setdefault(label, []).append(table)
        for label, table in edge_tables.items():
            self._hold(table)
            self.edges.setdefault(label, []).append(table)

    def adopt(self, files: tuple[LoadFile, ...]) -> None:
        """Load files written into `folder` (by a worker, or by `add`), loaded with the batch."""
        for f in files:
            assert self.files is not None, "load files come only where the batch has a folder"
            self.files.adopt(f)
            self.rows += f.rows
            self.adopted_bytes += f.nbytes

    def _hold(self, table: pa.Table) -> None:
        # A rank's node tables are slices of one parent: each buffer counts once, not once
        # per table (counted per table, a batch looked 3x its size and committed too often).
        self.rows += table.num_rows
        for column in table.columns:
            for chunk in column.chunks:
                for buffer in chunk.buffers():
                    if buffer is not None:
                        self.buffers[buffer.address] = buffer.size

    def flush(self, last: bool = False) -> None:
        """Load the batch; unless it is the `last`, commit and close the database until the
        next (see `GraphStore.commit_and_pause`)."""
        if not self.rows:
            return
        release_freed()  # what preparing the ranks freed, before Kuzu's COPYs need memory
        self.store.resume()
        with mapped_blocks():  # what a COPY frees goes back before the next one
            if self.files is not None:
                self.files.load(self.store)
            else:
                self._load_tables()
        self.rows = 0
        self.buffers.clear()
        self.adopted_bytes = 0
        if not last:
            self.store.commit_and_pause()

    def _load_tables(self) -> None:
        for label, tables in self.nodes.items():
            if any(t.num_rows for t in tables):
                self.store.copy(label, _concat(tables))
            tables.clear()
        for label, tables in self.edges.items():
            if any(t.num_rows for t in tables):
                self.store.copy_edges(label, _concat(tables))
            tables.clear()

    def close(self) -> None:
        """Remove the batch's files (loaded or not)."""
        if self.files is not None:
            self.files.close()


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The non-empty tables as one: a rank without rows of a kind (a CPU-only rank's runtime
    calls) gives an empty table, whose columns may be null-typed and which, as the first chunk
    of a COPY, made Kuzu load none of the rows after it."""
    return pa.concat_tables([t for t in tables if t.num_rows], promote_options="default")


class _Files:
    """The load files of the batch being gathered, per table (and FROM/TO pair), in the order
    their ranks came."""

    def __init__(self, spill_at: Path) -> None:
        self.folder = aside_folder(spill_at, "rows")
        self.paths: dict[tuple[str, Pair], list[Path]] = {}
        self.written = 0

    def next_prefix(self) -> str:
        self.written += 1
        return f"main-{self.written}"

    def adopt(self, f: LoadFile) -> None:
        self.paths.setdefault((f.label, f.pair), []).append(f.path)

    def load(self, store: GraphStore) -> None:
        """Load every file, nodes before edges, and remove them."""
        paths, self.paths = self.paths, {}
        for key in sorted(paths, key=lambda key: key[1] is not None):
            store.copy_files(key[0], paths[key], key[1])
            for path in paths[key]:
                path.unlink()

    def close(self) -> None:
        self.paths = {}
        shutil.rmtree(self.folder, ignore_errors=True)
