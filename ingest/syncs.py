"""SYNCS edges from Kineto's `cuda_sync` events, with the endpoints HTA's critical path uses.

- Stream Sync: the last GPU activity on the synced (device, stream) that started before the sync
  ended → the runtime call with the sync's correlation (e.g. cudaStreamSynchronize).
- Context Sync: the same, once for every stream of the device → cudaDeviceSynchronize.
- Event Sync: the activity of the last launch onto (device, wait_on_stream) issued before the
  cudaEventRecord named by wait_on_cuda_event_record_corr_id → the waiting call
  (cudaEventSynchronize, and cudaEventQuery too, as in HTA).
- Stream Wait Event: that same activity → the activity of the next launch from the thread that
  called cudaStreamWaitEvent onto the waiting stream (Kernel → Kernel).

HTA keys its per-stream state by stream alone; we key by (device, stream), which is the same on
single-device ranks and right on multi-device ones.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import ints
from .link import launch_edges, rows_of
from .row_codes import row_codes

SOURCE = "cuda_sync"


def sync_edges(events: pa.Table) -> pa.Table:
    """SYNCS: GPU activity → the call or activity that waits for it (one rank's events)."""
    numbers = ["ev_idx", "ts", "dur", "correlation", "stream", "wait_on_stream",
               "wait_on_event_corr", "device", "pid"]  # fmt: skip
    syncs = rows_of(events, ("sync",), [*numbers, "sync_kind", "name"])
    if syncs.num_rows == 0:
        return _empty()
    gpu_columns = ["id", "device", "stream", "ts"]
    gpu = _columns(rows_of(events, ("Kernel",), gpu_columns), gpu_columns)
    runtime = rows_of(events, ("Runtime",), ["id", "correlation", "ts", "pid", "tid"])
    call_of = _call_by_correlation(runtime)
    launches = _launches(events, runtime, gpu)
    s = _columns(syncs, numbers)
    s["device"] = np.where(s["device"] >= 0, s["device"], s["pid"])
    s["end"] = s["ts"] + np.maximum(s["dur"], 0)
    kind = syncs["sync_kind"].to_numpy(zero_copy_only=False)
    name = syncs["name"].to_numpy(zero_copy_only=False)
    kind = np.where(pc.is_valid(syncs["sync_kind"]).to_numpy(zero_copy_only=False), kind, name)
    waiter = _lookup(call_of, s["correlation"], "id")
    parts = [
        _stream_sync(s, kind, gpu, waiter),
        _context_sync(s, kind, gpu, waiter),
        *_event_waits(s, kind, launches, runtime, call_of, waiter),
    ]
    return pa.concat_tables(parts)


def _empty() -> pa.Table:
    return pa.table(
        {
            "from_id": pa.array([], pa.int64()),
            "to_id": pa.array([], pa.int64()),
            "from_label": pa.array([], pa.string()),
            "to_label": pa.array([], pa.string()),
            "sync_type": pa.array([], pa.string()),
            "source": pa.array([], pa.string()),
            "sync_ev_idx": pa.array([], pa.int64()),
        }
    )


def _edges(
    src: np.ndarray, dst: np.ndarray, ev_idx: np.ndarray, to_label: str, sync_type: str
) -> pa.Table:
    keep = (src >= 0) & (dst >= 0)
    n = int(keep.sum())
    return pa.table(
        {
            "from_id": pa.array(src[keep], pa.int64()),
            "to_id": pa.array(dst[keep], pa.int64()),
            "from_label": pa.array(["Kernel"] * n, pa.string()),
            "to_label": pa.array([to_label] * n, pa.string()),
            "sync_type": pa.array([sync_type] * n, pa.string()),
            "source": pa.array([SOURCE] * n, pa.string()),
            "sync_ev_idx": pa.array(ev_idx[keep], pa.int64()),
        }
    )


def _columns(table: pa.Table, names: list[str]) -> dict[str, np.ndarray]:
    return {n: ints(table[n]) for n in names}


def _call_by_correlation(runtime: pa.Table) -> dict[str, np.ndarray]:
    rt = _columns(runtime, ["correlation", "id", "ts", "pid", "tid"])
    order = np.argsort(rt["correlation"], kind="stable")
    return {k: v[order] for k, v in rt.items()}


def _lookup(table: dict[str, np.ndarray], correlation: np.ndarray, column: str) -> np.ndarray:
    """table[column] of the row with each correlation, or -1."""
    keys = table["correlation"]
    if keys.size == 0:
        return np.full(correlation.shape, -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, correlation), 0, keys.size - 1)
    found = (keys[pos] == correlation) & (correlation >= 0)
    return np.where(found, table[column][pos], -1)


def _launches(
    events: pa.Table, runtime: pa.Table, gpu: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """One row per (launch call, device, stream): call ts and thread, and its last activity."""
    edges = launch_edges(events)
    if edges.num_rows == 0:
        return {
            k: np.zeros(0, dtype=np.int64)
            for k in ("call_ts", "pid", "tid", "device", "stream", "kernel", "kernel_ts")
        }
    calls = runtime.select(["id", "ts", "pid", "tid"]).rename_columns(
        ["from_id", "call_ts", "pid", "tid"]
    )
    kernels = pa.table(
        {
            "to_id": gpu["id"],
            "device": gpu["device"],
            "stream": gpu["stream"],
            "kernel_ts": gpu["ts"],
        }
    )
    rows = edges.join(calls, "from_id").join(kernels, "to_id")
    cols = _columns(
        rows, ["from_id", "call_ts", "pid", "tid", "device", "stream", "to_id", "kernel_ts"]
    )
    # a graph launch puts several kernels on one stream: keep the last one
    order = np.lexsort((cols["kernel_ts"], cols["stream"], cols["device"], cols["from_id"]))
    cols = {k: v[order] for k, v in cols.items()}
    last = np.ones(order.size, dtype=bool)
    same = (
        (cols["from_id"][1:] == cols["from_id"][:-1])
        & (cols["device"][1:] == cols["device"][:-1])
        & (cols["stream"][1:] == cols["stream"][:-1])
    )
    last[:-1] = ~same
    return {
        "call_ts": cols["call_ts"][last],
        "pid": cols["pid"][last],
        "tid": cols["tid"][last],
        "device": cols["device"][last],
        "stream": cols["stream"][last],
        "kernel": cols["to_id"][last],
        "kernel_ts": cols["kernel_ts"][last],
    }


def _group_search(
    keys: list[np.ndarray],
    values: np.ndarray,
    query_keys: list[np.ndarray],
    query_values: np.ndarray,
    before: bool,
) -> np.ndarray:
    """Per query, the row of the same group whose value is the last < query (before=True) or the
    first > query (before=False); -1 where none. Loops over groups, not rows."""
    out = np.full(query_values.shape, -1, dtype=np.int64)
    if values.size == 0 or query_values.size == 0:
        return out
    n = values.size
    group = row_codes(*(np.concatenate([k, q]) for k, q in zip(keys, query_keys, strict=True)))[0]
    row_group, query_group = group[:n], group[n:]
    order = np.lexsort((values, row_group))
    sorted_group, sorted_values = row_group[order], values[order]
    for g in np.unique(query_group):
        lo, hi = np.searchsorted(sorted_group, g, "left"), np.searchsorted(sorted_group, g, "right")
        if lo == hi:
            continue
        q = np.flatnonzero(query_group == g)
        side: Literal["left", "right"] = "left" if before else "right"
        pos = np.searchsorted(sorted_values[lo:hi], query_values[q], side=side) - (
            1 if before else 0
        )
        ok = (pos >= 0) & (pos < hi - lo)
        out[q[ok]] = order[lo + pos[ok]]
    return out


def _stream_sync(
    s: dict[str, np.ndarray], kind: np.ndarray, gpu: dict[str, np.ndarray], waiter: np.ndarray
) -> pa.Table:
    pick = np.flatnonzero(kind == "Stream Sync")
    row = _group_search(
        [gpu["device"], gpu["stream"]],
        gpu["ts"],
        [s["device"][pick], s["stream"][pick]],
        s["end"][pick],
        before=True,
    )
    src = np.where(row >= 0, gpu["id"][row], -1)
    return _edges(src, waiter[pick], s["ev_idx"][pick], "Runtime", "Stream Sync")


def _context_sync(
    s: dict[str, np.ndarray], kind: np.ndarray, gpu: dict[str, np.ndarray], waiter: np.ndarray
) -> pa.Table:
    pick = np.flatnonzero(kind == "Context Sync")
    parts = [
        _edges(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            "Runtime",
            "Context Sync",
        )
    ]
    pairs = set(zip(gpu["device"].tolist(), gpu["stream"].tolist(), strict=True))
    for device, stream in sorted(pairs):
        sel = pick[s["device"][pick] == device]
        row = _group_search(
            [gpu["device"], gpu["stream"]],
            gpu["ts"],
            [s["device"][sel], np.full(sel.size, stream)],
            s["end"][sel],
            before=True,
        )
        src = np.where(row >= 0, gpu["id"][row], -1)
        parts.append(_edges(src, waiter[sel], s["ev_idx"][sel], "Runtime", "Context Sync"))
    return pa.concat_tables(parts)


def _event_waits(
    s: dict[str, np.ndarray],
    kind: np.ndarray,
    launches: dict[str, np.ndarray],
    runtime: pa.Table,
    call_of: dict[str, np.ndarray],
    waiter: np.ndarray,
) -> list[pa.Table]:
    pick = np.flatnonzero((kind == "Event Sync") | (kind == "Stream Wait Event"))
    record_ts = _lookup(call_of, s["wait_on_event_corr"][pick], "ts")
    valid = (record_ts >= 0) & (s["wait_on_stream"][pick] >= 0)
    row = _group_search(
        [launches["device"], launches["stream"]],
        launches["call_ts"],
        [s["device"][pick], s["wait_on_stream"][pick]],
        record_ts,
        before=True,
    )
    src = np.where(valid & (row >= 0), launches["kernel"][row] if row.size else row, -1)
    is_event = kind[pick] == "Event Sync"
    event_sync = _edges(
        src[is_event], waiter[pick][is_event], s["ev_idx"][pick][is_event], "Runtime", "Event Sync"
    )
    waits = pick[~is_event]
    call_ts = _lookup(call_of, s["correlation"][waits], "ts")
    pid = _lookup(call_of, s["correlation"][waits], "pid")
    tid = _lookup(call_of, s["correlation"][waits], "tid")
    nxt = _group_search(
        [launches["pid"], launches["tid"], launches["device"], launches["stream"]],
        launches["call_ts"],
        [pid, tid, s["device"][waits], s["stream"][waits]],
        call_ts,
        before=False,
    )
    dst = np.where((call_ts >= 0) & (nxt >= 0), launches["kernel"][nxt] if nxt.size else nxt, -1)
    stream_wait = _edges(src[~is_event], dst, s["ev_idx"][waits], "Kernel", "Stream Wait Event")
    return [event_sync, stream_wait]
