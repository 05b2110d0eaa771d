"""One rank's events as HTA's critical-path analysis sees them: rows, time units, links.

HTA (0.5.0 and 0.6.1 alike) reads every `traceEvents` entry that has `dur` and `cat` (except
cat `Trace`) into a DataFrame labelled by the entry's position. Here the same rows become numpy
columns, built from tracegraph's parsed table with whole-array passes:

- times: with `hta_times`, HTA's units (µs; where the trace has ns-resolution timestamps, the
  start is ceiled and the end floored, `round_down_time_stamps`), else exact ns;
- `stream`, `correlation`, `wait_on_*` from args (HTA's default -1);
- `index_correlation` (HTA `transform_correlation_to_index`): a launch and its GPU activity point
  at each other's label; when several match, the last one in row order wins on each side;
- with HTA's row rules the rows are in file order, as HTA's frame is. With tracegraph's own, they
  are in an order that does not depend on the file (`canonical_order`): by start, longer first,
  then by what the event is (pid, tid, kind, category, name, stream, ids), `ev_idx` only among
  events that are alike in all of these; pids become numbers by the time of their first event.
  The same events so give the same frame, and the same graph and critical path, from a per-rank
  file and from a merged file that renumbers pids or interleaves the ranks' events by time.
  `seq` is each row's position in that order (the tie-break wherever one is needed; HTA's
  frames: `ev_idx`);
- with `hta_quirks` (HTA's `_filter_irrelevant_gpu_kernels`, applied when the trace names two
  or more `ProfilerStep` symbols): the last step's CPU events and the GPU events they did not
  launch are dropped, and the rows are reordered GPU first, as HTA's frame is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import ints
from ...parse import RankTrace

NS_PER_US = 1000
DEVICE_SYNC_NAMES = ("Event Sync", "Context Sync")
KIND_OTHER, KIND_OP, KIND_RUNTIME, KIND_KERNEL, KIND_SYNC = range(5)
_KINDS = {"Op": KIND_OP, "Runtime": KIND_RUNTIME, "Kernel": KIND_KERNEL, "sync": KIND_SYNC}
NODE_LABEL = {KIND_OP: "Op", KIND_RUNTIME: "Runtime", KIND_KERNEL: "Kernel"}  # graph node labels


class NotEmulable(Exception):
    """The trace takes a path through HTA that this emulation does not reproduce."""


@dataclass(frozen=True)
class Strings:
    """A dictionary-coded string column: `codes` index `values` (-1: null)."""

    codes: np.ndarray
    values: tuple[str, ...]

    @staticmethod
    def of(array: pa.Array | pa.ChunkedArray) -> Strings:
        encoded = pc.dictionary_encode(array)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        codes = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(), np.int32)
        return Strings(codes, tuple(encoded.dictionary.to_pylist()))

    def isin(self, values: Iterable[str]) -> np.ndarray:
        wanted = set(values)
        ids = [i for i, v in enumerate(self.values) if v in wanted]
        return np.isin(self.codes, ids)

    def contains(self, text: str) -> np.ndarray:
        ids = [i for i, v in enumerate(self.values) if v is not None and text in v]
        return np.isin(self.codes, ids)

    def at(self, row: int) -> str:
        code = int(self.codes[row])
        return self.values[code] if code >= 0 else ""

    def take(self, rows: np.ndarray) -> Strings:
        return Strings(self.codes[rows], self.values)


# The parsed columns a frame is built from (`args` only for the few rows whose stream is odd).
FRAME_COLUMNS = (
    "ev_idx",
    "label",
    "cat",
    "name",
    "pid",
    "tid",
    "ts",
    "dur",
    "stream",
    "correlation",
    "wait_on_stream",
    "wait_on_event_corr",
    "args",
)
ARRAY_FIELDS = (
    "ev_idx",
    "seq",
    "kind",
    "pid",
    "tid",
    "ts",
    "dur",
    "stream",
    "correlation",
    "wait_on_stream",
    "wait_corr",
    "index_correlation",
)


@dataclass(frozen=True)
class Frame:
    """Columns of one rank's rows, in HTA's frame order (HTA's rules) or the canonical order
    (tracegraph's); times in `unit_ns` nanoseconds."""

    rank: int
    ev_idx: np.ndarray  # the row's event: its position in the file's traceEvents
    seq: np.ndarray  # the tie-break among rows: ev_idx (HTA's rules), else the canonical position
    kind: np.ndarray  # KIND_* code of each row (tracegraph's node label)
    cat: Strings
    name: Strings
    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    wait_on_stream: np.ndarray
    wait_corr: np.ndarray
    index_correlation: np.ndarray
    unit_ns: int
    origin: int  # the trace time (in units) that ts counts from
    ts_dtype: np.dtype  # the dtype of HTA's ts column (it decides how HTA's sorts break ties)
    gpu_first: bool  # rows were reordered by the ProfilerStep filter
    symbols: frozenset[str]

    @property
    def n(self) -> int:
        return len(self.ev_idx)

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def position_of(self, ev_idx: np.ndarray) -> np.ndarray:
        """Row positions of labels (-1 where a label is not a row)."""
        lookup = _lookup(self)
        ev = np.asarray(ev_idx, np.int64)
        inside = (ev >= 0) & (ev < len(lookup) - 1)
        return np.where(inside, lookup[np.where(inside, ev, len(lookup) - 1)], -1)

    def name_in(self, names: Iterable[str]) -> np.ndarray:
        return self.name.isin(names)

    def cat_in(self, cats: Iterable[str]) -> np.ndarray:
        return self.cat.isin(cats)

    def take(self, rows: np.ndarray) -> Frame:
        """The frame restricted to `rows` (positions), in that order."""
        arrays = {f: getattr(self, f)[rows] for f in ARRAY_FIELDS}
        return replace(self, cat=self.cat.take(rows), name=self.name.take(rows), **arrays)


def _lookup(frame: Frame) -> np.ndarray:
    """label → row position table, built once per frame."""
    cached = frame.__dict__.get("_lookup")
    if cached is None:
        cached = np.full(int(frame.ev_idx.max(initial=-1)) + 2, -1, np.int64)
        cached[frame.ev_idx] = np.arange(frame.n)
        object.__setattr__(frame, "_lookup", cached)
    return cached


def _mask(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), bool)


@dataclass(frozen=True)
class FrameSource:
    """What a rank's frames are built from: the rows HTA reads (every event with `dur` and `cat`,
    except cat `Trace`), in file order. Cacheable."""

    rank: int
    rows: pa.Table  # FRAME_COLUMNS without args, plus `hta_stream`


def frame_source(trace: RankTrace, hta: bool = True) -> FrameSource:
    """The source columns of one rank's frames, from its parsed events. `hta` False: its
    `hta_stream` is `stream` as read, not as HTA reads it (the odd streams' args unread), for
    a summary (`ingest --summary`), which never builds HTA's frames."""
    events = trace.events
    keep = pc.and_(
        pc.and_(pc.is_valid(events["dur"]), pc.is_valid(events["cat"])),
        pc.not_equal(pc.fill_null(events["cat"], ""), "Trace"),
    )
    # args only where a stream is read from it, not copied for every row kept
    have = set(events.column_names)
    needed = [c for c in FRAME_COLUMNS if c in have and c != "args"]
    keep = pc.fill_null(keep, False)
    if not hta:  # a summary's: where every row is kept (a rank read without its flows), no copy
        rows = events.select(needed)
        rows = rows if pc.all(keep).as_py() else rows.filter(keep)
        stream = pa.array(ints(rows["stream"]), pa.int64())
        return FrameSource(trace.rank, rows.append_column("hta_stream", stream))
    kept = pc.indices_nonzero(keep)
    rows = events.select(needed).take(kept)
    args = events["args"]
    stream = _hta_stream(rows, lambda at: args.take(kept.take(pa.array(at, pa.int64()))))
    return FrameSource(trace.rank, rows.append_column("hta_stream", pa.array(stream, pa.int64())))


def rank_frame(source: FrameSource | RankTrace, *, hta_times: bool, hta_quirks: bool) -> Frame:
    """One rank's frame with HTA's times and/or HTA's row rules, else tracegraph's own.

    tracegraph's own rules: exact ns; GPU rows are kernels, memcpy/memset and cuda_sync events
    (by category, not by a `stream` arg), on one stream lane per (device, stream); no rows
    dropped; rows in the canonical order, pids numbered by first event (see the module docstring).
    """
    if isinstance(source, RankTrace):
        source = frame_source(source)
    hta = hta_quirks
    rows = source.rows
    if not hta:
        rows = rows.take(canonical_order(rows))
    ts_ns, dur_ns = ints(rows["ts"], 0), ints(rows["dur"], 0)
    ts, dur, unit = _times(ts_ns, dur_ns) if hta_times else (ts_ns, dur_ns, 1)
    origin = int(ts.min()) if len(ts) else 0
    ts = ts - origin
    kind = _kinds(rows["label"])
    pid = ints(rows["pid"]) if hta else _pid_numbers(ints(rows["pid"]), ts_ns)
    wait_on_stream = ints(rows["wait_on_stream"])
    if hta:
        stream = ints(rows["hta_stream"])
    else:
        stream, wait_on_stream = _lanes(rows, kind, pid, wait_on_stream)
    correlation = ints(rows["correlation"])
    name, cat = Strings.of(rows["name"]), Strings.of(rows["cat"])
    if hta:
        device_sync = name.isin(DEVICE_SYNC_NAMES)
        gpu = ((stream >= 0) & (correlation >= 0)) | device_sync
    else:
        gpu = (kind == KIND_KERNEL) | (kind == KIND_SYNC)
    ev_idx = rows["ev_idx"].to_numpy().astype(np.int64)
    index_correlation = _index_correlation(ev_idx, correlation, gpu, unmatched_zero=hta)
    symbols = frozenset(v for v in name.values + cat.values if v is not None)
    frame = Frame(
        source.rank,
        ev_idx=ev_idx,
        seq=ev_idx.copy() if hta else np.arange(len(ev_idx), dtype=np.int64),
        kind=kind,
        cat=cat,
        name=name,
        pid=pid,
        tid=ints(rows["tid"]),
        ts=ts,
        dur=dur,
        stream=stream,
        correlation=correlation,
        wait_on_stream=wait_on_stream,
        wait_corr=ints(rows["wait_on_event_corr"]),
        index_correlation=index_correlation,
        unit_ns=unit,
        origin=origin,
        ts_dtype=_downcast_dtype(ts_ns // NS_PER_US),
        gpu_first=False,
        symbols=symbols,
    )
    if hta:
        frame = _drop_last_step(frame, gpu)
    return frame


# The canonical order's keys, most significant first (those a source has; `_pid` is added).
CANONICAL_KEYS = (
    ("ts", "ascending"),
    ("dur", "descending"),
    ("_pid", "ascending"),
    ("tid", "ascending"),
    ("label", "ascending"),
    ("cat", "ascending"),
    ("name", "ascending"),
    ("stream", "ascending"),
    ("correlation", "ascending"),
    ("wait_on_stream", "ascending"),
    ("wait_on_event_corr", "ascending"),
    ("ev_idx", "ascending"),
)


def canonical_order(rows: pa.Table) -> pa.Array:
    """Row order by what each event is, not where the file has it (tracegraph's frames).

    Two files with the same events of a rank, in any order and under any pid numbering (a
    per-rank file and a merged one), give the same sequence of events; only events alike in
    every key are left in file order, and those are interchangeable.
    """
    pid = _pid_numbers(ints(rows["pid"]), ints(rows["ts"], 0))
    keyed = rows.append_column("_pid", pa.array(pid, pa.int64()))
    keys = [k for k in CANONICAL_KEYS if k[0] in keyed.column_names]
    return pc.sort_indices(keyed, sort_keys=keys)


def _pid_numbers(pid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """pids renumbered 0, 1, ... by their first event (then more events first, then the pid):
    merged files renumber pids, the order of their first events stays."""
    if len(pid) == 0:
        return pid
    uniq, inverse = np.unique(pid, return_inverse=True)
    inverse = inverse.ravel()
    first = np.full(len(uniq), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, inverse, ts)
    count = np.bincount(inverse, minlength=len(uniq))
    number = np.empty(len(uniq), np.int64)
    number[np.lexsort((uniq, -count, first))] = np.arange(len(uniq))
    return number[inverse]


def _kinds(labels: pa.ChunkedArray) -> np.ndarray:
    keys = pa.array(list(_KINDS), pa.string())
    codes = pc.fill_null(pc.index_in(labels, value_set=keys), -1).to_numpy(zero_copy_only=False)
    table = np.array([*_KINDS.values(), KIND_OTHER], np.int8)
    return table[np.asarray(codes, np.int64)]


def _lanes(
    rows: pa.Table, kind: np.ndarray, pid: np.ndarray, wait_on_stream: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """tracegraph's streams: one lane per (device, stream) of GPU rows, -1 on the CPU side."""
    raw = ints(pc.coalesce(rows["stream"], rows["tid"]))
    gpu = (kind == KIND_KERNEL) | (kind == KIND_SYNC)
    keys = pid[gpu] * (1 << 32) + (raw[gpu] & 0xFFFFFFFF)
    lanes, inverse = np.unique(keys, return_inverse=True)
    stream = np.full(len(kind), -1, np.int64)
    stream[gpu] = inverse.ravel()
    waiting = wait_on_stream >= 0
    wkeys = pid[waiting] * (1 << 32) + (wait_on_stream[waiting] & 0xFFFFFFFF)
    at = np.searchsorted(lanes, wkeys)
    found = (at < len(lanes)) & (lanes[np.minimum(at, max(len(lanes) - 1, 0))] == wkeys)
    mapped = wait_on_stream.copy()
    mapped[np.nonzero(waiting)[0]] = np.where(found, at, -2)
    return stream, mapped


def _times(ts_ns: np.ndarray, dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """HTA's times: whole µs, rounded inward where the trace has sub-µs timestamps."""
    if not (ts_ns % NS_PER_US).any():
        if (dur_ns % NS_PER_US).any():
            return ts_ns, dur_ns, 1  # fractional durations only: HTA keeps float µs
        return ts_ns // NS_PER_US, dur_ns // NS_PER_US, NS_PER_US
    # Python's float(text) of the µs value (correctly rounded), then HTA's ceil / floor.
    q, r = np.divmod(ts_ns, NS_PER_US)
    ts_f = q.astype(np.float64) + r.astype(np.float64) / NS_PER_US
    dur_f = dur_ns.astype(np.float64) / NS_PER_US
    start = np.ceil(ts_f).astype(np.int64)
    end = np.floor(ts_f + dur_f).astype(np.int64)
    return start, end - start, NS_PER_US


def _downcast_dtype(values: np.ndarray) -> np.dtype:
    """The integer dtype pandas' `to_numeric(downcast="integer")` picks for these values."""
    if len(values) == 0:
        return np.dtype(np.int8)
    lo, hi = int(values.min()), int(values.max())
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _hta_stream(rows: pa.Table, args_at: Callable[[np.ndarray], pa.ChunkedArray]) -> np.ndarray:
    """`args.stream` as HTA reads it: `int(value)`, -1 where absent or not an int literal
    (ROCm writes "0x0"); `stream_id` is ignored. `args_at(positions)`: those rows' args."""
    stream = ints(rows["stream"])
    # Only rows where tracegraph found a stream can differ (stream_id, or a non-decimal text).
    suspect = np.nonzero(stream != -1)[0]
    # a slice at a time: a kernel's args are long, and all of them at once are a large copy
    for start in range(0, len(suspect), ARGS_AT_A_TIME):
        _read_odd_streams(stream, suspect[start : start + ARGS_AT_A_TIME], args_at)
    return stream


ARGS_AT_A_TIME = 1 << 15


def _read_odd_streams(
    stream: np.ndarray, at: np.ndarray, args_at: Callable[[np.ndarray], pa.ChunkedArray]
) -> None:
    """Where the args of rows `at` give the stream otherwise than tracegraph read it (a
    `stream_id`, or a text), set `stream` as HTA reads it."""
    args = pc.fill_null(args_at(at), "")
    odd = _mask(pc.match_substring(args, '"stream_id"')) | _mask(
        pc.match_substring_regex(args, r'"stream"\s*:\s*"')
    )
    if not odd.any():
        return
    import msgspec

    odd_args = args.filter(pa.array(odd))
    for i, text in zip(at[odd], odd_args.to_pylist(), strict=True):
        parsed = msgspec.json.decode(text or "{}")
        value = parsed.get("stream", -1) if isinstance(parsed, dict) else -1
        try:
            stream[i] = int(value)
        except (TypeError, ValueError):
            stream[i] = -1


def _last_of_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys and, for each, the position of its last occurrence."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    last = np.ones(len(keys), bool)
    last[:-1] = sorted_keys[1:] != sorted_keys[:-1]
    return sorted_keys[last], order[last]


def _index_correlation(
    ev_idx: np.ndarray, corr: np.ndarray, gpu: np.ndarray, unmatched_zero: bool
) -> np.ndarray:
    """HTA's `index_correlation`: launch ↔ GPU row by correlation, the last match winning.

    A row without a match is 0 in HTA (`unmatched_zero`), which is also the label of the
    file's first event: tracegraph's own rules use -1, so that an unlaunched GPU row is not
    taken for one launched by event 0 (only in the file that has it: not in a merged file,
    where event 0 is another rank's).
    """
    out = np.minimum(corr, 0) if unmatched_zero else np.full(len(corr), -1, np.int64)
    linked = corr != -1
    cpu_rows = np.nonzero(linked & ~gpu)[0]
    gpu_rows = np.nonzero(linked & gpu)[0]
    cpu_keys, cpu_last = _last_of_each(corr[cpu_rows])
    gpu_keys, gpu_last = _last_of_each(corr[gpu_rows])
    for rows, keys, last, other in (
        (cpu_rows, gpu_keys, gpu_last, gpu_rows),
        (gpu_rows, cpu_keys, cpu_last, cpu_rows),
    ):
        at = np.searchsorted(keys, corr[rows])
        hit = (at < len(keys)) & (keys[np.minimum(at, max(len(keys) - 1, 0))] == corr[rows])
        out[rows[hit]] = ev_idx[other[last[at[hit]]]]
    return out


def _drop_last_step(frame: Frame, gpu: np.ndarray) -> Frame:
    steps = [s for s in frame.symbols if "ProfilerStep" in s]
    if len(steps) < 2:
        return frame
    cpu = ~gpu
    step_rows = cpu & frame.name_in(steps)
    last_start = frame.ts[step_rows].max()
    cpu_kept = np.nonzero(cpu & (frame.ts < last_start))[0]
    kept_corr = frame.correlation[cpu_kept]
    uniq, counts = np.unique(kept_corr, return_counts=True)
    gpu_rows = np.nonzero(gpu)[0]
    at = np.searchsorted(uniq, frame.correlation[gpu_rows])
    at_c = np.minimum(at, max(len(uniq) - 1, 0))
    matched = (at < len(uniq)) & (uniq[at_c] == frame.correlation[gpu_rows])
    if (counts[at_c[matched]] > 1).any():
        # HTA's inner merge would repeat these GPU rows under one label.
        raise NotEmulable("GPU events match several CPU events by correlation")
    rows = np.concatenate([gpu_rows[matched], cpu_kept])
    kept = frame.take(rows)
    return replace(kept, gpu_first=True)
