"""One trace file → one RankTrace per rank (merged multi-rank files are split by rank).

The entry that runs the read's stages in turn on a file whose JSON is held whole: its bytes
(`file_bytes`), decoded into structs (`decode`: in one pass up to `decode.WHOLE_DECODE_BYTES`,
else a chunk of events at a time), their columns (`columns`), then the ranks (`ranks`). `read`
streams larger files through the same stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .columns import (
    DROP_REASONS,
    NO_TS,
    LeftOutFlows,
    as_int,
    event_table,
    memory_counts,
    phase_kinds,
)
from .decode import (
    CHUNK_EVENTS,
    EVENT_DECODERS,
    SHELL_DECODER,
    WHOLE_DECODE_BYTES,
    WHOLE_DECODER,
    RawEvent,
    TraceShell,
    decode_blob,
    event_position,
    first_line,
)
from .errors import TraceFormatError
from .file_bytes import json_bytes, read_trace_bytes
from .parse_options import DEFAULT_OPTIONS, ParseOptions
from .ranks import (
    distributed_info,
    event_ranks,
    file_host,
    gpu_name,
    info_rank,
    process_names,
    rows_by_rank,
    trace_world_size,
)
from .schema import MAX_EV, MAX_RANK


@dataclass(frozen=True)
class RankTrace:
    """The events of one rank from one file, plus what the file says about the rank.
    `dropped` counts the rank's events left out at parse time, by reason (`columns.NO_TS`,
    `columns.BAD_DUR`)."""

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
    # False: its flow events are not in `events` (`ParseOptions.flow_rows`), only counted
    flow_rows: bool = True


class FlowRowsNeeded(Exception):
    """A read that left a file's flow events out of the rows (`ParseOptions.flow_rows`) finds
    that it needs them (a merged file's ranks, a launch without its correlation's call): the
    file is to be read again with them."""


def parse_file(path: Path, options: ParseOptions = DEFAULT_OPTIONS) -> list[RankTrace]:
    """Parse one Kineto trace file into one RankTrace per rank it holds."""
    return _parse(path, [read_trace_bytes(path, options)], options)


def parse_json_bytes(path: Path, data: bytes, options: ParseOptions) -> list[RankTrace]:
    """Parse a file's JSON bytes, already read (and gunzipped)."""
    return _parse(path, [data], options)


def parse_bytes(
    data: bytes, name: str | Path = "<bytes>", options: ParseOptions = DEFAULT_OPTIONS
) -> list[RankTrace]:
    """Parse a trace held in memory (plain or gzip JSON) as parse_file parses a file; `name`
    stands for the file in errors and in RankTrace.file."""
    path = Path(name)
    return _parse(path, [json_bytes(path, data, options)], options)


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
    shell, raw_events, decoded = _top_level(path, data)
    if raw_events is None:
        raise TraceFormatError(path, "JSON has no 'traceEvents' list")
    if not raw_events:
        raise TraceFormatError(path, "trace has no events")
    if len(raw_events) > MAX_EV:
        raise TraceFormatError(path, f"trace has {len(raw_events):,} events, over {MAX_EV:,}")
    chunks: list[pa.Table] = []
    left_out = LeftOutFlows()
    metadata: dict[int, dict[int, int]] = {}
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        if decoded:
            events, loose = raw_events[start : start + CHUNK_EVENTS], False
        else:
            events, loose = _decoded_chunk(path, raw_events[start : start + CHUNK_EVENTS], start)
        kinds = phase_kinds(events)
        table, flows = event_table(path, events, start, loose, options.flow_rows, kinds)
        chunks.append(table)
        left_out = left_out.plus(flows)
        for pid, ranks in process_names(events, start, kinds).items():
            for rank, ev_idx in ranks.items():
                metadata.setdefault(pid, {}).setdefault(rank, ev_idx)
    del raw_events, data
    events_table = pa.concat_tables(chunks)
    memory, memory_kept = memory_counts(events_table)
    # where the flows are left out, these two refuse a file of flows only, which the retry
    # with them (`FlowRowsNeeded`'s) reads as it would be read with them
    if events_table.num_rows == memory:
        raise TraceFormatError(path, "trace has no complete ('X') events")
    if events_table["drop"].null_count == memory_kept:
        dropped = _dropped(events_table)
        raise TraceFormatError(path, f"trace has no complete ('X') events to keep ({dropped})")
    _check_span(path, events_table, left_out)
    # handed over in a list so that only _split_by_rank holds the table (it may reorder it)
    handover = [events_table]
    del events_table
    return _split_by_rank(path, handover, metadata, shell, options, left_out)


def _top_level(path: Path, data: bytes | bytearray) -> tuple[TraceShell, list | None, bool]:
    """The top level and its events (None: it has no traceEvents list), and whether they are
    decoded already (`RawEvent`s: a small file whose fields have the usual types) or are raw
    JSON, to be decoded a chunk at a time."""
    if len(data) <= WHOLE_DECODE_BYTES:
        try:
            whole = WHOLE_DECODER.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass  # decoded again below, which says what is wrong
        else:
            if isinstance(whole, list):
                return TraceShell(), whole, True
            events, whole.traceEvents = whole.traceEvents, None  # held by the caller only
            return whole, events, True
    try:
        shell = SHELL_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"not a Kineto JSON trace ({first_line(exc)})") from exc
    if isinstance(shell, list):
        return TraceShell(), shell, False
    return shell, shell.traceEvents, False


def _decoded_chunk(path: Path, raw: list[msgspec.Raw], start: int) -> tuple[list[RawEvent], bool]:
    """A chunk of raw events (from position `start`) decoded: (their structs, whether loosely)."""
    blob = b"[" + b",".join(raw) + b"]"
    try:
        return decode_blob(EVENT_DECODERS, blob)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(path, f"malformed {event_position(exc, offset=start)}") from exc


def _dropped(events: pa.Table) -> str:
    counts = events["drop"].drop_null().value_counts().to_pylist()
    return ", ".join(f"{c['counts']:,} with {DROP_REASONS[c['values']]}" for c in counts)


def _check_span(path: Path, events: pa.Table, left_out: LeftOutFlows) -> None:
    """Refuse timestamps so far apart that their difference overflows an INT64."""
    ts = events["ts"]
    firsts = [pc.min(ts).as_py(), left_out.first_ts]
    lasts = [pc.max(pc.add(ts, pc.fill_null(events["dur"], 0))).as_py(), left_out.last_end]
    first = min((t for t in firsts if t is not None), default=None)
    last = max((t for t in lasts if t is not None), default=None)
    if first is not None and last is not None and last - first >= 1 << 63:
        raise TraceFormatError(
            path, f"timestamps span {last - first} ns, more than an INT64 can hold"
        )


def _split_by_rank(
    path: Path,
    handover: list[pa.Table],
    metadata: dict[int, dict[int, int]],
    top: TraceShell,
    options: ParseOptions,
    left_out: LeftOutFlows,
) -> list[RankTrace]:
    """One RankTrace per rank of the file, in rank order: the whole file where it holds one
    rank, else its events split by the rank of each (`ranks.event_ranks`)."""
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
        flows = None if options.flow_rows else left_out
        return [rank_trace(path, rank, events, top, world_size, flows)]
    if not options.flow_rows:  # each flow event is to be given its rank, and may have none
        raise FlowRowsNeeded(path)
    if options.rank is not None:
        raise TraceFormatError(path, "holds several ranks; --rank applies to single-rank files")
    rank = event_ranks(path, events, metadata, options)
    handover.append(events.append_column("rank", rank))
    del events
    events = rows_by_rank(handover)
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


def rank_trace(
    path: Path,
    rank: int,
    events: pa.Table,
    top: TraceShell,
    world_size: int | None,
    left_out: LeftOutFlows | None = None,
) -> RankTrace:
    """One rank's trace from its events (those to drop counted by why and left out), with
    the file's metadata: its devices, host, GPU and clock base. `left_out`: the flow events
    that are not among `events` (None: they are)."""
    if not 0 <= rank <= MAX_RANK:
        raise TraceFormatError(path, f"rank {rank} is out of range 0..{MAX_RANK} (pass --rank N)")
    dropped: dict[str, int] = {}
    if events["drop"].null_count < events.num_rows:
        counts = events["drop"].drop_null().value_counts().to_pylist()
        dropped = {c["values"]: c["counts"] for c in counts}
        events = events.filter(pc.is_null(events["drop"]))
    if left_out is not None and left_out.no_ts:
        dropped[NO_TS] = dropped.get(NO_TS, 0) + left_out.no_ts
    devices = pc.unique(pc.filter(events["device"], pc.equal(events["label"], "Kernel")))
    devices = devices.drop_null().to_pylist()
    device = min(devices) if devices else None
    return RankTrace(
        file=str(path),
        rank=rank,
        events=events.drop_columns(["arg_rank", "drop"]),
        world_size=world_size,
        schema_version=as_int(top.schemaVersion),
        base_time_ns=as_int(top.baseTimeNanoseconds),
        device=device,
        distributed_info=msgspec.json.encode(top.distributedInfo).decode(),
        dropped=dropped,
        host=file_host(top),
        gpu=gpu_name(top, device),
        flow_rows=left_out is None,
    )
