"""Event tables set aside on disk by key (a rank, or a pid whose rank is not known yet), so that
a large merged file is split by rank without holding all of it in memory."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import IngestError
from .memory import move_columns, release_freed

BUFFER_BYTES = 64 << 20
# A key's first pieces, up to this many bytes, are written uncompressed (see `_COMPRESSED`).
PLAIN_UP_TO = 32 << 20
Key = tuple[str, int | None]  # (what the key is, its value)


def aside_folder(at: Path | None, what: str) -> Path:
    """A new folder for `what` set aside on disk: named after `at`, beside it (where a killed
    ingest's leftovers are swept: `read.sweep_spills`), else in the system's temp folder."""
    where = Path(tempfile.gettempdir()) if at is None else at.parent
    try:
        if at is None:
            return Path(tempfile.mkdtemp(prefix="tracegraph-spill-"))
        return Path(tempfile.mkdtemp(prefix=f"{at.name}-", dir=at.parent))
    except OSError as exc:
        raise IngestError(f"{where}: cannot set {what} aside there ({exc.strerror})") from exc


class Spill:
    """Arrow IPC pieces in a folder of their own (removed by `close`), read back per key set in
    the order the rows were added (they are sorted by `order_by`)."""

    def __init__(self, at: Path | None, order_by: str) -> None:
        self.folder = aside_folder(at, "events")
        self.order_by = order_by
        self.pieces: dict[Key, list[Path]] = {}  # every key set aside, with its pieces
        self.held: dict[Key, list[pa.Table]] = {}  # rows not written yet
        self.held_bytes = 0
        self.held_bytes_of: dict[Key, int] = {}
        self.written_bytes_of: dict[Key, int] = {}
        self.written = 0

    def add(self, key: Key, table: pa.Table) -> None:
        """Set rows aside: held in memory until BUFFER_BYTES are held, then written a key at a
        time (few large pieces, not one per block and key)."""
        if not table.num_rows:
            return
        self.held.setdefault(key, []).append(table)
        self.pieces.setdefault(key, [])
        size = table.nbytes
        self.held_bytes_of[key] = self.held_bytes_of.get(key, 0) + size
        self.held_bytes += size
        if self.held_bytes >= BUFFER_BYTES:
            self._write(list(self.held))

    def _write(self, keys: list[Key]) -> None:
        for key in keys:
            tables = self.held.pop(key, [])
            self.held_bytes -= self.held_bytes_of.pop(key, 0)
            if not tables:
                continue
            # one record batch: the pieces of many blocks' slices cost more to write (and to
            # read back) as they are than to put together first
            table = pa.concat_tables(tables, promote_options="default").combine_chunks()
            del tables
            self.written += 1
            path = self.folder / f"{self.written}.arrow"
            written = self.written_bytes_of.get(key, 0) + table.nbytes
            self.written_bytes_of[key] = written
            options = _PLAIN if written <= PLAIN_UP_TO else _COMPRESSED
            try:
                with (
                    pa.OSFile(str(path), "wb") as sink,
                    pa.ipc.new_file(sink, table.schema, options=options) as out,
                ):
                    out.write_table(table)
            except OSError as exc:  # pyarrow's IO errors are OSErrors too
                raise IngestError(f"{self.folder}: cannot set events aside ({exc})") from exc
            self.pieces[key].append(path)
            del table
        release_freed()  # the parse's tables just written: else the allocator keeps them

    def add_grouped(self, table: pa.Table, keys: np.ndarray, tag: str) -> None:
        """Each run of equal `keys` (one per row) as the piece of (tag, key)."""
        if not table.num_rows:
            return
        order = np.argsort(keys, kind="stable")
        table, keys = table.take(pa.array(order)), keys[order]
        bounds = [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), len(keys)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            self.add((tag, keys[a].item()), table.slice(a, b - a))

    def keys(self) -> list[Key]:
        return list(self.pieces)

    def take(self, keys: list[Key]) -> pa.Table | None:
        """The rows of these keys as one table in `order_by` order; their pieces are deleted."""
        held = {k: self.held.pop(k, []) for k in keys}
        self.held_bytes -= sum(self.held_bytes_of.pop(k, 0) for k in keys)
        pieces = {k: self.pieces.pop(k, []) for k in keys}
        for key in keys:
            self.written_bytes_of.pop(key, None)
        if not any(held.values()) and not any(pieces.values()):
            return None
        release_freed()  # what the parse freed, before the rank is read back
        tables: list[pa.Table] = []
        for key in keys:  # a key's pieces on disk hold its older rows, then those still held
            for path in pieces[key]:
                with pa.OSFile(str(path)) as source:
                    tables.append(pa.ipc.open_file(source).read_all())
                path.unlink(missing_ok=True)
            tables.extend(held.pop(key))
        handover = [pa.concat_tables(tables, promote_options="default")]
        del tables
        return _in_order(handover.pop(), self.order_by)  # which holds the only reference

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# Compressed pieces are read back into one allocation per buffer (uncompressed ones share one
# per record batch), so a column read back is freed as soon as it is put in order: reading a
# large rank back needs about one copy of it, not two. On large pieces LZ4 costs far less than
# the parse it follows; on small ones it does not (64 ranks in a merged file of 0.53 GB, pieces
# of ~1 MiB: a quarter of the ingest's time). So a key's first PLAIN_UP_TO bytes go
# uncompressed: reading a rank back holds those twice, at most PLAIN_UP_TO for each key read
# with it (its rank's, and those of its pids whose rank was not known when set aside).
_COMPRESSED = pa.ipc.IpcWriteOptions(compression="lz4" if pa.Codec.is_available("lz4") else None)
_PLAIN = pa.ipc.IpcWriteOptions()


def _in_order(table: pa.Table, order_by: str) -> pa.Table:
    """The table as one chunk per column, sorted by `order_by`, a column at a time: each
    source column is dropped once moved."""
    keys = table[order_by]
    order = None if _ascending(keys) else pc.sort_indices(keys)
    del keys
    handover = [table]
    del table
    return pa.table(
        move_columns(
            handover,
            lambda column: column.combine_chunks() if order is None else column.take(order),
        )
    )


def _ascending(values: pa.ChunkedArray) -> bool:
    """Whether the values never decrease and none is null: rows set aside in file order."""
    if len(values) < 2 or values.null_count:
        return len(values) < 2
    flat = values.combine_chunks()
    return bool(pc.all(pc.greater_equal(flat[1:], flat[:-1])).as_py())
