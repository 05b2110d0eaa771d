"""JSON bytes → msgspec structs: the trace's top level, its events and the args every link
needs. Each event keeps `ts`, `dur` and `args` as raw JSON text, so that timestamps convert to
INT64 nanoseconds exactly (`columns`; Kineto writes µs with three decimals, beyond float64
precision at epoch scale) and `args` is stored verbatim. Odd field types (numeric names,
quoted ids) fall back to loose structs; errors name the event by its position in traceEvents.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pyarrow as pa

Num = int | str | None  # ids and numbers as Kineto writes them (old traces quote some)


class RawEvent(msgspec.Struct, gc=False):
    """One trace event: the fields the parse reads, `ts`, `dur` and `args` as raw JSON text."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: Num = None
    tid: Num = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")
    id: Num = None
    bp: str | None = None
    args: msgspec.Raw = msgspec.Raw(b"")


class _LooseEvent(RawEvent):
    """Fallback for traces with odd field types (e.g. numeric names); slower. `ph` stays a
    string: an event whose phase is not one is malformed."""

    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = None
    bp: Any = None


class Args(msgspec.Struct, gc=False):
    """The args every link needs; everything else stays in the verbatim JSON text."""

    external_id: Num = msgspec.field(default=None, name="External id")
    external_id_old: Num = msgspec.field(default=None, name="external id")
    correlation: Num = None
    seq: Num = msgspec.field(default=None, name="Sequence number")
    stream: Num = None
    stream_id: Num = None
    device: Num = None
    cuda_sync_kind: str | None = None
    wait_on_stream: Num = None
    wait_on_cuda_event_record_corr_id: Num = None
    rank: Num = None
    pg_name: Num = msgspec.field(default=None, name="Process Group Name")
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    coll_seq: Num = msgspec.field(default=None, name="Seq")


class _LooseArgs(Args):
    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_old: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    seq: Any = msgspec.field(default=None, name="Sequence number")
    stream: Any = None
    stream_id: Any = None
    device: Any = None
    cuda_sync_kind: Any = None
    wait_on_stream: Any = None
    wait_on_cuda_event_record_corr_id: Any = None
    rank: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    coll_name: Any = msgspec.field(default=None, name="Collective name")
    coll_seq: Any = msgspec.field(default=None, name="Seq")


class TraceShell(msgspec.Struct):
    """The top level, with each event kept as raw JSON text (a view into the file's bytes)."""

    traceEvents: list[msgspec.Raw] | None = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    baseTimeNanoseconds: Any = None
    host_name: Any = None
    deviceProperties: Any = None


class DecodedShell(TraceShell):
    """The top level with its events decoded at once: for JSON small enough that all their
    structs may exist together (`WHOLE_DECODE_BYTES`)."""

    traceEvents: list[RawEvent] | None = None


# The top level: an object with traceEvents, or (old traces) the list of events itself
SHELL_DECODER = msgspec.json.Decoder(TraceShell | list[msgspec.Raw])
# Up to this size the top level and its events are decoded in one pass (`DecodedShell`), about
# 40% faster than the shell and then its events; a file that fails it (odd field types, bad
# JSON) is decoded again the other way, which says what is wrong.
WHOLE_DECODE_BYTES = 8 << 20
WHOLE_DECODER = msgspec.json.Decoder(DecodedShell | list[RawEvent])
EVENT_DECODERS = (
    msgspec.json.Decoder(list[RawEvent]),
    msgspec.json.Decoder(list[_LooseEvent]),
)
# Events are decoded into structs this many at a time, so that the structs of a whole large
# trace never exist at once (they take several times the JSON's size).
CHUNK_EVENTS = 20_000
ARGS_DECODERS = (
    msgspec.json.Decoder(list[Args | None]),
    msgspec.json.Decoder(list[_LooseArgs | None]),
)


def decode_blob(decoders: tuple[msgspec.json.Decoder, ...], data: bytes) -> tuple[Any, bool]:
    """Decode with the typed decoder, falling back to the loose one on a type mismatch:
    (the values, whether loosely)."""
    try:
        return decoders[0].decode(data), False
    except msgspec.ValidationError:
        return decoders[1].decode(data), True


def first_line(exc: BaseException) -> str:
    """An error's message, its first line (its type's name where it has none)."""
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


_POSITION = re.compile(r"`\$\[(\d+)\]")


def event_position(exc: BaseException, offset: int = 0, indices: pa.Array | None = None) -> str:
    """'event N (problem)' from a msgspec error whose path starts with the position `$[k]` in
    the decoded list, N = offset + k or indices[k] (its index in traceEvents); 'event
    (problem)' where the error names no position."""
    message = first_line(exc)
    match = _POSITION.search(message)
    if not match:
        return f"event ({message})"
    k = int(match.group(1))
    index = indices[k].as_py() if indices is not None else offset + k
    return f"event {index} ({_POSITION.sub('`$', message)})"


def json_excerpt(value: Any) -> str:
    """A value as JSON text, cut to 40 characters (for error messages)."""
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
