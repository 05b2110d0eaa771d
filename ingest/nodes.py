"""One rank's events → the Op, Runtime and Kernel node tables, keyed by (run, rank, ev_idx)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .parse import RankTrace

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


def with_keys(trace: RankTrace, run: str, run_idx: int) -> pa.Table:
    """The rank's events with `id`, `run` and `rank` columns added."""
    events = trace.events
    n = events.num_rows
    if trace.rank > schema.MAX_RANK or (n and pc.max(events["ev_idx"]).as_py() > schema.MAX_EV):
        raise ValueError(f"{trace.file}: rank or event index out of range")
    rank = pa.array([trace.rank] * n, pa.int64())
    ids = schema.event_key(run_idx, rank, events["ev_idx"])
    is_gpu = pc.equal(events["label"], "Kernel")
    # Kineto puts GPU activity on pid = device, tid = stream; args say so too where present.
    device = pc.if_else(is_gpu, pc.coalesce(events["device"], events["pid"]), events["device"])
    stream = pc.if_else(is_gpu, pc.coalesce(events["stream"], events["tid"]), events["stream"])
    events = events.set_column(events.column_names.index("device"), "device", device)
    events = events.set_column(events.column_names.index("stream"), "stream", stream)
    return (
        events.append_column("id", ids)
        .append_column("run", pa.array([run] * n, pa.string()))
        .append_column("rank", rank)
    )


def node_tables(events: pa.Table) -> dict[str, pa.Table]:
    """Op, Runtime and Kernel tables in DDL column order, sorted by (rank, ts)."""
    out: dict[str, pa.Table] = {}
    for label in schema.EVENT_LABELS:
        part = events.filter(pc.equal(events["label"], label))
        if label == "Runtime":
            is_sync = pc.is_in(part["name"], pa.array(sorted(SYNC_CALLS)))
            part = part.append_column("is_sync", is_sync)
        part = part.sort_by([("rank", "ascending"), ("ts", "ascending"), ("ev_idx", "ascending")])
        out[label] = schema.conform(part, schema.NODE_BY_LABEL[label])
    return out
