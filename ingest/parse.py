"""One trace file → one Arrow event table per rank (merged multi-rank files are split by rank).

The JSON is decoded once with msgspec into typed structs that keep `ts`, `dur` and `args` as raw
JSON text, so timestamps convert to INT64 nanoseconds exactly (Kineto writes µs with three
decimals, beyond float64 precision at epoch scale) and `args` is stored verbatim.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .errors import TraceFormatError
from .schema import MAX_EV, MAX_RANK

OP_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "Operator", "overhead"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"})
KERNEL_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
)
SYNC_CATEGORY = "cuda_sync"
FLOW_PHASES = frozenset({"s", "f", "t"})
MEMORY_EVENT_NAME = "[memory]"
MEMORY_LABEL = "memory"  # the label of the rows of `[memory]` instants (no graph node label)

LABEL_OF_CATEGORY: dict[str, str] = {
    **{c: "Op" for c in OP_CATEGORIES},
    **{c: "Runtime" for c in RUNTIME_CATEGORIES},
    **{c: "Kernel" for c in KERNEL_CATEGORIES},
    SYNC_CATEGORY: "sync",
}

# process_name / process_labels metadata written by merge tools, e.g. "rank 3: python".
_RANK_IN_NAME = re.compile(r"\brank[\s_:#=-]*(\d+)", re.IGNORECASE | re.ASCII)


Num = int | str | None  # ids and numbers as Kineto writes them (old traces quote some)


class _RawEvent(msgspec.Struct):
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


class _LooseEvent(_RawEvent):
    """Fallback for traces with odd field types (e.g. numeric names); slower. `ph` stays a
    string: an event whose phase is not one is malformed."""

    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = None
    bp: Any = None


class _Args(msgspec.Struct):
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


class _LooseArgs(_Args):
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


_SHELL_DECODER = msgspec.json.Decoder(TraceShell | list[msgspec.Raw])
EVENT_DECODERS = (
    msgspec.json.Decoder(list[_RawEvent]),
    msgspec.json.Decoder(list[_LooseEvent]),
)
# Events are decoded into structs this many at a time, so that the structs of a whole large
# trace never exist at once (they take several times the JSON's size).
CHUNK_EVENTS = 20_000
_ARGS_DECODERS = (
    msgspec.json.Decoder(list[_Args | None]),
    msgspec.json.Decoder(list[_LooseArgs | None]),
)

# Limits on the JSON a file may hold (gunzipped), so that a small .gz expanding to many GB (a
# "gzip bomb") is refused while it is decompressed, before memory runs out. Both can be set per
# ingest in ParseOptions; these are the defaults.
GIB = 1 << 30
MAX_JSON_BYTES = 8 * GIB
# A .gz expanding more than this many times its size is refused once its JSON passes RATIO_FLOOR
# (Kineto traces compress 5-30x; a bomb of spaces or zeros about 1000x).
MAX_GZIP_RATIO = 200.0
RATIO_FLOOR = 1 * GIB
_GZIP_IN_STEP = 16 << 20  # compressed bytes fed at a time
_GZIP_MEMBER_STEP = 256 << 10  # the same in files of several gzip members
_GZIP_OUT_STEP = 64 << 20  # most JSON bytes decompressed at a time
_ZERO_PADDING = re.compile(rb"\x00*")

# Timestamps and durations must lie within ±2^62 ns (about 146 years either side of 0): then
# every end (ts + dur) and every difference between two of them fits in an INT64.
NS_LIMIT = 1 << 62
# Events dropped at parse time (and counted in Rank.skipped under these keys).
NO_TS = "no ts"  # complete or flow event without a numeric `ts`
BAD_DUR = "bad dur"  # complete event whose `dur` is negative or not a number
NO_PH = "no ph"  # event without a phase (`ph` missing or null): not known to be complete
DROP_REASONS = {
    NO_TS: "no numeric 'ts'",
    BAD_DUR: "negative or non-numeric 'dur'",
    NO_PH: "no 'ph'",
}


def decode_blob(decoders: tuple[msgspec.json.Decoder, ...], data: bytes) -> tuple[Any, bool]:
    """Decode with the typed decoder, falling back to the loose one on a type mismatch:
    (the values, whether loosely)."""
    try:
        return decoders[0].decode(data), False
    except msgspec.ValidationError:
        return decoders[1].decode(data), True


@dataclass(frozen=True)
class ParseOptions:
    """How to assign ranks: `rank` for a single-rank file without distributedInfo,
    `rank_of_pid` for merged files whose events do not say their rank. How much JSON a file may
    hold: `max_json_bytes` (gunzipped; None: MAX_JSON_BYTES) and, for a .gz whose JSON passes
    RATIO_FLOOR, at most `max_gzip_ratio` times its compressed size (None: MAX_GZIP_RATIO;
    0: no ratio limit). How a large file is read: see `read.rank_traces`."""

    rank: int | None = None
    rank_of_pid: Mapping[int, int] = field(default_factory=dict)
    max_json_bytes: int | None = None
    max_gzip_ratio: float | None = None
    # JSON above this many bytes is read block by block (None: read.STREAM_BYTES), its events
    # set aside on disk in a folder named after `spill_at` (None: the system's temp folder)
    stream_bytes: int | None = None
    spill_at: Path | None = None


DEFAULT_OPTIONS = ParseOptions()


@dataclass(frozen=True)
class RankTrace:
    """The events of one rank from one file, plus what the file says about the rank.
    `dropped` counts the rank's events left out at parse time, by reason (NO_TS, BAD_DUR)."""

    file: str
    rank: int
    events: pa.Table
    world_size: int | None
    schema_version: int | None
    base_time_ns: int | None
    device: int | None
    distributed_info: str
    dropped: Mapping[str, int] = field(default_factory=dict)
    # the host the file says it was recorded on (None: it does not); a merged file's one
    # host_name is taken as every rank's (a merge of several hosts' files should drop it)
    host: str | None = None
    # the GPU's name as `deviceProperties` gives it (of its device; None: the trace names none)
    gpu: str | None = None


def read_trace_bytes(path: Path, options: ParseOptions = ParseOptions()) -> bytes | bytearray:
    """The file's JSON bytes, gunzipped (streaming, within the options' limits) when it starts
    with the gzip magic."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(2) != _GZIP_MAGIC:
                _check_plain_size(path, size, options)
            f.seek(0)
            data = f.read()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    return _json_bytes(path, data, options)


_GZIP_MAGIC = b"\x1f\x8b"
_READ_STEP = 8 << 20


def json_blocks(path: Path, options: ParseOptions, whole_up_to: int) -> Iterator[bytes]:
    """The file's JSON bytes in blocks, gunzipped a step at a time within the options' limits;
    a plain file of at most `whole_up_to` bytes in one block."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            gzipped = f.read(2) == _GZIP_MAGIC
            f.seek(0)
            if gzipped:
                data = f.read()
            else:
                _check_plain_size(path, size, options)
                if size <= whole_up_to:
                    yield f.read()
                    return
                while block := f.read(_READ_STEP):
                    yield block
                return
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    ratio = MAX_GZIP_RATIO if options.max_gzip_ratio is None else options.max_gzip_ratio
    yield from _gunzip_steps(path, data, limit, ratio)


def _json_bytes(path: Path, data: bytes, options: ParseOptions) -> bytes | bytearray:
    if data[:2] != _GZIP_MAGIC:
        _check_plain_size(path, len(data), options)
        return data
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    ratio = MAX_GZIP_RATIO if options.max_gzip_ratio is None else options.max_gzip_ratio
    return _gunzip(path, data, limit, ratio)


def _check_plain_size(path: Path, size: int, options: ParseOptions) -> None:
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    if size > limit:
        raise TraceFormatError(
            path, f"{_size(size)} of JSON is over the limit of {_size(limit)}{_RAISE}"
        )


_RAISE = " (raise it with --max-json-gb)"


def _size(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def _gunzip(path: Path, data: bytes, limit: int, ratio: float) -> bytes | bytearray:
    """All gzip members of `data`, decompressed: JSON that comes in one step is returned as it
    came (no copy)."""
    first: bytes = b""  # the first step's JSON; `out` holds it and the rest once there is more
    out: bytearray | None = None
    for chunk in _gunzip_steps(path, data, limit, ratio):
        if out is not None:
            out += chunk
        elif not first:
            first = chunk
        else:
            out = bytearray(first)
            out += chunk
            first = b""
    return out if out is not None else first


def _gunzip_steps(path: Path, data: bytes, limit: int, ratio: float) -> Iterator[bytes]:
    """All gzip members of `data`, decompressed a step at a time: refused as soon as the JSON
    passes `limit` bytes, or `ratio` times the compressed size once past RATIO_FLOOR."""
    size = 0
    view = memoryview(data)
    fed = 0  # bytes of `data` given to the decompressor so far
    pending = b""  # input the decompressor has not consumed yet (it stopped at an output step)
    step = _GZIP_IN_STEP
    inflater = zlib.decompressobj(31)
    try:
        while True:
            if inflater.eof:
                fed -= len(inflater.unused_data)  # the next member starts there
                fed = _ZERO_PADDING.match(data, fed).end()  # type: ignore[union-attr]
                if fed >= len(data):
                    break
                # each member's leftover input is copied: small steps keep many members linear
                inflater, pending, step = zlib.decompressobj(31), b"", _GZIP_MEMBER_STEP
            if pending:
                chunk_in: bytes | memoryview = pending
            else:
                chunk_in = view[fed : fed + step]
                fed += len(chunk_in)
            chunk = inflater.decompress(chunk_in, max(1, min(_GZIP_OUT_STEP, limit + 1 - size)))
            pending = inflater.unconsumed_tail
            if chunk:
                size += len(chunk)
                _check_expansion(path, size, len(data), limit, ratio)
                yield chunk
            elif not pending and fed >= len(data) and not inflater.eof:
                raise TraceFormatError(path, "corrupt or truncated gzip (it ends early)")
    except zlib.error as exc:
        raise TraceFormatError(path, f"corrupt or truncated gzip ({exc})") from exc


def _check_expansion(path: Path, n: int, compressed: int, limit: int, ratio: float) -> None:
    if n > limit:
        raise TraceFormatError(
            path, f"gzip holds more than the limit of {_size(limit)} of JSON{_RAISE}"
        )
    if ratio and n > RATIO_FLOOR and n > ratio * compressed:
        raise TraceFormatError(
            path,
            f"gzip expands more than {ratio:g}x ({_size(compressed)} to over {_size(n)}): "
            f"refused as a likely gzip bomb{_RAISE}",
        )


def parse_file(path: Path, options: ParseOptions = ParseOptions()) -> list[RankTrace]:
    """Parse one Kineto trace file into one RankTrace per rank it holds."""
    return _parse(path, [read_trace_bytes(path, options)], options)


def parse_json_bytes(path: Path, data: bytes, options: ParseOptions) -> list[RankTrace]:
    """Parse a file's JSON bytes, already read (and gunzipped)."""
    return _parse(path, [data], options)


def parse_bytes(
    data: bytes, name: str | Path = "<bytes>", options: ParseOptions = ParseOptions()
) -> list[RankTrace]:
    """Parse a trace held in memory (plain or gzip JSON) as parse_file parses a file; `name`
    stands for the file in errors and in RankTrace.file."""
    path = Path(name)
    return _parse(path, [_json_bytes(path, data, options)], options)


def _parse(path: Path, handover: list[bytes | bytearray], options: ParseOptions) -> list[RankTrace]:
    """The JSON is handed over in a list, so that it is freed once its events are decoded.
    Values nested near the interpreter's recursion limit (about 1000 levels) may decode yet
    fail later, when converted or encoded: refused alike."""
    try:
        return _parse_json(path, handover, options)
    except RecursionError as exc:
        raise TraceFormatError(path, f"JSON nested too deeply ({first_line(exc)})") from exc


def _parse_json(
    path: Path, handover: list[bytes | bytearray], options: ParseOptions
) -> list[RankTrace]:
    data = handover.pop()
    try:
        shell = _SHELL_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"not a Kineto JSON trace ({first_line(exc)})") from exc
    if isinstance(shell, list):
        raw_events, shell = shell, TraceShell()
    elif shell.traceEvents is None:
        raise TraceFormatError(path, "JSON has no 'traceEvents' list")
    else:
        raw_events = shell.traceEvents
    if not raw_events:
        raise TraceFormatError(path, "trace has no events")
    if len(raw_events) > MAX_EV:
        raise TraceFormatError(path, f"trace has {len(raw_events):,} events, over {MAX_EV:,}")
    chunks: list[pa.Table] = []
    metadata: dict[int, dict[int, int]] = {}
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        blob = b"[" + b",".join(raw_events[start : start + CHUNK_EVENTS]) + b"]"
        try:
            events, loose = decode_blob(EVENT_DECODERS, blob)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFormatError(path, f"malformed {event_position(exc, offset=start)}") from exc
        del blob
        chunks.append(event_table(path, events, start, loose))
        for pid, ranks in process_names(events, start).items():
            for rank, ev_idx in ranks.items():
                metadata.setdefault(pid, {}).setdefault(rank, ev_idx)
    del raw_events, data
    events_table = pa.concat_tables(chunks)
    memory, memory_kept = memory_counts(events_table)
    if events_table.num_rows == memory:
        raise TraceFormatError(path, "trace has no complete ('X') events")
    if events_table["drop"].null_count == memory_kept:
        dropped = _dropped(events_table)
        raise TraceFormatError(path, f"trace has no complete ('X') events to keep ({dropped})")
    _check_span(path, events_table)
    # handed over in a list so that only _split_by_rank holds the table (it may reorder it)
    handover = [events_table]
    del events_table
    return _split_by_rank(path, handover, metadata, shell, options)


def memory_counts(events: pa.Table) -> tuple[int, int]:
    """How many rows are `[memory]` instants, and how many of them are kept (not no-ts): they
    make no trace of their own."""
    memory = pc.equal(events["label"], MEMORY_LABEL)
    kept = pc.and_(memory, pc.is_null(events["drop"]))
    return int(pc.sum(memory).as_py() or 0), int(pc.sum(kept).as_py() or 0)


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


def _dropped(events: pa.Table) -> str:
    counts = events["drop"].drop_null().value_counts().to_pylist()
    return ", ".join(f"{c['counts']:,} with {DROP_REASONS[c['values']]}" for c in counts)


def _check_span(path: Path, events: pa.Table) -> None:
    """Refuse timestamps so far apart that their difference overflows an INT64."""
    ts = events["ts"]
    first = pc.min(ts).as_py()
    last = pc.max(pc.add(ts, pc.fill_null(events["dur"], 0))).as_py()
    if first is not None and last is not None and last - first >= 1 << 63:
        raise TraceFormatError(
            path, f"timestamps span {last - first} ns, more than an INT64 can hold"
        )


def event_table(path: Path, raw: list[_RawEvent], first_idx: int, loose: bool) -> pa.Table:
    """Columns of the complete ('X'), flow and `[memory]` events, and the events without a
    phase; ev_idx is the position in traceEvents (`raw` starts at position `first_idx`). `drop`
    says why an event is to be left out (no ph, no numeric ts, a bad dur), null for the others."""
    keep = [
        i
        for i, e in enumerate(raw)
        if e.ph == "X" or e.ph in FLOW_PHASES or e.ph is None or _is_memory(e)
    ]
    evs = [raw[i] for i in keep]
    ev_idx = pc.add(pa.array(keep, pa.int64()), first_idx)
    cats = _str_column([e.cat for e in evs])
    phs = pa.array([e.ph for e in evs], pa.string())
    is_x = pc.fill_null(pc.equal(phs, "X"), False)
    other = pc.if_else(
        pc.fill_null(pc.equal(phs, "i"), False),
        pa.scalar(MEMORY_LABEL),  # only [memory] instants are kept
        pc.if_else(pc.is_valid(phs), pa.scalar("flow"), pa.scalar(None, pa.string())),
    )
    label = pc.if_else(is_x, _map_strings(cats, LABEL_OF_CATEGORY), other)
    args_raw = [bytes(e.args) if e.ph == "X" or e.ph == "i" else b"" for e in evs]
    args = _decode_args(path, args_raw, ev_idx)
    ts, _ = _ns_column(path, "ts", [bytes(e.ts) for e in evs], ev_idx)
    dur, dur_bad = _ns_column(path, "dur", [bytes(e.dur) for e in evs], ev_idx)
    bad_dur = pc.and_(is_x, pc.or_kleene(pc.less(dur, 0), dur_bad))
    keep_it = pa.scalar(None, pa.string())
    drop = pc.if_else(
        pc.is_null(phs),
        pa.scalar(NO_PH, pa.string()),
        pc.if_else(
            pc.is_null(ts),
            pa.scalar(NO_TS, pa.string()),
            pc.if_else(pc.fill_null(bad_dur, False), pa.scalar(BAD_DUR), keep_it),
        ),
    )
    columns: dict[str, pa.Array] = {
        "ev_idx": ev_idx,
        "label": label,
        "ph": phs,
        "cat": cats,
        "name": _str_column([e.name for e in evs]),
        "pid": _int_column([e.pid for e in evs], loose),
        "tid": _int_column([e.tid for e in evs], loose),
        "ts": ts,
        "dur": dur,
        "flow_id": _int_column([e.id for e in evs], loose),
        "flow_bp": _str_column([e.bp for e in evs]),
        "args": _text_column(args_raw),
    }
    columns.update(args)
    columns["drop"] = drop
    return pa.table(columns)


def _is_memory(event: _RawEvent) -> bool:
    """A `[memory]` instant: the caching allocator's record of one allocation or free
    (`profile_memory=True`), read by `ingest.memory_events`."""
    return event.ph == "i" and event.name == MEMORY_EVENT_NAME


def _decode_args(path: Path, args_raw: list[bytes], ev_idx: pa.Array) -> dict[str, pa.Array]:
    blob = b"[" + b",".join(a if a else b"null" for a in args_raw) + b"]"
    try:
        parsed, loose = decode_blob(_ARGS_DECODERS, blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        where = event_position(exc, indices=ev_idx)
        raise TraceFormatError(path, f"unreadable args of {where}") from exc
    none = _Args()
    rows = [a if a is not None else none for a in parsed]
    ext = _int_column([a.external_id for a in rows], loose)
    ext_old = _int_column([a.external_id_old for a in rows], loose)
    stream = _int_column([a.stream for a in rows], loose)
    stream_id = _int_column([a.stream_id for a in rows], loose)
    return {
        "external_id": pc.coalesce(ext, ext_old),
        "correlation": _int_column([a.correlation for a in rows], loose),
        "seq": _int_column([a.seq for a in rows], loose),
        "stream": pc.coalesce(stream, stream_id),
        "device": _int_column([a.device for a in rows], loose),
        "sync_kind": _str_column([a.cuda_sync_kind for a in rows]),
        "wait_on_stream": _int_column([a.wait_on_stream for a in rows], loose),
        "wait_on_event_corr": _int_column(
            [a.wait_on_cuda_event_record_corr_id for a in rows], loose
        ),
        "arg_rank": _arg_rank(path, [a.rank for a in rows], ev_idx, loose),
        "pg_name": _str_column([a.pg_name for a in rows]),
        "coll_name": _str_column([a.coll_name for a in rows]),
        "coll_seq": _int_column([a.coll_seq for a in rows], loose),
    }


def _arg_rank(path: Path, values: list[Any], ev_idx: pa.Array, loose: bool) -> pa.Array:
    """args.rank of each event; one that is there but no rank in 0..MAX_RANK is an error."""
    ranks = _int_column(values, loose)
    if ranks.null_count != values.count(None):
        first = next(i for i, v in enumerate(values) if v is not None and not ranks[i].is_valid)
        raise TraceFormatError(path, _bad_arg_rank(ev_idx[first].as_py(), _json(values[first])))
    outside = pc.or_(pc.less(ranks, 0), pc.greater(ranks, MAX_RANK))
    if pc.any(outside).as_py():
        first = pc.index(outside, True).as_py()
        raise TraceFormatError(path, _bad_arg_rank(ev_idx[first].as_py(), str(ranks[first])))
    return ranks


def _bad_arg_rank(ev_idx: int, shown: str) -> str:
    return f"event {ev_idx}: args.rank is {shown}, not a rank in 0..{MAX_RANK}"


def _text_column(raw: list[bytes]) -> pa.Array:
    """UTF-8 text of raw JSON values; empty → null."""
    binary = pa.array(raw, pa.binary())
    try:
        text = pc.cast(binary, pa.string())
    except pa.ArrowInvalid:
        text = pa.array([b.decode("utf-8", "replace") for b in raw], pa.string())
    return pc.if_else(pc.equal(pc.binary_length(text), 0), pa.scalar(None, pa.string()), text)


def _str_column(values: list[Any]) -> pa.Array:
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_as_str(v) for v in values], pa.string())


def _as_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _int_column(values: list[Any], loose: bool = False) -> pa.Array:
    """INT64 column from JSON values: ints as they are, numeric strings parsed, others null.
    `loose`: the values may hold floats (Arrow would truncate 1.5 to 1), lists, objects..."""
    try:
        if not loose:  # ints, strings and None
            return pa.array(values, pa.int64())
        inferred = pa.array(values)
        if pa.types.is_int64(inferred.type) or pa.types.is_null(inferred.type):
            return inferred.cast(pa.int64())
    except (pa.ArrowException, OverflowError, TypeError, ValueError, RecursionError):
        pass
    return pa.array(
        [v if type(v) is int and _I64_MIN <= v <= _I64_MAX else _as_int(v) for v in values],
        pa.int64(),
    )


def _as_int(value: Any) -> int | None:
    """An INT64 from a JSON value: an int, an integral float, a decimal or 0x string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if _I64_MIN <= value <= _I64_MAX else None
    if isinstance(value, float):
        return _as_int(int(value)) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if 0 < len(text) <= 24 and text.lstrip("-").isascii() and text.lstrip("-").isdigit():
            return _as_int(int(text))
        if 2 < len(text) <= 24 and text.lower().startswith("0x"):
            try:
                return _as_int(int(text, 16))
            except ValueError:
                return None
    return None


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_US = pa.decimal128(28, 6)
_THOUSAND = pa.scalar(1000, pa.decimal128(4, 0))
_NS_LO = pa.scalar(-NS_LIMIT, pa.decimal128(19, 0))
_NS_HI = pa.scalar(NS_LIMIT, pa.decimal128(19, 0))


def _ns_column(
    path: Path, field_name: str, raw: list[bytes], ev_idx: pa.Array
) -> tuple[pa.Array, pa.Array | bool]:
    """Exact INT64 ns from the JSON text of µs numbers, half to even: (ns, not a number).
    Missing values and values that are no JSON number (a string, null, a list...) are null in
    ns; the second is True where a value is present but no number (False: none is). A number
    outside ±NS_LIMIT ns is an error naming the event."""
    text = _text_column(raw)
    # Arrow's decimal parser is only safe on plain numbers (it gives garbage on 40 digits and
    # crashes on 1e-2147483647): others (exponents, more than 6 decimals such as
    # 0.30000000000000004, no number at all) are converted one by one, exactly. Kineto's
    # columns are all plain, which two scans of the text's bytes tell (a regex is 40x slower).
    micros, odd = _plain_micros(text), None
    if micros is None:
        odd = pc.invert(pc.fill_null(pc.match_substring_regex(text, _PLAIN_NUMBER), True))
        micros = pc.cast(pc.if_else(odd, pa.scalar(None, pa.string()), text), _US)
    nanos = pc.round(pc.multiply(micros, _THOUSAND), 0)
    outside = pc.or_(pc.less(nanos, _NS_LO), pc.greater_equal(nanos, _NS_HI))
    if pc.any(outside).as_py():
        first = pc.index(outside, True).as_py()
        raise TraceFormatError(
            path, _out_of_range(field_name, text[first].as_py(), ev_idx[first].as_py())
        )
    values = pc.cast(nanos, pa.int64())
    if odd is None or not pc.any(odd).as_py():
        return values, False
    rows = pc.indices_nonzero(odd)
    odd_values, odd_bad = _ns_one_by_one(path, field_name, text.take(rows), ev_idx.take(rows))
    bad = pc.replace_with_mask(pa.nulls(len(text), pa.bool_()).fill_null(False), odd, odd_bad)
    return pc.replace_with_mask(values, odd, odd_values), bad


_PLAIN_NUMBER = r"^-?[0-9]{1,22}(\.[0-9]{0,6})?$"


def _plain_micros(text: pa.Array) -> pa.Array | None:
    """The values as decimal µs where all are plain numbers of at most 29 characters (or
    missing), else None. JSON text without 'e' or 'E' is a number without exponent, or
    something Arrow refuses to cast (a string, null, a list...)."""
    if text.null_count == len(text):
        return pc.cast(text, _US)
    longest = pc.max(pc.binary_length(text)).as_py()
    data = text.buffers()[2]
    chars = data.to_pybytes() if data is not None else b""
    if longest > 29 or b"e" in chars or b"E" in chars:
        return None
    try:
        return pc.cast(text, _US)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _out_of_range(field_name: str, text: str, ev_idx: int) -> str:
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"event {ev_idx}: '{field_name}' {shown} µs is out of range (within ±2^62 ns)"


def _ns_one_by_one(
    path: Path, field_name: str, text: pa.Array, ev_idx: pa.Array
) -> tuple[pa.Array, pa.Array]:
    values: list[int | None] = []
    bad: list[bool] = []
    for i, t in enumerate(text.to_pylist()):
        nanos = _ns_of(t) if t is not None else None
        if nanos is not None and not -NS_LIMIT <= nanos < NS_LIMIT:
            raise TraceFormatError(path, _out_of_range(field_name, t, ev_idx[i].as_py()))
        values.append(nanos)
        bad.append(t is not None and nanos is None)
    return pa.array(values, pa.int64()), pa.array(bad, pa.bool_())


def _ns_of(text: str) -> int | None:
    """ns of a JSON number's text in µs (None: no number); beyond ±2^80 it is 2^80."""
    try:
        micros = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    if not micros.is_finite():
        return None
    if micros.adjusted() > 20:
        return (1 << 80) * (1 if micros > 0 else -1)
    exact = Context(prec=len(micros.as_tuple().digits) + 30)
    return int(micros.scaleb(3, exact).to_integral_value(ROUND_HALF_EVEN, exact))


def _map_strings(values: pa.Array, mapping: Mapping[str, str]) -> pa.Array:
    keys = pa.array(list(mapping), pa.string())
    index = pc.index_in(values, value_set=keys)
    return pc.take(pa.array(list(mapping.values()), pa.string()), index)


def process_names(raw: list[_RawEvent], first_idx: int) -> dict[int, dict[int, int]]:
    """pid → {rank: index of the first event naming it} from metadata events whose name says
    the rank (merged files); a pid may be named with several ranks (an error, if it matters)."""
    ranks: dict[int, dict[int, int]] = {}
    for i, e in enumerate(raw):
        if e.ph != "M" or e.name not in ("process_name", "process_labels"):
            continue
        pid = _as_int(e.pid)
        if pid is None or not bytes(e.args):
            continue
        try:
            args = msgspec.json.decode(bytes(e.args))
        except msgspec.DecodeError:
            continue
        text = args.get("name") or args.get("labels") if isinstance(args, dict) else None
        match = _RANK_IN_NAME.search(str(text)) if text else None
        if not match:
            continue
        digits = match.group(1)
        if len(digits) <= 7 and int(digits) <= MAX_RANK:  # else no rank: a number in a name
            ranks.setdefault(pid, {}).setdefault(int(digits), first_idx + i)
    return ranks


def _split_by_rank(
    path: Path,
    handover: list[pa.Table],
    metadata: dict[int, dict[int, int]],
    top: TraceShell,
    options: ParseOptions,
) -> list[RankTrace]:
    events = handover.pop()
    arg_ranks = pc.unique(events["arg_rank"].drop_null()).to_pylist()
    named_ranks = {r for ranks in metadata.values() for r in ranks}
    named_ranks |= set(options.rank_of_pid.values())
    merged = len(set(arg_ranks) | named_ranks) > 1
    dist = distributed_info(path, top)
    world_size = trace_world_size(path, dist)
    if not merged:
        rank = options.rank
        if rank is None:
            rank = info_rank(path, dist)
        if rank is None:
            rank = arg_ranks[0] if arg_ranks else (next(iter(named_ranks), 0))
        return [rank_trace(path, rank, events, top, world_size)]
    if options.rank is not None:
        raise TraceFormatError(path, "holds several ranks; --rank applies to single-rank files")
    rank = _event_ranks(path, events, metadata, options)
    handover.append(events.append_column("rank", rank))
    del events
    events = _rows_by_rank(handover)
    ranks = events["rank"].to_numpy()
    bounds = [0, *((ranks[1:] != ranks[:-1]).nonzero()[0] + 1).tolist(), len(ranks)]
    if world_size is None or world_size < len(bounds) - 1:
        world_size = int(ranks.max()) + 1 if len(ranks) else None
    return [
        rank_trace(
            path, int(ranks[a]), events.slice(a, b - a).drop_columns(["rank"]), top, world_size
        )
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def distributed_info(path: Path, top: TraceShell) -> dict[str, Any]:
    """The trace's distributedInfo (empty where it has none; not an object: an error)."""
    info = top.distributedInfo
    if info is None:
        return {}
    if not isinstance(info, dict):
        raise TraceFormatError(path, f"distributedInfo is {_json(info)}, not an object")
    return info


def info_rank(path: Path, dist: dict[str, Any]) -> int | None:
    """distributedInfo.rank; one that is there but no rank is an error (not rank 0)."""
    value = dist.get("rank")
    if value is None:
        return None
    rank = None if isinstance(value, bool) else _as_int(value)
    if rank is None or not 0 <= rank <= MAX_RANK:
        raise TraceFormatError(
            path,
            f"distributedInfo.rank is {_json(value)}, not a rank in 0..{MAX_RANK} (pass --rank N)",
        )
    return rank


def trace_world_size(path: Path, dist: dict[str, Any]) -> int | None:
    """distributedInfo.world_size (None where it is not there)."""
    value = dist.get("world_size")
    if value is None:
        return None
    size = None if isinstance(value, bool) else _as_int(value)
    if size is None or not 1 <= size <= MAX_RANK + 1:
        raise TraceFormatError(
            path, f"distributedInfo.world_size is {_json(value)}, not a size in 1..{MAX_RANK + 1}"
        )
    return size


def _json(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."


def _rows_by_rank(handover: list[pa.Table]) -> pa.Table:
    """The rows with a rank, ordered by (rank, ev_idx), moved one column at a time so that a
    merged file's events exist about once in memory, not three times (the table is taken out
    of `handover`, so nothing else holds it)."""
    events = handover.pop()
    known = pc.indices_nonzero(pc.is_valid(events["rank"]))
    keys = events.select(["rank", "ev_idx"]).take(known)
    order = pc.take(
        known, pc.sort_indices(keys, sort_keys=[("rank", "ascending"), ("ev_idx", "ascending")])
    )
    columns: dict[str, pa.ChunkedArray] = {}
    for name in events.column_names:
        columns[name] = events[name].take(order)
        events = events.drop_columns([name])
    return pa.table(columns)


_NEEDS_RANK = pa.array(["Op", "Runtime", "Kernel", "sync", "flow"])


def _event_ranks(
    path: Path, events: pa.Table, metadata: dict[int, dict[int, int]], options: ParseOptions
) -> pa.Array:
    """Rank of each event: args.rank, else its pid's rank (`resolve_pid_ranks`)."""
    pairs, needing = rank_facts(events)
    pid_rank = resolve_pid_ranks(path, metadata, pairs, needing, options)
    return pc.coalesce(events["arg_rank"], _rank_by_pid(events["pid"], pid_rank))


def rank_facts(
    events: pa.Table,
) -> tuple[dict[tuple[int | None, int], int], list[int | None]]:
    """What events say of their ranks: (pid, args.rank) → the first ev_idx saying it, and the
    pids (first seen first) of events that need a rank and carry no args.rank."""
    ranked = events.select(["pid", "arg_rank", "ev_idx"]).filter(pc.is_valid(events["arg_rank"]))
    firsts = ranked.group_by(["pid", "arg_rank"], use_threads=False).aggregate([("ev_idx", "min")])
    columns = (firsts[c].to_pylist() for c in ("pid", "arg_rank", "ev_idx_min"))
    pairs = {(pid, rank): ev for pid, rank, ev in zip(*columns, strict=True)}
    needs = pc.and_(pc.is_null(events["arg_rank"]), pc.is_in(events["label"], _NEEDS_RANK))
    return pairs, pc.unique(pc.filter(events["pid"], needs)).to_pylist()


def resolve_pid_ranks(
    path: Path,
    metadata: Mapping[int, Mapping[int, int]],
    pairs: Mapping[tuple[int | None, int], int],
    needing: Iterable[int | None],
    options: ParseOptions,
) -> dict[int, int]:
    """pid → rank for the events without args.rank of a merged file: --rank-of-pid, else the
    one rank process metadata names, else the one rank the pid's other events name. From what
    the file says: `metadata` pid → {rank: first event naming it}, `pairs` (pid, args.rank) →
    first ev_idx, `needing` the pids (first seen first) of events that need a rank and carry
    no args.rank. A pid labelled with another rank than an event on it says, or left without
    a rank (or labelled two) where an event needs one, is an error naming the events."""
    given = set(options.rank_of_pid)
    named = {pid: ranks for pid, ranks in metadata.items() if pid not in given}
    single = {pid: next(iter(ranks)) for pid, ranks in named.items() if len(ranks) == 1}
    clashes = [
        (ev, pid, rank)
        for (pid, rank), ev in pairs.items()
        if pid in single and single[pid] != rank
    ]
    if clashes:
        ev, pid, rank = min(clashes)
        raise TraceFormatError(
            path,
            f"pid {pid} is labelled rank {single[pid]} (process_name metadata, event "
            f"{named[pid][single[pid]]}) but event {ev} on it says args.rank {rank}; pass "
            f"--rank-of-pid {pid}=RANK if the pid is shared",
        )
    from_args: dict[int, set[int]] = {}
    for maybe_pid, arg_rank in pairs:
        if maybe_pid is not None:
            from_args.setdefault(maybe_pid, set()).add(arg_rank)
    pid_rank = {p: min(r) for p, r in from_args.items() if len(r) == 1}
    pid_rank.update(single)
    for p in (p for p, ranks in named.items() if len(ranks) > 1):
        pid_rank.pop(p, None)
    pid_rank.update(options.rank_of_pid)
    orphans = [p for p in needing if p is None or p not in pid_rank]
    for orphan in orphans:
        if orphan is not None and orphan in named and len(named[orphan]) > 1:
            labels = sorted(named[orphan].items())[:2]
            raise TraceFormatError(
                path,
                f"pid {orphan} is labelled both rank {labels[0][0]} and rank {labels[1][0]} "
                f"(process_name metadata, events {labels[0][1]} and {labels[1][1]}) and "
                f"events on it carry no args.rank; pass --rank-of-pid {orphan}=RANK",
            )
    if orphans:
        raise TraceFormatError(
            path,
            f"merged multi-rank trace: cannot tell the rank of events on pid(s) {orphans[:5]}; "
            "pass --rank-of-pid PID=RANK for each",
        )
    return pid_rank


def _rank_by_pid(pid: pa.ChunkedArray, pid_rank: Mapping[int, int]) -> pa.ChunkedArray:
    pids = pa.array(list(pid_rank), pa.int64())
    ranks = pa.array(list(pid_rank.values()), pa.int64())
    return pc.take(ranks, pc.index_in(pid, value_set=pids))


def gpu_name(top: TraceShell, device: int | None) -> str | None:
    """The name `deviceProperties` gives the rank's GPU (`device`, else the first named)."""
    props = top.deviceProperties if isinstance(top.deviceProperties, list) else []
    named = [
        p for p in props if isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"]
    ]
    for p in named:
        if device is not None and p.get("id") == device:
            return str(p["name"])
    return str(named[0]["name"]) if named else None


def file_host(top: TraceShell) -> str | None:
    """The host a file says it was recorded on (Kineto's top-level `host_name`)."""
    return top.host_name if isinstance(top.host_name, str) and top.host_name else None


def rank_trace(
    path: Path,
    rank: int,
    events: pa.Table,
    top: TraceShell,
    world_size: int | None,
) -> RankTrace:
    """One rank's trace from its events (those to drop counted by why and left out), with
    the file's metadata: its devices, host, GPU and clock base."""
    if not 0 <= rank <= MAX_RANK:
        raise TraceFormatError(path, f"rank {rank} is out of range 0..{MAX_RANK} (pass --rank N)")
    dropped: dict[str, int] = {}
    if events["drop"].null_count < events.num_rows:
        counts = events["drop"].drop_null().value_counts().to_pylist()
        dropped = {c["values"]: c["counts"] for c in counts}
        events = events.filter(pc.is_null(events["drop"]))
    devices = pc.unique(pc.filter(events["device"], pc.equal(events["label"], "Kernel")))
    devices = devices.drop_null().to_pylist()
    device = min(devices) if devices else None
    return RankTrace(
        file=str(path),
        rank=rank,
        events=events.drop_columns(["arg_rank", "drop"]),
        world_size=world_size,
        schema_version=_as_int(top.schemaVersion),
        base_time_ns=_as_int(top.baseTimeNanoseconds),
        device=device,
        distributed_info=msgspec.json.encode(top.distributedInfo).decode(),
        dropped=dropped,
        host=file_host(top),
        gpu=gpu_name(top, device),
    )
