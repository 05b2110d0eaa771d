"""Node and edge tables of several ranks, loaded into the database together.

Few large COPYs are much faster than many small ones, so ranks are gathered into a batch of up
to BATCH_ROWS rows or BATCH_BYTES bytes, and loaded nodes before edges. A batch holds its
tables in memory, or, for a large ingest, writes them to Parquet files as they come (one per
table and FROM/TO pair, a row group per rank) and has Kuzu load those: Kuzu keeps every Arrow
table a COPY was given until its connection closes, so tables held for a COPY count twice at
the write's peak, while a file's rows are read and let go.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from . import schema
from .errors import IngestError
from .memory import mapped_blocks, release_freed
from .store import GraphStore, edge_pairs

if TYPE_CHECKING:
    from pyarrow.parquet import ParquetWriter

BATCH_ROWS = 4_000_000
BATCH_BYTES = 256 << 20


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
        self.files: _Files | None = None
        if spill_at is not None:
            self.files = _Files(spill_at)

    @property
    def bytes(self) -> int:
        return sum(self.buffers.values())

    @property
    def full(self) -> bool:
        return self.rows >= BATCH_ROWS or self.bytes >= BATCH_BYTES

    def add(self, node_tables: dict[str, pa.Table], edge_tables: dict[str, pa.Table]) -> None:
        for label, table in node_tables.items():
            self._hold(table)
            if self.files is not None:
                self.files.write(label, None, table)
            else:
                self.nodes[label].append(table)
        for label, table in edge_tables.items():
            self._hold(table)
            if self.files is not None:
                for pair, part in edge_pairs(label, table):
                    self.files.write(label, pair, part)
            else:
                self.edges.setdefault(label, []).append(table)

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


Pair = tuple[str, str] | None


class _Files:
    """One open Parquet file per table (and FROM/TO pair) of the batch being gathered."""

    def __init__(self, spill_at: Path) -> None:
        try:
            self.folder = Path(tempfile.mkdtemp(prefix=f"{spill_at.name}-", dir=spill_at.parent))
        except OSError as exc:
            raise IngestError(f"{spill_at.parent}: cannot write there ({exc.strerror})") from exc
        self.open: dict[tuple[str, Pair], tuple[Path, ParquetWriter]] = {}
        self.written = 0

    def write(self, label: str, pair: Pair, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not table.num_rows:
            return
        key = (label, pair)
        try:
            if key not in self.open:
                self.written += 1
                path = self.folder / f"{self.written}.parquet"
                self.open[key] = (path, pq.ParquetWriter(path, table.schema))
            self.open[key][1].write_table(table)
        except OSError as exc:  # pyarrow's IO errors are OSErrors too
            raise IngestError(f"{self.folder}: cannot set rows aside ({exc})") from exc

    def load(self, store: GraphStore) -> None:
        """Load every file, nodes before edges, and remove them."""
        opened = sorted(self.open.items(), key=lambda item: item[0][1] is not None)
        self.open = {}
        for (label, pair), (path, writer) in opened:
            writer.close()
            store.copy_files(label, [path], pair)
            path.unlink()

    def close(self) -> None:
        for _, writer in self.open.values():
            try:
                writer.close()
            except OSError:
                pass
        self.open = {}
        shutil.rmtree(self.folder, ignore_errors=True)
