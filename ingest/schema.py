"""One definition of the graph: Arrow schemas for the loaders and Kuzu DDL for the store.

Column order here is load order: Kuzu's COPY maps columns by position, so every table handed to
the store is selected through `arrow_schema(...)` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa

_KUZU_TYPES = {
    pa.int64(): "INT64",
    pa.string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.float64(): "DOUBLE",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType


@dataclass(frozen=True)
class NodeTable:
    label: str
    columns: tuple[Column, ...]
    primary_key: str = "id"


@dataclass(frozen=True)
class RelTable:
    label: str
    pairs: tuple[tuple[str, str], ...]
    columns: tuple[Column, ...]


def _cols(*spec: tuple[str, pa.DataType]) -> tuple[Column, ...]:
    return tuple(Column(n, t) for n, t in spec)


I64, STR, BOOL = pa.int64(), pa.string(), pa.bool_()

# Columns every event node carries, in this order.
EVENT_COLUMNS = _cols(
    ("id", I64),
    ("run", STR),
    ("rank", I64),
    ("ev_idx", I64),
    ("cat", STR),
    ("name", STR),
    ("ts", I64),
    ("dur", I64),
    ("pid", I64),
    ("tid", I64),
    ("external_id", I64),
    ("seq", I64),
    ("args", STR),
)

OP = NodeTable("Op", EVENT_COLUMNS)
RUNTIME = NodeTable("Runtime", EVENT_COLUMNS + _cols(("correlation", I64), ("is_sync", BOOL)))
KERNEL = NodeTable(
    "Kernel", EVENT_COLUMNS + _cols(("device", I64), ("stream", I64), ("correlation", I64))
)
COLLECTIVE = NodeTable(
    "Collective",
    _cols(
        ("id", I64),
        ("run", STR),
        ("name", STR),
        ("process_group", STR),
        ("seq", I64),
        ("matched_by", STR),
        ("participants", I64),
    ),
)
RUN = NodeTable(
    "Run",
    _cols(
        ("name", STR),
        ("run_idx", I64),
        ("sources", STR),
        ("ingested_at", STR),
        ("tool_version", STR),
        ("world_size", I64),
        ("edge_counts", STR),
        ("archive_hashes", STR),  # JSON: each run-archive file's sha256, by its name there
    ),
    primary_key="name",
)
RANK = NodeTable(
    "Rank",
    _cols(
        ("id", I64),
        ("run", STR),
        ("rank", I64),
        ("file", STR),
        ("device", I64),
        ("schema_version", I64),
        ("base_time_ns", I64),
        ("event_count", I64),
        ("op_count", I64),
        ("runtime_count", I64),
        ("kernel_count", I64),
        ("cuda_sync_count", I64),
        ("skipped", STR),
        ("host", STR),  # the trace's host_name (None in a merged file): ranks sharing a clock
        # "summary": the rank's events were not loaded (`ingest --summary`), only its Step rows
        # and CollectiveArrival rows; "full" (or None, before tiers): every event
        ("tier", STR),
        ("gpu", STR),  # the GPU's name as the trace's deviceProperties give it (None: none)
    ),
)
STEP = NodeTable(
    "Step",
    _cols(
        ("id", I64),  # the ProfilerStep annotation's event id (whole trace: ev_idx MAX_EV)
        ("run", STR),
        ("rank", I64),
        ("step", I64),  # N of ProfilerStep#N; -1: a rank without annotations (whole trace)
        ("name", STR),
        ("ts", I64),
        ("dur", I64),
        ("gpu_busy_ns", I64),  # union of the rank's GPU activity intervals in the window
        ("kernel_count", I64),  # activities in the window (the last step starting <= k.ts)
    ),
)
COLLECTIVE_ARRIVAL = NodeTable(
    # a rank's part in one collective instance (its NCCL/RCCL kernel or gloo range) in a run
    # whatever its tier: what the fleet questions read without the rank's events
    "CollectiveArrival",
    _cols(
        ("id", I64),  # the participant event's key (as its Kernel's or Op's id)
        ("run", STR),
        ("rank", I64),
        ("collective", I64),  # the Collective's id
        ("ts", I64),
        ("dur", I64),
        ("anchor", I64),  # what places it in a step: its launching call's start, else its own
        ("args", STR),
    ),
)
MEMORY_EVENT = NodeTable(
    # one `[memory]` instant (`profile_memory=True`): the caching allocator after an allocation
    # (bytes > 0) or a free (bytes < 0) on one device, as the trace records it
    "MemoryEvent",
    _cols(
        ("id", I64),  # its event key (run, rank, ev_idx), as an Op's
        ("run", STR),
        ("rank", I64),
        ("ev_idx", I64),
        ("ts", I64),
        ("pid", I64),
        ("tid", I64),
        ("device_type", I64),  # c10::DeviceType: 0 CPU, 1 CUDA, 6 HIP (ROCm), 12 XPU, ...
        ("device_id", I64),  # -1: the host
        ("bytes", I64),
        ("total_allocated", I64),  # on the device, after this event
        ("total_reserved", I64),
        ("addr", I64),
        ("op_id", I64),  # the innermost CPU range (Op or Runtime) it happened in; -1: none
    ),
)
EDGE_SET = NodeTable(
    "EdgeSet",
    _cols(
        ("id", STR),
        ("run", STR),
        ("name", STR),
        ("producer", STR),
        ("version", STR),
        ("options", STR),
        ("window", STR),
        ("ranks", STR),
        ("created_at", STR),
        ("copy_hash", STR),  # sha256 of the set's Parquet copy (`copies`); NULL: none written
    ),
)

EVENT_LABELS = ("Op", "Runtime", "Kernel")
CPU_LABELS = ("Op", "Runtime")

CALLS = RelTable("CALLS", tuple((a, b) for a in CPU_LABELS for b in CPU_LABELS), ())
LAUNCHES = RelTable("LAUNCHES", (("Runtime", "Kernel"),), _cols(("via", STR)))
NEXT_ON_STREAM = RelTable("NEXT_ON_STREAM", (("Kernel", "Kernel"),), _cols(("gap_ns", I64)))
SYNCS = RelTable(
    "SYNCS",
    (("Kernel", "Runtime"), ("Kernel", "Kernel")),
    _cols(("sync_type", STR), ("source", STR), ("sync_ev_idx", I64)),
)
PART_OF = RelTable("PART_OF", (("Kernel", "Collective"), ("Op", "Collective")), ())
DEP = RelTable(
    "DEP",
    tuple((a, b) for a in EVENT_LABELS for b in EVENT_LABELS),
    _cols(
        ("edge_set", STR),
        ("type", STR),
        ("src_boundary", STR),
        ("dst_boundary", STR),
        ("weight_ns", I64),
        ("on_critical_path", BOOL),
        ("path_order", I64),
    ),
)

NODE_TABLES = (
    RUN, RANK, OP, RUNTIME, KERNEL, COLLECTIVE, COLLECTIVE_ARRIVAL, STEP, MEMORY_EVENT, EDGE_SET,
)  # fmt: skip
REL_TABLES = (CALLS, LAUNCHES, NEXT_ON_STREAM, SYNCS, PART_OF, DEP)
NODE_BY_LABEL = {t.label: t for t in NODE_TABLES}
REL_BY_LABEL = {t.label: t for t in REL_TABLES}

# Rel tables are loaded from Arrow tables whose first two columns are the endpoint keys.
REL_ENDPOINT_COLUMNS = _cols(("from_id", I64), ("to_id", I64))


def arrow_schema(table: NodeTable | RelTable) -> pa.Schema:
    """The Arrow schema a table must have to be loaded (rel tables lead with from_id, to_id)."""
    columns = table.columns
    if isinstance(table, RelTable):
        columns = REL_ENDPOINT_COLUMNS + columns
    return pa.schema([pa.field(c.name, c.type) for c in columns])


def conform(data: pa.Table, table: NodeTable | RelTable) -> pa.Table:
    """Select and cast `data`'s columns into the table's load order; missing columns fail."""
    schema = arrow_schema(table)
    missing = [n for n in schema.names if n not in data.column_names]
    if missing:
        raise ValueError(f"{table.label}: missing columns {missing}")
    return pa.table([data[n].cast(schema.field(n).type) for n in schema.names], schema=schema)


def ddl() -> list[str]:
    """CREATE statements for every table, nodes first."""
    out = []
    for t in NODE_TABLES:
        cols = ", ".join(f"`{c.name}` {_KUZU_TYPES[c.type]}" for c in t.columns)
        out.append(
            f"CREATE NODE TABLE IF NOT EXISTS {t.label}({cols}, PRIMARY KEY(`{t.primary_key}`))"
        )
    for r in REL_TABLES:
        pairs = ", ".join(f"FROM {a} TO {b}" for a, b in r.pairs)
        cols = "".join(f", `{c.name}` {_KUZU_TYPES[c.type]}" for c in r.columns)
        out.append(f"CREATE REL TABLE IF NOT EXISTS {r.label}({pairs}{cols})")
    return out


def added_columns(table: NodeTable, present: set[str]) -> list[str]:
    """ALTER statements adding the table's columns a database made by an older tracegraph
    lacks (new columns come last in a table, so load order stays column order)."""
    return [
        f"ALTER TABLE {table.label} ADD `{c.name}` {_KUZU_TYPES[c.type]}"
        for c in table.columns
        if c.name not in present
    ]


# Identity: (run_idx, rank, ev_idx) packed into one INT64 key.
KeyT = TypeVar("KeyT", int, np.ndarray)
RANK_BITS, EV_BITS = 20, 32
MAX_RUNS, MAX_RANK, MAX_EV = (1 << 11) - 1, (1 << RANK_BITS) - 1, (1 << EV_BITS) - 1


def key_range(run_idx: int, rank: int | None = None) -> tuple[int, int]:
    """[lo, hi) of the event keys of a run, or of one rank of it."""
    run_idx, lo_rank = int(run_idx), 0 if rank is None else int(rank)
    if not 0 <= run_idx <= MAX_RUNS or not 0 <= lo_rank <= MAX_RANK:
        raise ValueError(f"run index {run_idx} or rank {rank} out of range")
    lo = (run_idx << (RANK_BITS + EV_BITS)) | (lo_rank << EV_BITS)
    return lo, lo + (1 << (EV_BITS if rank is not None else RANK_BITS + EV_BITS))


def key_rank(keys: KeyT) -> KeyT:
    """The rank of event keys (an int, or a numpy array of them)."""
    return (keys >> EV_BITS) & MAX_RANK


def event_key(run_idx: int, rank: pa.Array | int, ev_idx: pa.Array | int) -> pa.Array | int:
    """The INT64 primary key of an event: run_idx << 52 | rank << 32 | ev_idx."""
    import pyarrow.compute as pc

    if isinstance(rank, int) and isinstance(ev_idx, int):
        return (run_idx << (RANK_BITS + EV_BITS)) | (rank << EV_BITS) | ev_idx
    base = pa.scalar(run_idx << (RANK_BITS + EV_BITS), I64)
    shifted = pc.shift_left(pc.cast(rank, I64), pa.scalar(EV_BITS, I64))
    return pc.bit_wise_or(pc.bit_wise_or(base, shifted), pc.cast(ev_idx, I64))
