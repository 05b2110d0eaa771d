"""One trace file → one Arrow event table per rank (merged multi-rank files are split by rank).

The JSON is decoded once with msgspec into typed structs that keep `ts`, `dur` and `args` as raw
JSON text, so timestamps convert to INT64 nanoseconds exactly (Kineto writes µs with three
decimals, beyond float64 precision at epoch scale) and `args` is stored verbatim.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .errors import TraceFormatError
from .schema import MAX_RANK

OP_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "Operator", "overhead"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"})
KERNEL_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
)
SYNC_CATEGORY = "cuda_sync"
FLOW_PHASES = frozenset({"s", "f", "t"})

LABEL_OF_CATEGORY: dict[str, str] = {
    **{c: "Op" for c in OP_CATEGORIES},
    **{c: "Runtime" for c in RUNTIME_CATEGORIES},
    **{c: "Kernel" for c in KERNEL_CATEGORIES},
    SYNC_CATEGORY: "sync",
}

# process_name / process_labels metadata written by merge tools, e.g. "rank 3: python".
_RANK_IN_NAME = re.compile(r"\brank[\s_:#=-]*(\d+)", re.IGNORECASE)


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
    """Fallback for traces with odd field types (e.g. numeric names); slower."""

    ph: Any = None
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


class _TraceShell(msgspec.Struct):
    """The top level, with each event kept as raw JSON text (a view into the file's bytes)."""

    traceEvents: list[msgspec.Raw] | None = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    baseTimeNanoseconds: Any = None


_SHELL_DECODER = msgspec.json.Decoder(_TraceShell | list[msgspec.Raw])
_EVENT_DECODERS = (
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


def _decode(decoders: tuple[msgspec.json.Decoder, ...], data: bytes) -> Any:
    """Decode with the typed decoder, falling back to the loose one on a type mismatch."""
    try:
        return decoders[0].decode(data)
    except msgspec.ValidationError:
        return decoders[1].decode(data)


@dataclass(frozen=True)
class ParseOptions:
    """How to assign ranks: `rank` for a single-rank file without distributedInfo,
    `rank_of_pid` for merged files whose events do not say their rank."""

    rank: int | None = None
    rank_of_pid: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RankTrace:
    """The events of one rank from one file, plus what the file says about the rank."""

    file: str
    rank: int
    events: pa.Table
    world_size: int | None
    schema_version: int | None
    base_time_ns: int | None
    device: int | None
    distributed_info: str


def read_trace_bytes(path: Path) -> bytes:
    """The file's JSON bytes, gunzipped when it starts with the gzip magic."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(path, f"corrupt or truncated gzip ({exc})") from exc
    return data


def parse_file(path: Path, options: ParseOptions = ParseOptions()) -> list[RankTrace]:
    """Parse one Kineto trace file into one RankTrace per rank it holds."""
    data = read_trace_bytes(path)
    try:
        shell = _SHELL_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"not a Kineto JSON trace ({_first_line(exc)})") from exc
    if isinstance(shell, list):
        raw_events, shell = shell, _TraceShell()
    elif shell.traceEvents is None:
        raise TraceFormatError(path, "JSON has no 'traceEvents' list")
    else:
        raw_events = shell.traceEvents
    if not raw_events:
        raise TraceFormatError(path, "trace has no events")
    chunks: list[pa.Table] = []
    metadata: dict[int, int] = {}
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        blob = b"[" + b",".join(raw_events[start : start + CHUNK_EVENTS]) + b"]"
        try:
            events = _decode(_EVENT_DECODERS, blob)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise TraceFormatError(path, f"malformed event ({_first_line(exc)})") from exc
        del blob
        chunks.append(_event_table(path, events, start))
        metadata.update(_process_names(events))
    del raw_events, data
    events_table = pa.concat_tables(chunks)
    if events_table.num_rows == 0:
        raise TraceFormatError(path, "trace has no complete ('X') events")
    # handed over in a list so that only _split_by_rank holds the table (it may reorder it)
    handover = [events_table]
    del events_table
    return _split_by_rank(path, handover, metadata, shell, options)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _event_table(path: Path, raw: list[_RawEvent], first_idx: int) -> pa.Table:
    """Columns of the complete ('X') and flow events; ev_idx is the position in traceEvents
    (`raw` starts at position `first_idx`)."""
    keep = [i for i, e in enumerate(raw) if e.ph == "X" or e.ph in FLOW_PHASES]
    evs = [raw[i] for i in keep]
    cats = _str_column([e.cat for e in evs])
    phs = pa.array([e.ph for e in evs], pa.string())
    label = pc.if_else(
        pc.equal(phs, "X"),
        _map_strings(cats, LABEL_OF_CATEGORY),
        pa.scalar("flow", pa.string()),
    )
    is_x = [e.ph == "X" for e in evs]
    args_raw = [bytes(e.args) if x else b"" for e, x in zip(evs, is_x, strict=True)]
    args = _decode_args(path, args_raw)
    columns: dict[str, pa.Array] = {
        "ev_idx": pc.add(pa.array(keep, pa.int64()), first_idx),
        "label": label,
        "ph": phs,
        "cat": cats,
        "name": _str_column([e.name for e in evs]),
        "pid": _int_column([e.pid for e in evs]),
        "tid": _int_column([e.tid for e in evs]),
        "ts": _ns_column(path, "ts", [bytes(e.ts) for e in evs]),
        "dur": _ns_column(path, "dur", [bytes(e.dur) for e in evs]),
        "flow_id": _int_column([e.id for e in evs]),
        "flow_bp": _str_column([e.bp for e in evs]),
        "args": _text_column(args_raw),
    }
    columns.update(args)
    table = pa.table(columns)
    has_ts = pc.is_valid(table["ts"])
    return table.filter(has_ts)


def _decode_args(path: Path, args_raw: list[bytes]) -> dict[str, pa.Array]:
    blob = b"[" + b",".join(a if a else b"null" for a in args_raw) + b"]"
    try:
        parsed = _decode(_ARGS_DECODERS, blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"unreadable event args ({_first_line(exc)})") from exc
    none = _Args()
    rows = [a if a is not None else none for a in parsed]
    ext = _int_column([a.external_id for a in rows])
    ext_old = _int_column([a.external_id_old for a in rows])
    stream = _int_column([a.stream for a in rows])
    stream_id = _int_column([a.stream_id for a in rows])
    return {
        "external_id": pc.coalesce(ext, ext_old),
        "correlation": _int_column([a.correlation for a in rows]),
        "seq": _int_column([a.seq for a in rows]),
        "stream": pc.coalesce(stream, stream_id),
        "device": _int_column([a.device for a in rows]),
        "sync_kind": _str_column([a.cuda_sync_kind for a in rows]),
        "wait_on_stream": _int_column([a.wait_on_stream for a in rows]),
        "wait_on_event_corr": _int_column([a.wait_on_cuda_event_record_corr_id for a in rows]),
        "arg_rank": _int_column([a.rank for a in rows]),
        "pg_name": _str_column([a.pg_name for a in rows]),
        "coll_name": _str_column([a.coll_name for a in rows]),
        "coll_seq": _int_column([a.coll_seq for a in rows]),
    }


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


def _int_column(values: list[Any]) -> pa.Array:
    """INT64 column from JSON values: ints as they are, numeric strings parsed, others null."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array(
            [v if type(v) is int and _I64_MIN <= v <= _I64_MAX else _as_int(v) for v in values],
            pa.int64(),
        )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 63) else None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return _as_int(int(text))
        if text.lower().startswith("0x"):
            try:
                return _as_int(int(text, 16))
            except ValueError:
                return None
    return None


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_US = pa.decimal128(28, 6)
_THOUSAND = pa.scalar(1000, pa.decimal128(4, 0))


def _ns_column(path: Path, field_name: str, raw: list[bytes]) -> pa.Array:
    """Exact INT64 ns from the JSON text of µs numbers (missing → null), half to even."""
    text = _text_column(raw)
    try:
        micros = pc.cast(text, _US)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # more than 6 decimals (e.g. 0.30000000000000004) or exponents: exact, one by one
        return pa.array([_ns_of(path, field_name, t) for t in text.to_pylist()], pa.int64())
    nanos = pc.round(pc.multiply(micros, _THOUSAND), 0)
    return pc.cast(nanos, pa.int64())


def _ns_of(path: Path, field_name: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        nanos = int((Decimal(text) * 1000).to_integral_value(ROUND_HALF_EVEN))
    except (InvalidOperation, ValueError, OverflowError) as exc:
        raise TraceFormatError(path, f"'{field_name}' is not a number: {text[:40]}") from exc
    if not -(1 << 63) <= nanos < (1 << 63):
        raise TraceFormatError(path, f"'{field_name}' is out of range: {text[:40]}")
    return nanos


def _map_strings(values: pa.Array, mapping: Mapping[str, str]) -> pa.Array:
    keys = pa.array(list(mapping), pa.string())
    index = pc.index_in(values, value_set=keys)
    return pc.take(pa.array(list(mapping.values()), pa.string()), index)


def _process_names(raw: list[_RawEvent]) -> dict[int, int]:
    """pid → rank from metadata events whose name says the rank (merged files)."""
    ranks: dict[int, int] = {}
    for e in raw:
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
        if match:
            ranks[pid] = int(match.group(1))
    return ranks


def _split_by_rank(
    path: Path,
    handover: list[pa.Table],
    metadata_ranks: dict[int, int],
    top: _TraceShell,
    options: ParseOptions,
) -> list[RankTrace]:
    events = handover.pop()
    arg_ranks = pc.unique(events["arg_rank"].drop_null()).to_pylist()
    named_ranks = set(metadata_ranks.values()) | set(options.rank_of_pid.values())
    merged = len(set(arg_ranks) | named_ranks) > 1
    dist = top.distributedInfo if isinstance(top.distributedInfo, dict) else {}
    world_size = _as_int(dist.get("world_size"))
    if not merged:
        rank = options.rank
        if rank is None:
            rank = _as_int(dist.get("rank"))
        if rank is None:
            rank = arg_ranks[0] if arg_ranks else (next(iter(named_ranks), 0))
        return [_rank_trace(path, rank, events, top, world_size)]
    if options.rank is not None:
        raise TraceFormatError(path, "holds several ranks; --rank applies to single-rank files")
    rank = _event_ranks(path, events, metadata_ranks, options)
    handover.append(events.append_column("rank", rank))
    del events
    events = _rows_by_rank(handover)
    ranks = events["rank"].to_numpy()
    bounds = [0, *((ranks[1:] != ranks[:-1]).nonzero()[0] + 1).tolist(), len(ranks)]
    if world_size is None or world_size < len(bounds) - 1:
        world_size = int(ranks.max()) + 1 if len(ranks) else None
    return [
        _rank_trace(
            path, int(ranks[a]), events.slice(a, b - a).drop_columns(["rank"]), top, world_size
        )
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


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


def _event_ranks(
    path: Path, events: pa.Table, metadata_ranks: dict[int, int], options: ParseOptions
) -> pa.Array:
    """Rank of each event: args.rank, else its pid's rank (--rank-of-pid, process metadata,
    or the single rank the pid's other events name)."""
    pid_rank = _pid_ranks_from_args(events)
    pid_rank.update(metadata_ranks)
    pid_rank.update(options.rank_of_pid)
    pids = pa.array(list(pid_rank), pa.int64())
    by_pid = pc.take(
        pa.array(list(pid_rank.values()), pa.int64()), pc.index_in(events["pid"], value_set=pids)
    )
    rank = pc.coalesce(events["arg_rank"], by_pid)
    needed = pc.and_(
        pc.is_null(rank),
        pc.is_in(events["label"], pa.array(["Op", "Runtime", "Kernel", "sync", "flow"])),
    )
    if pc.any(needed).as_py():
        orphans = pc.unique(pc.filter(events["pid"], needed)).to_pylist()[:5]
        raise TraceFormatError(
            path,
            f"merged multi-rank trace: cannot tell the rank of events on pid(s) {orphans}; "
            "pass --rank-of-pid PID=RANK for each",
        )
    return rank


def _pid_ranks_from_args(events: pa.Table) -> dict[int, int]:
    pairs = events.select(["pid", "arg_rank"]).drop_null()
    grouped = pairs.group_by("pid").aggregate([("arg_rank", "min"), ("arg_rank", "max")])
    lo, hi = grouped["arg_rank_min"].to_pylist(), grouped["arg_rank_max"].to_pylist()
    return {p: a for p, a, b in zip(grouped["pid"].to_pylist(), lo, hi, strict=True) if a == b}


def _rank_trace(
    path: Path, rank: int, events: pa.Table, top: _TraceShell, world_size: int | None
) -> RankTrace:
    if not 0 <= rank <= MAX_RANK:
        raise TraceFormatError(path, f"rank {rank} is out of range 0..{MAX_RANK} (pass --rank N)")
    devices = pc.unique(pc.filter(events["device"], pc.equal(events["label"], "Kernel")))
    devices = devices.drop_null().to_pylist()
    return RankTrace(
        file=str(path),
        rank=rank,
        events=events.drop_columns(["arg_rank"]),
        world_size=world_size,
        schema_version=_as_int(top.schemaVersion),
        base_time_ns=_as_int(top.baseTimeNanoseconds),
        device=min(devices) if devices else None,
        distributed_info=msgspec.json.encode(top.distributedInfo).decode(),
    )
