"""The caching allocator's `[memory]` instants of one rank (`profile_memory=True`) → MemoryEvent
rows: each allocation (bytes > 0) or free (bytes < 0) on one device, the device's totals after
it as the trace records them, and the innermost CPU range it happened in (`op_id`)."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import schema
from .columns import MEMORY_LABEL
from .link import enclosing_ranges


class _MemoryArgs(msgspec.Struct):
    """The allocator's fields as Kineto writes them: integers."""

    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    addr: int | None = msgspec.field(default=None, name="Addr")


class _LooseMemoryArgs(msgspec.Struct):
    """The same, whatever their types (a trace that writes floats or strings): slower."""

    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    bytes: Any = msgspec.field(default=None, name="Bytes")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    addr: Any = msgspec.field(default=None, name="Addr")


_FIELDS = ("device_type", "device_id", "bytes", "total_allocated", "total_reserved", "addr")
_DECODERS = (
    msgspec.json.Decoder(list[_MemoryArgs | None]),
    msgspec.json.Decoder(list[_LooseMemoryArgs | None]),
)
INT64_MAX = (1 << 63) - 1
CHUNK = 1 << 16  # events decoded at a time: their structs never all exist at once


def memory_rows(events: pa.Table) -> pa.Table:
    """The MemoryEvent rows of one rank's keyed events (`nodes.with_keys` or `nodes.keyed`), in
    time order, with `op_id` (-1: no CPU range holds it)."""
    is_memory = pc.equal(events["label"], MEMORY_LABEL)
    if not pc.any(is_memory).as_py():  # most traces: no profile_memory
        return schema.arrow_schema(schema.MEMORY_EVENT).empty_table()
    narrow = events.select(["id", "run", "rank", "ev_idx", "ts", "pid", "tid", "args"])
    memory = narrow.filter(is_memory)
    memory = memory.take(pc.sort_indices(memory, [("ts", "ascending"), ("ev_idx", "ascending")]))
    columns = _arg_columns(memory["args"])
    out = memory.drop_columns(["args"])
    for name in _FIELDS:
        out = out.append_column(name, columns[name])
    out = out.append_column("op_id", pa.array(enclosing_ranges(events, memory), pa.int64()))
    return schema.conform(out, schema.MEMORY_EVENT)


def _arg_columns(args: pa.ChunkedArray) -> dict[str, pa.Array]:
    """The allocator's fields from each instant's args text; null where absent or not a whole
    number in range."""
    parts: dict[str, list[pa.Array]] = {name: [] for name in _FIELDS}
    texts = pc.fill_null(args, "null")
    for start in range(0, len(texts), CHUNK):
        chunk = texts.slice(start, CHUNK).to_pylist()
        blob = ("[" + ",".join(chunk) + "]").encode()
        try:
            decoded: list[Any] = _DECODERS[0].decode(blob)
            convert = None
        except (msgspec.DecodeError, msgspec.ValidationError):
            decoded, convert = _loose(blob, chunk), _as_int
        for name in _FIELDS:
            values = [getattr(d, name) if d is not None else None for d in decoded]
            if convert is not None:
                values = [convert(v) for v in values]
            parts[name].append(_in_range(values))
    return {
        name: pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())
        for name, chunks in parts.items()
    }


def _in_range(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowException):  # an integer beyond INT64: unknown
        return pa.array([_as_int(v) for v in values], pa.int64())


def _loose(blob: bytes, texts: list[str]) -> list[Any]:
    try:
        return _DECODERS[1].decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return [_one(text) for text in texts]


def _one(text: str) -> _LooseMemoryArgs | None:
    try:
        return msgspec.json.decode(text.encode(), type=_LooseMemoryArgs | None)
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
