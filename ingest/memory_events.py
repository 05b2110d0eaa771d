"""The caching allocator's `[memory]` instants of one rank (`profile_memory=True`) → MemoryEvent
rows: each allocation (bytes > 0) or free (bytes < 0) on one device, the device's totals after
it as the trace records them, and the innermost CPU range it happened in (`op_id`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .link import enclosing_ranges
from .parse import MEMORY_LABEL

Num = int | float | str | None


class _MemoryArgs(msgspec.Struct):
    total_reserved: Num = msgspec.field(default=None, name="Total Reserved")
    total_allocated: Num = msgspec.field(default=None, name="Total Allocated")
    bytes: Num = msgspec.field(default=None, name="Bytes")
    device_id: Num = msgspec.field(default=None, name="Device Id")
    device_type: Num = msgspec.field(default=None, name="Device Type")
    addr: Num = msgspec.field(default=None, name="Addr")


_FIELDS = ("device_type", "device_id", "bytes", "total_allocated", "total_reserved", "addr")
_DECODER = msgspec.json.Decoder(list[_MemoryArgs | None])
INT64_MAX = (1 << 63) - 1


def memory_rows(events: pa.Table) -> pa.Table:
    """The MemoryEvent rows of one rank's keyed events (`nodes.with_keys` or `nodes.keyed`), in
    time order, with `op_id` (-1: no CPU range holds it)."""
    narrow = events.select(["id", "run", "rank", "ev_idx", "ts", "pid", "tid", "args", "label"])
    memory = narrow.filter(pc.equal(narrow["label"], MEMORY_LABEL)).drop_columns(["label"])
    memory = memory.take(pc.sort_indices(memory, [("ts", "ascending"), ("ev_idx", "ascending")]))
    columns = _arg_columns(memory["args"])
    out = memory.drop_columns(["args"])
    for name in _FIELDS:
        out = out.append_column(name, columns[name])
    out = out.append_column("op_id", pa.array(enclosing_ranges(events, memory), pa.int64()))
    return schema.conform(out, schema.MEMORY_EVENT)


def _arg_columns(args: pa.ChunkedArray) -> dict[str, pa.Array]:
    """The allocator's fields from each instant's args text; null where absent or not a whole
    number (a trace that writes floats keeps their integral ones)."""
    texts = pc.fill_null(args, "null").to_pylist()
    try:
        decoded = _DECODER.decode(b"[" + ",".join(texts).encode() + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = [_one(text) for text in texts]
    return {
        name: pa.array([_as_int(getattr(d, name, None)) for d in decoded], pa.int64())
        for name in _FIELDS
    }


def _one(text: str) -> _MemoryArgs | None:
    try:
        return msgspec.json.decode(text.encode(), type=_MemoryArgs)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) <= INT64_MAX else None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, int) and -INT64_MAX - 1 <= value <= INT64_MAX:
        return value
    return None
