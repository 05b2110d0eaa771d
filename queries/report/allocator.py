"""The caching allocator's timeline, from a rank's `[memory]` instants (MemoryEvent rows; traces
profiled with `profile_memory=True`): per device and step, how much was allocated and freed,
what was allocated at the step's start and end, the peak, when and inside what it happened, the
memory reserved then and at most, and the short-lived allocations (freed in the step they were
made: the scratch buffers a step could keep and reuse).

Every figure is the trace's own: `Total Allocated` / `Total Reserved` as the allocator wrote
them after each event, `Bytes` per event, `Addr` pairing an allocation with its free. A step is
its window (`StepWindow`: its start to the next step's); a rank without steps has one row per
device over the whole trace (step -1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest import schema
from tracegraph.ingest.arrays import ints
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import GraphStore

from .analyses import Row
from .steps import StepWindow

WHOLE_TRACE = -1
STEP_PREFIX = "ProfilerStep#"
NO_ADDR = -1  # `Addr` not recorded
# c10::DeviceType values a trace writes (ROCm builds write HIP's, 6, or CUDA's)
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}
# the enclosing ranges named in `peak_in`: annotations and operators, not python frames
NAMED_CATEGORIES = ("user_annotation", "cpu_op", "Operator", "cuda_runtime", "Runtime")
COLUMNS = ["ts", "ev_idx", "pid", "tid", "device_type", "device_id", "bytes", "total_allocated",
           "total_reserved", "addr", "op_id"]  # fmt: skip


def device_name(device_type: int, device_id: int) -> str:
    """`cuda:0`, `cpu` (the host's id is -1), `type 7:0` for a type not named here."""
    kind = DEVICE_TYPES.get(device_type, f"type {device_type}")
    return kind if device_id < 0 else f"{kind}:{device_id}"


@dataclass(frozen=True)
class _Events:
    """One rank's MemoryEvent columns as numpy, in time order."""

    ts: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray  # device_type * 2**32 + device_id + 1: one key per device
    bytes: np.ndarray
    allocated: np.ndarray  # -1: not recorded
    reserved: np.ndarray
    addr: np.ndarray

    @classmethod
    def of(cls, table: pa.Table) -> _Events:
        def column(name: str, default: int) -> np.ndarray:
            return ints(table[name], default)

        order = np.lexsort((column("ev_idx", 0), column("ts", 0)))
        kind, index = column("device_type", -1), column("device_id", -1)
        return cls(
            column("ts", 0)[order],
            column("pid", -1)[order],
            column("tid", -1)[order],
            ((kind << 32) + index + 1)[order],
            column("bytes", 0)[order],
            column("total_allocated", -1)[order],
            column("total_reserved", -1)[order],
            column("addr", NO_ADDR)[order],
        )


def stored_events(store: GraphStore, run_idx: int, rank: int) -> pa.Table:
    """The rank's MemoryEvent rows in the database (none in one an older tracegraph made)."""
    if not store.has_table("MemoryEvent"):
        return pa.table({c: pa.array([], pa.int64()) for c in COLUMNS})
    lo, hi = schema.key_range(run_idx, rank)
    # validated integers inlined: Kuzu prunes the id scan only for literals
    fields = ", ".join(f"m.{c} AS {c}" for c in COLUMNS)
    return store.run(
        f"MATCH (m:MemoryEvent) WHERE m.id >= {lo} AND m.id < {hi} RETURN {fields}"
    ).table


def memory_timeline(store: GraphStore, run: str | None, rank: int | None = None) -> pa.Table:
    """The allocator's series of a run (or one rank of it): per MemoryEvent in time order within
    each rank and device, its rank, device (`cuda:0`), ts (ns), bytes, the device's allocated
    and reserved bytes after it, and the op it happened in (`op_id`)."""
    _, run_idx = resolve_run(store, run)
    if not store.has_table("MemoryEvent"):
        lo = hi = 0
    else:
        lo, hi = schema.key_range(run_idx, rank)
    table = (
        store.run(
            f"MATCH (m:MemoryEvent) WHERE m.id >= {lo} AND m.id < {hi} "
            "RETURN m.rank AS rank, m.device_type AS device_type, m.device_id AS device_id, "
            "m.ts AS ts, m.ev_idx AS ev_idx, m.bytes AS bytes, m.total_allocated AS allocated, "
            "m.total_reserved AS reserved, m.op_id AS op_id"
        ).table
        if hi > lo
        else _NO_TIMELINE
    )
    order = pc.sort_indices(
        table,
        [(c, "ascending") for c in ("rank", "device_type", "device_id", "ts", "ev_idx")],
    )
    table = table.take(order)
    kinds = pc.fill_null(table["device_type"], -1).to_pylist()
    ids = pc.fill_null(table["device_id"], -1).to_pylist()
    names = [device_name(k, i) for k, i in zip(kinds, ids, strict=True)]
    return pa.table(
        {
            "rank": table["rank"],
            "device": pa.array(names, pa.string()),
            "ts": table["ts"],
            "bytes": table["bytes"],
            "allocated": table["allocated"],
            "reserved": table["reserved"],
            "op_id": table["op_id"],
        }
    )


_NO_TIMELINE = pa.table(
    {
        c: pa.array([], pa.int64())
        for c in (
            "rank",
            "device_type",
            "device_id",
            "ts",
            "ev_idx",
            "bytes",
            "allocated",
            "reserved",
            "op_id",
        )
    }  # fmt: skip
)


def allocator_rows(
    rank: int, memory: pa.Table, windows: Sequence[StepWindow], cpu_rows: pa.Table
) -> list[Row]:
    """One row per device and step of the rank (`memory`: its MemoryEvent rows; `cpu_rows`:
    its events with cat, name, pid, tid, ts and dur, to name where each peak happened)."""
    if memory.num_rows == 0:
        return []
    ev = _Events.of(memory.select(COLUMNS))
    freed_at = _freed_at(ev)
    ranges = _Ranges.of(cpu_rows)
    spans = [(w.step, w.ts, w.end) for w in windows]
    if not spans:  # the whole trace, from the rank's first event
        first = min(int(ev.ts[0]), int(pc.min(cpu_rows["ts"]).as_py() or ev.ts[0]))
        spans = [(WHOLE_TRACE, first, int(ev.ts[-1]) + 1)]
    rows = []
    for device in np.unique(ev.device).tolist():
        on_device = ev.device == device
        kind, index = device >> 32, (device & 0xFFFFFFFF) - 1
        for step, start, end in spans:
            sel = np.flatnonzero(on_device & (ev.ts >= start) & (ev.ts < end))
            earlier = np.flatnonzero(on_device & (ev.ts < start))
            if sel.size:
                before = int(earlier[-1]) if earlier.size else -1
                row = _window_row(ev, sel, before, start, end, freed_at)
                at = row.pop("_peak_at")
                row["peak_in"] = "" if at < 0 else ranges.holding(ev, at)
                rows.append({"rank": rank, "device": device_name(kind, index), "step": step, **row})
    return rows


def churn_note(rows: Sequence[Row]) -> str:
    """What the allocator's own record says of a rank's churn (its rows of one or more steps),
    for the `memory_churn` finding's detail; empty where it has none."""
    notes = []
    for device in sorted({r["device"] for r in rows}):
        mine = [r for r in rows if r["device"] == device]
        steps = len(mine)
        short = sum(r["short_lived"] for r in mine) / steps
        short_mib = sum(r["short_lived_bytes"] for r in mine) / steps / 2**20
        top = max(mine, key=lambda r: r["peak_bytes"])
        parts = top["peak_in"].split(" > ")
        where = " > ".join(parts[1:] if parts[0].startswith(STEP_PREFIX) else parts)
        note = (
            f"on {device}, {short:,.0f} allocations a step freed within it ({short_mib:,.1f} MiB), "
            f"peak {top['peak_bytes'] / 2**20:,.1f} MiB allocated"
        )
        if where:
            note += f" inside {where}"
        reserved = max(r["max_reserved_bytes"] for r in mine)
        if reserved > 0:
            note += f", {reserved / 2**20:,.1f} MiB reserved at most"
        notes.append(note)
    return "the allocator's [memory] events: " + "; ".join(notes) if notes else ""


def _window_row(
    ev: _Events, sel: np.ndarray, before: int, start: int, end: int, freed_at: np.ndarray
) -> dict[str, int]:
    """The figures of one device's events `sel` in a window; `before` is its last event before
    the window (-1: none), which tells what the window starts with where its own first event
    does not."""
    size = ev.bytes[sel]
    made, gone = size > 0, size < 0
    known = ev.allocated[sel] >= 0
    first, last = sel[0], sel[-1]
    at_start, reserved_at_start = _at_start(ev, first, before)
    peak_at, peak = -1, at_start  # the step's start holds the peak until an event tops it
    if known.any():
        top = sel[known][int(np.argmax(ev.allocated[sel][known]))]
        if ev.allocated[top] > peak:
            peak_at, peak = int(top), int(ev.allocated[top])
    # allocations freed before the step ends: what a step could keep and reuse
    short = made & (freed_at[sel] >= 0) & (freed_at[sel] < end)
    reserved = ev.reserved[sel]
    return {
        "allocations": int(made.sum()),
        "frees": int(gone.sum()),
        "allocated_bytes": int(size[made].sum()),
        "freed_bytes": int(-size[gone].sum()),
        "start_bytes": at_start,
        "end_bytes": int(ev.allocated[last]),
        "peak_bytes": peak,
        "peak_offset_ns": int(ev.ts[peak_at]) - start if peak_at >= 0 else 0,
        "reserved_at_peak_bytes": int(ev.reserved[peak_at]) if peak_at >= 0 else reserved_at_start,
        "max_reserved_bytes": int(reserved.max()) if (reserved >= 0).any() else -1,
        "short_lived": int(short.sum()),
        "short_lived_bytes": int(size[short].sum()),
        "_peak_at": peak_at,
    }


def _at_start(ev: _Events, first: int, before: int) -> tuple[int, int]:
    """Allocated and reserved bytes as a window starts (-1: not known): what its first event
    says it found (allocated less its bytes), else what the device's last event before it
    left; reserved only from that event."""
    allocated = int(ev.allocated[first] - ev.bytes[first]) if ev.allocated[first] >= 0 else -1
    if allocated < 0 and before >= 0:
        allocated = int(ev.allocated[before])
    reserved = int(ev.reserved[before]) if before >= 0 else -1
    return allocated, reserved


def _freed_at(ev: _Events) -> np.ndarray:
    """For each allocation, the time of the free that next follows it at its address on its
    device (-1: never freed in the trace, or not an allocation)."""
    out = np.full(len(ev.ts), -1, np.int64)
    order = np.lexsort((np.arange(len(ev.ts)), ev.addr, ev.device))  # time order within
    order = order[ev.addr[order] != NO_ADDR]  # an event without its address pairs with none
    same = (ev.device[order][1:] == ev.device[order][:-1]) & (
        ev.addr[order][1:] == ev.addr[order][:-1]
    )
    alloc_then_free = same & (ev.bytes[order][:-1] > 0) & (ev.bytes[order][1:] < 0)
    pairs = np.flatnonzero(alloc_then_free)
    out[order[pairs]] = ev.ts[order[pairs + 1]]
    return out


@dataclass(frozen=True)
class _Ranges:
    """The rank's annotation and operator ranges (`NAMED_CATEGORIES`)."""

    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    names: list[str]

    @classmethod
    def of(cls, rows: pa.Table) -> _Ranges:
        named = rows.select(["cat", "name", "pid", "tid", "ts", "dur"]).filter(
            pc.is_in(rows["cat"], value_set=pa.array(NAMED_CATEGORIES))
        )
        ts = ints(named["ts"], 0)
        return cls(
            ints(named["pid"]),
            ints(named["tid"]),
            ts,
            ts + ints(named["dur"], 0),
            pc.fill_null(named["name"], "").to_pylist(),
        )

    def holding(self, ev: _Events, at: int) -> str:
        """The ranges holding event `at` on its thread, outermost first (`ProfilerStep#6 >
        scratch_buffers > aten::randn > aten::empty`)."""
        t = ev.ts[at]
        holds = (self.ts <= t) & (self.end >= t) & (self.pid == ev.pid[at])
        picked = np.flatnonzero(holds & (self.tid == ev.tid[at]))
        order = picked[np.lexsort((-self.end[picked], self.ts[picked]))]
        return " > ".join(self.names[i] for i in order.tolist())


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("device", pa.string()), ("step", pa.int64()),
     ("allocations", pa.int64()), ("frees", pa.int64()), ("allocated_bytes", pa.int64()),
     ("freed_bytes", pa.int64()), ("start_bytes", pa.int64()), ("end_bytes", pa.int64()),
     ("peak_bytes", pa.int64()), ("peak_offset_ns", pa.int64()), ("peak_in", pa.string()),
     ("reserved_at_peak_bytes", pa.int64()), ("max_reserved_bytes", pa.int64()),
     ("short_lived", pa.int64()), ("short_lived_bytes", pa.int64())]
)  # fmt: skip
