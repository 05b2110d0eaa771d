"""One rank's events → the Op, Runtime and Kernel node tables, keyed by (run, rank, ev_idx)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .memory import move_columns
from .memory_events import memory_rows

# Runtime calls that block the host or a stream until earlier GPU work is done.
SYNC_CALLS = frozenset(
    {
        f"{prefix}{call}"
        for prefix in ("cuda", "hip")
        for call in (
            "DeviceSynchronize",
            "StreamSynchronize",
            "EventSynchronize",
            "StreamWaitEvent",
        )
    }
    | {"cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuStreamWaitEvent"}
)


def with_keys(events: pa.Table, rank: int, run: str, run_idx: int) -> pa.Table:
    """The rank's events with `id`, `run` and `rank` columns added, sorted by (label, ts), so
    that each label's node table is a slice of it (no copy).

    Every column has two chunks: the rows of node labels, then the rest (flows, syncs, events
    of no label), allocated apart, so that node tables hold none of the rest once it is freed
    (flow events alone are a third of the rows of a typical trace).

    Sorting moves one column at a time and drops the original as it goes: pass a table nothing
    else refers to, and peak memory stays near one copy of it.
    """
    events = _on_gpu_lanes(events, rank)
    order = pc.sort_indices(
        events.select(["label", "ts", "ev_idx"]),
        sort_keys=[("label", "ascending"), ("ts", "ascending"), ("ev_idx", "ascending")],
    )
    parts = _node_rows_first(events["label"], order)
    handover = [events]
    del events
    sorted_columns = move_columns(
        handover, lambda column: pa.chunked_array([_one_chunk(column.take(p)) for p in parts])
    )
    lengths = [len(p) for p in parts]
    rank_column = _repeated(pa.scalar(rank, pa.int64()), lengths)
    keys = zip(rank_column.chunks, sorted_columns["ev_idx"].chunks, strict=True)
    # chunk by chunk: a compute function given chunked input returns one chunk
    sorted_columns["id"] = pa.chunked_array(
        [schema.event_key(run_idx, r, ev) for r, ev in keys], pa.int64()
    )
    sorted_columns["run"] = _repeated(pa.scalar(run, pa.string()), lengths)
    sorted_columns["rank"] = rank_column
    return pa.table(sorted_columns)


def keyed(events: pa.Table, rank: int, run: str, run_idx: int) -> pa.Table:
    """The rank's events with `id`, `run` and `rank` columns (and GPU device/stream as
    `with_keys` sets them), in the order given: for readers that select and aggregate (a
    summary's), which need no node tables and so no sort."""
    n = events.num_rows
    events = _on_gpu_lanes(events, rank)
    ev_idx = events["ev_idx"].to_numpy().astype(np.int64)
    ids = np.int64(schema.event_key(run_idx, rank, 0)) | ev_idx
    return (
        events.append_column("id", pa.array(ids, pa.int64()))
        .append_column("run", pa.repeat(pa.scalar(run, pa.string()), n))
        .append_column("rank", pa.repeat(pa.scalar(rank, pa.int64()), n))
    )


def _on_gpu_lanes(events: pa.Table, rank: int) -> pa.Table:
    """The events checked to be keyable (rank and ev_idx in range), each GPU row's device and
    stream set: Kineto puts GPU activity on pid = device, tid = stream; args say so too where
    present."""
    n = events.num_rows
    if not 0 <= rank <= schema.MAX_RANK or (n and pc.max(events["ev_idx"]).as_py() > schema.MAX_EV):
        raise ValueError(f"rank {rank} or an event index is out of range")
    is_gpu = pc.equal(events["label"], "Kernel")
    device = pc.if_else(is_gpu, pc.coalesce(events["device"], events["pid"]), events["device"])
    stream = pc.if_else(is_gpu, pc.coalesce(events["stream"], events["tid"]), events["stream"])
    events = events.set_column(events.column_names.index("device"), "device", device)
    return events.set_column(events.column_names.index("stream"), "stream", stream)


def _node_rows_first(labels: pa.ChunkedArray, order: pa.Array) -> list[pa.Array]:
    """`order` cut in two: the rows of node labels (which sort first), then the rest."""
    is_node = pc.is_in(labels, pa.array(EVENT_LABEL_VALUES)).take(order)
    count = pc.sum(is_node).as_py() or 0
    # node labels are capitalised, the others (flow, sync) not, and nulls sort last; a label
    # that sorted among them would cost memory, not correctness: then one part
    if count and not pc.all(is_node.slice(0, count)).as_py():
        count = len(order)
    return [order.slice(0, count), order.slice(count)]


EVENT_LABEL_VALUES = list(schema.EVENT_LABELS)


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array (no copy where it is one chunk already)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _repeated(value: pa.Scalar, lengths: list[int]) -> pa.ChunkedArray:
    return pa.chunked_array([pa.repeat(value, n) for n in lengths], value.type)


def node_tables(events: pa.Table) -> dict[str, pa.Table]:
    """Op, Runtime and Kernel tables in DDL column order, sorted by (rank, ts); MemoryEvent
    rows in time order."""
    out: dict[str, pa.Table] = {}
    for label in schema.EVENT_LABELS:
        part = label_slice(events, label)
        if label == "Runtime":
            is_sync = pc.is_in(part["name"], pa.array(sorted(SYNC_CALLS)))
            part = part.append_column("is_sync", is_sync)
        out[label] = schema.conform(part, schema.NODE_BY_LABEL[label])
    out[schema.MEMORY_EVENT.label] = memory_rows(events)
    return out


def label_slice(events: pa.Table, label: str) -> pa.Table:
    """The rows of one label from events sorted by label (as `with_keys` returns them)."""
    labels = events["label"]
    start = pc.sum(pc.less(labels, label)).as_py() or 0
    count = pc.sum(pc.equal(labels, label)).as_py() or 0
    if not count:  # a zero-row slice at a chunk's edge would keep the next chunk alive
        return events.schema.empty_table()
    return events.slice(start, count)
