"""A trace file → its ranks' event tables, one at a time, in memory bounded by the largest rank.

A file whose JSON fits in `ParseOptions.stream_bytes` is parsed whole (`parse.parse_file`).
A larger one is read block by block (`scan`): its events are decoded a block at a time and set
aside on disk by rank (`spill`), keyed by `args.rank` where an event has one, else by its pid
until the file's metadata has told each pid's rank; each rank is then read back alone. Both
give the same ranks, events and errors' meaning (a test holds them equal on every shared trace).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import columns, decode, file_bytes, parse, ranks
from .errors import TraceFormatError
from .file_bytes import json_blocks, read_trace_bytes
from .parse import RankTrace
from .parse_options import DEFAULT_OPTIONS, ParseOptions
from .scan import EVENTS_KEY, ScanError, TopLevel, scan_events
from .schema import MAX_EV
from .spill import Key, Spill

STREAM_BYTES = 128 << 20  # JSON above this size is read block by block
BLOCK_BYTES = 8 << 20  # bytes scanned at a time
_SHELL_KEYS = frozenset(
    {"distributedInfo", "schemaVersion", "baseTimeNanoseconds", "host_name", "deviceProperties"}
)
_SHELL = msgspec.json.Decoder(decode.TraceShell)
_RANKED, _BY_PID, _NO_PID = "rank", "pid", "no pid"


def rank_traces(
    path: Path, options: ParseOptions = DEFAULT_OPTIONS
) -> Generator[RankTrace, None, None]:
    """The ranks of one trace file in rank order; only the rank yielded last is in memory when
    the file is read block by block."""
    limit = STREAM_BYTES if options.stream_bytes is None else options.stream_bytes
    blocks = file_bytes.json_blocks(path, options, whole_up_to=limit)
    head: list[bytes] = []
    size = 0
    for block in blocks:
        head.append(block)
        size += len(block)
        if size > limit:
            break
    else:
        data = head[0] if len(head) == 1 else b"".join(head)
        head.clear()
        yield from parse.parse_json_bytes(path, data, options)
        return
    yield from _streamed(path, _drain(head, blocks), options)


def _drain(head: list[bytes], rest: Iterable[bytes]) -> Iterator[bytes]:
    """The blocks read ahead, then the rest, in pieces of at most BLOCK_BYTES; each is
    dropped here once handed on."""
    while head:
        yield from _pieces(head.pop(0))
    for block in rest:
        yield from _pieces(block)


def _pieces(block: bytes) -> Iterator[bytes]:
    if len(block) <= BLOCK_BYTES:
        yield block
        return
    view = memoryview(block)
    for i in range(0, len(block), BLOCK_BYTES):
        yield bytes(view[i : i + BLOCK_BYTES])


@dataclass
class _Seen:
    """What the whole file says, gathered block by block while the events are set aside."""

    events: int = 0  # entries of traceEvents
    rows: int = 0  # complete and flow events kept as rows (not `[memory]` instants)
    kept: int = 0  # of those, the ones not dropped
    dropped: dict[str, int] = field(default_factory=dict)  # rows to leave out, by reason
    first_ts: int | None = None
    last_end: int | None = None
    named: dict[int, dict[int, int]] = field(default_factory=dict)  # process metadata
    pairs: dict[tuple[int | None, int], int] = field(default_factory=dict)  # (pid, args.rank)
    pids_needing_rank: dict[int | None, None] = field(default_factory=dict)  # first seen first

    def add(self, table: pa.Table) -> None:
        memory, memory_kept = columns.memory_counts(table)
        self.rows += table.num_rows - memory
        self.kept += table["drop"].null_count - memory_kept
        for reason, n in _counts(table["drop"].drop_null()).items():
            self.dropped[reason] = self.dropped.get(reason, 0) + n
        ts = table["ts"]
        first = pc.min(ts).as_py()
        last = pc.max(pc.add(ts, pc.fill_null(table["dur"], 0))).as_py()
        if first is not None:
            self.first_ts = first if self.first_ts is None else min(self.first_ts, first)
        if last is not None:
            self.last_end = last if self.last_end is None else max(self.last_end, last)
        pairs, needing = ranks.rank_facts(table)
        for pair, ev in pairs.items():
            self.pairs.setdefault(pair, ev)  # blocks come in file order: the first stays
        self.pids_needing_rank.update(dict.fromkeys(needing))


def _counts(values: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    return {c["values"]: c["counts"] for c in values.value_counts().to_pylist()}


def _streamed(path: Path, blocks: Iterable[bytes], options: ParseOptions) -> Iterator[RankTrace]:
    spill = Spill(options.spill_at, order_by="ev_idx")
    try:
        seen, top = _set_aside(path, blocks, spill)
        yield from _ranks(path, spill, seen, _shell(path, top), options)
    finally:
        spill.close()


def _set_aside(path: Path, blocks: Iterable[bytes], spill: Spill) -> tuple[_Seen, TopLevel]:
    seen, top = _Seen(), TopLevel()
    try:
        for array in scan_events(blocks, _SHELL_KEYS, top):
            try:
                raw, loose = decode.decode_blob(decode.EVENT_DECODERS, array)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise TraceFormatError(
                    path, f"malformed {decode.event_position(exc, seen.events)}"
                ) from exc
            del array
            if seen.events + len(raw) > MAX_EV:
                raise TraceFormatError(path, f"trace has over {MAX_EV:,} events")
            table, _ = columns.event_table(path, raw, seen.events, loose)  # flows as rows
            for pid, named in ranks.process_names(raw, seen.events).items():
                for rank, ev_idx in named.items():
                    seen.named.setdefault(pid, {}).setdefault(rank, ev_idx)
            seen.events += len(raw)
            del raw
            seen.add(table)
            _spill_by_rank(table, spill)
    except ScanError as exc:
        raise TraceFormatError(path, f"not a Kineto JSON trace ({exc})") from exc
    except RecursionError as exc:
        raise TraceFormatError(path, f"JSON nested too deeply ({decode.first_line(exc)})") from exc
    if not top.has_events:
        raise TraceFormatError(path, "JSON has no 'traceEvents' list")
    if not seen.events:
        raise TraceFormatError(path, "trace has no events")
    if not seen.rows:
        raise TraceFormatError(path, "trace has no complete ('X') events")
    if not seen.kept:
        dropped = ", ".join(
            f"{n:,} with {columns.DROP_REASONS[r]}" for r, n in seen.dropped.items()
        )
        raise TraceFormatError(path, f"trace has no complete ('X') events to keep ({dropped})")
    if seen.first_ts is not None and seen.last_end is not None:
        if seen.last_end - seen.first_ts >= 1 << 63:
            span = seen.last_end - seen.first_ts
            raise TraceFormatError(path, f"timestamps span {span} ns, more than an INT64 can hold")
    return seen, top


def _spill_by_rank(table: pa.Table, spill: Spill) -> None:
    ranked = pc.is_valid(table["arg_rank"])
    with_rank = table.filter(ranked)
    spill.add_grouped(with_rank, with_rank["arg_rank"].to_numpy(), _RANKED)
    rest = table.filter(pc.invert(ranked))
    has_pid = pc.is_valid(rest["pid"])
    by_pid = rest.filter(has_pid)
    spill.add_grouped(by_pid, by_pid["pid"].to_numpy(), _BY_PID)
    spill.add((_NO_PID, None), rest.filter(pc.invert(has_pid)))


def _shell(path: Path, top: TopLevel) -> decode.TraceShell:
    """The top-level values the parse reads, decoded as the in-memory parse decodes them."""
    parts = [msgspec.json.encode(k) + b":" + v for k, v in top.values.items() if k != EVENTS_KEY]
    try:
        return _SHELL.decode(b"{" + b",".join(parts) + b"}")
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"not a Kineto JSON trace ({decode.first_line(exc)})") from exc


def _ranks(
    path: Path, spill: Spill, seen: _Seen, top: decode.TraceShell, options: ParseOptions
) -> Iterator[RankTrace]:
    arg_ranks = sorted({rank for _, rank in seen.pairs})
    named_ranks = {r for named in seen.named.values() for r in named}
    named_ranks |= set(options.rank_of_pid.values())
    dist = ranks.distributed_info(path, top)
    world_size = ranks.trace_world_size(path, dist)
    if len(set(arg_ranks) | named_ranks) <= 1:  # one rank: the whole file
        rank = options.rank
        if rank is None:
            rank = ranks.info_rank(path, dist)
        if rank is None:
            rank = arg_ranks[0] if arg_ranks else next(iter(named_ranks), 0)
        yield _taken(path, rank, spill, spill.keys(), top, world_size)
        return
    if options.rank is not None:
        raise TraceFormatError(path, "holds several ranks; --rank applies to single-rank files")
    pid_rank = ranks.resolve_pid_ranks(
        path, seen.named, seen.pairs, seen.pids_needing_rank, options
    )
    keys_of: dict[int, list[Key]] = {}
    for key in spill.keys():
        tag, value = key
        rank = value if tag == _RANKED else None
        if tag == _BY_PID and value is not None:
            rank = pid_rank.get(value)
        if rank is not None:
            keys_of.setdefault(rank, []).append(key)
    if world_size is None or world_size < len(keys_of):
        world_size = max(keys_of) + 1 if keys_of else None
    for rank in sorted(keys_of):
        yield _taken(path, rank, spill, keys_of.pop(rank), top, world_size)


def _taken(
    path: Path,
    rank: int,
    spill: Spill,
    keys: list[Key],
    top: decode.TraceShell,
    world_size: int | None,
) -> RankTrace:
    """The rank read back from the spill. Built here, not in `_ranks`: a local there would
    hold the rank's events while the consumer prepares it (twice the rank in memory)."""
    events = spill.take(keys)
    assert events is not None  # the rank has rows (checked as they were set aside)
    return parse.rank_trace(path, rank, events, top, world_size)


def sweep_spills(at: Path) -> None:
    """Remove spill folders a killed ingest left (the caller holds the database's lock)."""
    for leftover in at.parent.glob(f"{at.name}-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)


WHOLE_CHECK_BYTES = 8 << 20  # a failed file up to this size is read whole to say what it is


def not_a_trace(path: Path) -> str | None:
    """Why a file that failed to parse is JSON but no trace (None: it is a broken trace, or
    no JSON at all). Only files that failed are read again, so this costs nothing otherwise;
    a large one is scanned block by block, never held."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
    except OSError:
        return None
    if size > (WHOLE_CHECK_BYTES // 64 if gzipped else WHOLE_CHECK_BYTES):
        top = TopLevel()
        blocks = json_blocks(path, ParseOptions(), whole_up_to=0)
        try:
            for _ in scan_events(blocks, frozenset({"traceEvents"}), top):
                pass
        except (ScanError, TraceFormatError):
            return None
        if top.has_events or "traceEvents" in top.values:  # a trace, or a broken one
            return None
        return "not a trace (no traceEvents)"
    try:
        document = json.loads(read_trace_bytes(path))
    except (TraceFormatError, ValueError, RecursionError):
        return None
    if isinstance(document, dict) and "traceEvents" not in document:
        return "not a trace (no traceEvents)"
    if not isinstance(document, dict | list):
        return "not a trace (JSON, but no object or event list)"
    return None


class SourceLedger(Protocol):
    """What a reader of an ingest's files reports back (pipeline._Files)."""

    def skip(self, source: Any, why: str) -> None: ...
    def parsed(self, source: Any) -> None: ...
    def rank(self, source: Any, rank: int) -> None: ...


def file_traces(
    source: Any, options: ParseOptions, seen: SourceLedger
) -> Generator[RankTrace, None, None]:
    """The ranks of one file of an ingest (`source`: its path, and the folder it was found in,
    or None), each reported to `seen`; a folder's JSON that is no trace is reported skipped,
    not raised. Closed when left, even by an error: a file read in blocks removes its spill."""
    traces = rank_traces(source.path, options)
    try:
        try:
            first = next(traces)
        except TraceFormatError:
            why = not_a_trace(source.path) if source.folder is not None else None
            if why is None:
                raise
            seen.skip(source, why)
            return
        seen.parsed(source)
        held = [first]
        del first
        while held:
            seen.rank(source, held[0].rank)
            yield held.pop()  # the consumer holds the only reference and frees it as it goes
            following = next(traces, None)
            if following is not None:
                held.append(following)
            del following
    finally:
        traces.close()
