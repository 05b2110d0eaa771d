"""One rank's events → the Op, Runtime and Kernel node tables, keyed by (run, rank, ev_idx)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .memory import release_arrow

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

    Sorting moves one column at a time and drops the original as it goes: pass a table nothing
    else refers to, and peak memory stays near one copy of it.
    """
    n = events.num_rows
    if not 0 <= rank <= schema.MAX_RANK or (n and pc.max(events["ev_idx"]).as_py() > schema.MAX_EV):
        raise ValueError(f"rank {rank} or an event index is out of range")
    is_gpu = pc.equal(events["label"], "Kernel")
    # Kineto puts GPU activity on pid = device, tid = stream; args say so too where present.
    device = pc.if_else(is_gpu, pc.coalesce(events["device"], events["pid"]), events["device"])
    stream = pc.if_else(is_gpu, pc.coalesce(events["stream"], events["tid"]), events["stream"])
    events = events.set_column(events.column_names.index("device"), "device", device)
    events = events.set_column(events.column_names.index("stream"), "stream", stream)
    order = pc.sort_indices(
        events.select(["label", "ts", "ev_idx"]),
        sort_keys=[("label", "ascending"), ("ts", "ascending"), ("ev_idx", "ascending")],
    )
    sorted_columns: dict[str, pa.ChunkedArray] = {}
    for name in events.column_names:
        sorted_columns[name] = events[name].take(order)
        events = events.drop_columns([name])
        release_arrow()  # else the allocator keeps the moved column: two copies resident
    rank_column = pa.repeat(pa.scalar(rank, pa.int64()), n)
    sorted_columns["id"] = schema.event_key(run_idx, rank_column, sorted_columns["ev_idx"])
    sorted_columns["run"] = pa.repeat(pa.scalar(run, pa.string()), n)
    sorted_columns["rank"] = rank_column
    return pa.table(sorted_columns)


def node_tables(events: pa.Table) -> dict[str, pa.Table]:
    """Op, Runtime and Kernel tables in DDL column order, sorted by (rank, ts)."""
    out: dict[str, pa.Table] = {}
    for label in schema.EVENT_LABELS:
        part = label_slice(events, label)
        if label == "Runtime":
            is_sync = pc.is_in(part["name"], pa.array(sorted(SYNC_CALLS)))
            part = part.append_column("is_sync", is_sync)
        out[label] = schema.conform(part, schema.NODE_BY_LABEL[label])
    return out


def label_slice(events: pa.Table, label: str) -> pa.Table:
    """The rows of one label from events sorted by label (as `with_keys` returns them)."""
    labels = events["label"]
    start = pc.sum(pc.less(labels, label)).as_py() or 0
    count = pc.sum(pc.equal(labels, label)).as_py() or 0
    return events.slice(start, count)
