"""Decoded events → one Arrow table of their columns: the complete ('X'), flow and `[memory]`
events and those without a phase, each labelled by its category (Op, Runtime, Kernel, sync),
with `ts` and `dur` as exact INT64 nanoseconds, `args` as its verbatim JSON text plus the args
every link needs as typed columns, and `drop` saying why an event is to be left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .decode import ARGS_DECODERS, Args, RawEvent, decode_blob, event_position, json_excerpt
from .errors import TraceFormatError
from .schema import MAX_RANK

OP_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "Operator", "overhead"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"})
KERNEL_CATEGORIES = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
)
SYNC_CATEGORY = "cuda_sync"
MEMORY_EVENT_NAME = "[memory]"
MEMORY_LABEL = "memory"  # the label of the rows of `[memory]` instants (no graph node label)

LABEL_OF_CATEGORY: dict[str, str] = {
    **{c: "Op" for c in OP_CATEGORIES},
    **{c: "Runtime" for c in RUNTIME_CATEGORIES},
    **{c: "Kernel" for c in KERNEL_CATEGORIES},
    SYNC_CATEGORY: "sync",
}

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


def memory_counts(events: pa.Table) -> tuple[int, int]:
    """How many rows are `[memory]` instants, and how many of them are kept (not no-ts): they
    make no trace of their own."""
    memory = pc.equal(events["label"], MEMORY_LABEL)
    kept = pc.and_(memory, pc.is_null(events["drop"]))
    return int(pc.sum(memory).as_py() or 0), int(pc.sum(kept).as_py() or 0)


@dataclass(frozen=True)
class LeftOutFlows:
    """What a read that leaves the flow events out of the rows (`ParseOptions.flow_rows`)
    keeps of them, for the counts and checks of a read that makes them rows: how many there
    are, how many have no numeric `ts` (rows to drop), the earliest ts and the latest end."""

    rows: int = 0
    no_ts: int = 0
    first_ts: int | None = None
    last_end: int | None = None

    def plus(self, other: LeftOutFlows) -> LeftOutFlows:
        return LeftOutFlows(
            self.rows + other.rows,
            self.no_ts + other.no_ts,
            _least(min, self.first_ts, other.first_ts),
            _least(max, self.last_end, other.last_end),
        )


def _least(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else pick(a, b)


def event_table(
    path: Path,
    raw: list[RawEvent],
    first_idx: int,
    loose: bool,
    flow_rows: bool = True,
    kinds: np.ndarray | None = None,
) -> tuple[pa.Table, LeftOutFlows]:
    """Columns of the complete ('X'), flow and `[memory]` events, and the events without a
    phase; ev_idx is the position in traceEvents (`raw` starts at position `first_idx`). `drop`
    says why an event is to be left out (no ph, no numeric ts, a bad dur), null for the others.
    `flow_rows` False: the flow events are not rows, and what the read's checks need of them is
    the second value (else an empty one). `kinds`: `phase_kinds(raw)`, where the caller has it."""
    if kinds is None:
        kinds = phase_kinds(raw)
    rows = (kinds == COMPLETE_KIND) | (kinds == NO_PHASE_KIND)
    is_flow = (kinds >= FLOW_KINDS[0]) & (kinds <= FLOW_KINDS[-1])
    flows = np.flatnonzero(is_flow).tolist()
    if flow_rows:
        rows |= is_flow
    # and the `[memory]` instants: the caching allocator's record of each allocation or free
    # (`profile_memory=True`), read by `ingest.memory_events`
    instants = np.flatnonzero(kinds == INSTANT_KIND).tolist()
    rows[[i for i in instants if raw[i].name == MEMORY_EVENT_NAME]] = True
    keep = np.flatnonzero(rows).tolist()
    left_out = LeftOutFlows()
    if not flow_rows and flows:
        ev_idx = pc.add(pa.array(flows, pa.int64()), first_idx)
        left_out = _left_out(path, [raw[i] for i in flows], ev_idx)
    phases = _PHASE_OF_KIND.take(pa.array(kinds[keep]))
    return _rows(path, [raw[i] for i in keep], keep, first_idx, loose, phases), left_out


# each event's kind: its phase as a number (another phase than these: OTHER_KIND)
_PHASE_OF_KIND = pa.array([None, "X", None, "s", "f", "t", "i", "M"], pa.string())
OTHER_KIND, COMPLETE_KIND, NO_PHASE_KIND = 0, 1, 2
FLOW_KINDS = (3, 4, 5)  # s, f, t
INSTANT_KIND, METADATA_KIND = 6, 7
_KIND_OF_PHASE = {ph: k for k, ph in enumerate(_PHASE_OF_KIND.to_pylist()) if k != OTHER_KIND}


def phase_kinds(raw: list[RawEvent]) -> np.ndarray:
    """Each event's kind (`COMPLETE_KIND`...), in one pass over the events."""
    kind = _KIND_OF_PHASE.get
    return np.array([kind(e.ph, OTHER_KIND) for e in raw], np.int8)


def _left_out(path: Path, flows: list[RawEvent], ev_idx: pa.Array) -> LeftOutFlows:
    ts, _ = _ns_column(path, "ts", _joined([e.ts for e in flows]), ev_idx)
    dur, _ = _ns_column(path, "dur", _joined([e.dur for e in flows]), ev_idx)
    ends = pc.add(ts, pc.fill_null(dur, 0))
    return LeftOutFlows(len(flows), ts.null_count, pc.min(ts).as_py(), pc.max(ends).as_py())


def _rows(
    path: Path, evs: list[RawEvent], keep: list[int], first_idx: int, loose: bool, phs: pa.Array
) -> pa.Table:
    """The columns of the events `evs`, at positions `keep` of the chunk, with phases `phs`."""
    ev_idx = pc.add(pa.array(keep, pa.int64()), first_idx)
    cats = _str_column([e.cat for e in evs])
    is_x = pc.fill_null(pc.equal(phs, "X"), False)
    other = pc.if_else(
        pc.fill_null(pc.equal(phs, "i"), False),
        pa.scalar(MEMORY_LABEL),  # only [memory] instants are kept
        pc.if_else(pc.is_valid(phs), pa.scalar("flow"), pa.scalar(None, pa.string())),
    )
    label = pc.if_else(is_x, _map_strings(cats, LABEL_OF_CATEGORY), other)
    args_raw = [e.args if e.ph == "X" or e.ph == "i" else _NO_VALUE for e in evs]
    args = _decode_args(path, args_raw, ev_idx)
    ts, _ = _ns_column(path, "ts", _joined([e.ts for e in evs]), ev_idx)
    dur, dur_bad = _ns_column(path, "dur", _joined([e.dur for e in evs]), ev_idx)
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
        "args": _text_column(_joined(args_raw)),
    }
    columns.update(args)
    columns["drop"] = drop
    return pa.table(columns)


def _decode_args(path: Path, args_raw: list[msgspec.Raw], ev_idx: pa.Array) -> dict[str, pa.Array]:
    blob = b"[" + b",".join(a if a else b"null" for a in args_raw) + b"]"
    try:
        parsed, loose = decode_blob(ARGS_DECODERS, blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        where = event_position(exc, indices=ev_idx)
        raise TraceFormatError(path, f"unreadable args of {where}") from exc
    fields, exact = _arg_fields(parsed, loose)
    return {
        "external_id": pc.coalesce(fields["external_id"], fields["external_id_old"]),
        "correlation": fields["correlation"],
        "seq": fields["seq"],
        "stream": pc.coalesce(fields["stream"], fields["stream_id"]),
        "device": fields["device"],
        "sync_kind": fields["cuda_sync_kind"],
        "wait_on_stream": fields["wait_on_stream"],
        "wait_on_event_corr": fields["wait_on_cuda_event_record_corr_id"],
        "arg_rank": _arg_rank(path, fields["rank"], None if exact else parsed, ev_idx),
        "pg_name": fields["pg_name"],
        "coll_name": fields["coll_name"],
        "coll_seq": fields["coll_seq"],
    }


_ARG_TEXT = frozenset({"cuda_sync_kind", "pg_name", "coll_name"})
_ARGS_TYPE = pa.struct(
    [(name, pa.string() if name in _ARG_TEXT else pa.int64()) for name in Args.__struct_fields__]
)


def _arg_fields(parsed: list[Args | None], loose: bool) -> tuple[dict[str, pa.Array], bool]:
    """Each field of the decoded args as a column, null where an event has none, and whether
    every value was taken as it is: in one conversion where all have their column's type
    (ints within INT64), else field by field (`_int_column`, `_str_column`)."""
    names = Args.__struct_fields__
    if not loose:
        rows = [msgspec.structs.astuple(a) if a is not None else None for a in parsed]
        try:
            return dict(zip(names, pa.array(rows, _ARGS_TYPE).flatten(), strict=True)), True
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass  # a quoted id, an int beyond INT64...
    none = Args()
    rows = [a if a is not None else none for a in parsed]
    columns: dict[str, pa.Array] = {}
    for name in names:
        values = [getattr(a, name) for a in rows]
        columns[name] = _str_column(values) if name in _ARG_TEXT else _int_column(values, loose)
    return columns, False


def _arg_rank(path: Path, ranks: pa.Array, parsed: list[Any] | None, ev_idx: pa.Array) -> pa.Array:
    """args.rank of each event; one that is there but no rank in 0..MAX_RANK is an error.
    `parsed`: the decoded args where some value may not have been read as it is (else None)."""
    if parsed is not None:
        values = [a.rank if a is not None else None for a in parsed]
        if ranks.null_count != values.count(None):
            first = next(i for i, v in enumerate(values) if v is not None and not ranks[i].is_valid)
            raise TraceFormatError(
                path, _bad_arg_rank(ev_idx[first].as_py(), json_excerpt(values[first]))
            )
    outside = pc.or_(pc.less(ranks, 0), pc.greater(ranks, MAX_RANK))
    if pc.any(outside).as_py():
        first = pc.index(outside, True).as_py()
        raise TraceFormatError(path, _bad_arg_rank(ev_idx[first].as_py(), str(ranks[first])))
    return ranks


def _bad_arg_rank(ev_idx: int, shown: str) -> str:
    return f"event {ev_idx}: args.rank is {shown}, not a rank in 0..{MAX_RANK}"


_NO_VALUE = msgspec.Raw(b"")


def _joined(raw: list[msgspec.Raw]) -> pa.Array:
    """Raw JSON values as one binary column (empty: absent), from their bytes joined: no bytes
    object made of each."""
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, raw), np.int64, len(raw)), out=offsets[1:])
    if offsets[-1] >= 1 << 31:  # beyond a binary column's 32-bit offsets
        return pa.array([bytes(v) for v in raw], pa.binary())
    data = pa.py_buffer(b"".join(raw))
    bounds = pa.py_buffer(offsets.astype(np.int32))
    return pa.Array.from_buffers(pa.binary(), len(raw), [None, bounds, data])


def _text_column(binary: pa.Array) -> pa.Array:
    """UTF-8 text of raw JSON values (`_joined`: no null, no offset); empty → null."""
    try:
        text = pc.cast(binary, pa.string())
    except pa.ArrowInvalid:
        values = binary.to_pylist()
        text = pa.array([b.decode("utf-8", "replace") for b in values], pa.string())
    # a validity bitmap over the same buffers: the text is not copied
    _, offsets, data = text.buffers()
    present = np.diff(np.frombuffer(offsets, np.int32, len(text) + 1)) != 0
    missing = len(text) - int(np.count_nonzero(present))
    if missing == 0:
        return text
    validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(text), [validity, offsets, data], missing)


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
        [v if type(v) is int and _I64_MIN <= v <= _I64_MAX else as_int(v) for v in values],
        pa.int64(),
    )


def as_int(value: Any) -> int | None:
    """An INT64 from a JSON value: an int, an integral float, a decimal or 0x string."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if _I64_MIN <= value <= _I64_MAX else None
    if isinstance(value, float):
        return as_int(int(value)) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        if 0 < len(text) <= 24 and text.lstrip("-").isascii() and text.lstrip("-").isdigit():
            return as_int(int(text))
        if 2 < len(text) <= 24 and text.lower().startswith("0x"):
            try:
                return as_int(int(text, 16))
            except ValueError:
                return None
    return None


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_US = pa.decimal128(28, 6)
_THOUSAND = pa.scalar(1000, pa.decimal128(4, 0))
_NS_LO = pa.scalar(-NS_LIMIT, pa.decimal128(19, 0))
_NS_HI = pa.scalar(NS_LIMIT, pa.decimal128(19, 0))


def _ns_column(
    path: Path, field_name: str, raw: pa.Array, ev_idx: pa.Array
) -> tuple[pa.Array, pa.Array | bool]:
    """Exact INT64 ns from the JSON text of µs numbers, half to even: (ns, not a number).
    Missing values and values that are no JSON number (a string, null, a list...) are null in
    ns; the second is True where a value is present but no number (False: none is). A number
    outside ±NS_LIMIT ns is an error naming the event."""
    data = raw.buffers()[2]
    if data is None or data.size == 0:  # every value missing (a flow's dur)
        return pa.nulls(len(raw), pa.int64()), False
    text = _text_column(raw)
    # Arrow's decimal parser is only safe on plain numbers (it gives garbage on 40 digits and
    # crashes on 1e-2147483647): others (exponents, more than 6 decimals such as
    # 0.30000000000000004, no number at all) are converted one by one, exactly. Kineto's
    # columns are all plain, which two scans of the text's bytes tell (a regex is 40x slower),
    # and of at most 3 decimals: ns as they are, read in one cast.
    plain = _is_plain(text)
    if plain and (nanos := _ns_of_few_decimals(text)) is not None:
        return nanos, False
    micros, odd = (_plain_micros(text) if plain else None), None
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


def _is_plain(text: pa.Array) -> bool:
    """Whether every value is missing or of at most 29 characters with no 'e' or 'E': JSON text
    without them is a number without exponent, or something Arrow refuses to cast (a string,
    null, a list...)."""
    if text.null_count == len(text):
        return True
    data = text.buffers()[2]
    chars = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    longest = pc.max(pc.binary_length(text)).as_py()
    return longest <= 29 and not ((chars == ord("e")) | (chars == ord("E"))).any()


def _plain_micros(text: pa.Array) -> pa.Array | None:
    """The plain values (`_is_plain`) as decimal µs, else None (no number)."""
    try:
        return pc.cast(text, _US)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


_NS_AS_MICROS = pa.decimal128(22, 3)  # µs of 3 decimals: its unscaled integer is the ns


def _ns_of_few_decimals(text: pa.Array) -> pa.Array | None:
    """The plain values (`_is_plain`) as INT64 ns where each has at most 3 decimals (more only
    as trailing zeros) and lies within ±NS_LIMIT, else None: the decimal's unscaled integer, read
    from its buffer (the low word, where the high one only extends its sign)."""
    try:
        micros = pc.cast(text, _NS_AS_MICROS)  # refuses to drop a digit or to overflow
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    words = np.frombuffer(micros.buffers()[1], np.int64, 2 * len(micros), 16 * micros.offset)
    low, high = words[0::2], words[1::2]
    missing = pc.is_null(micros).to_numpy(zero_copy_only=False)
    ok = (high == low >> 63) & (low >= -NS_LIMIT) & (low < NS_LIMIT)
    if not (ok | missing).all():
        return None
    return pa.array(low, pa.int64(), mask=missing if micros.null_count else None)


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
