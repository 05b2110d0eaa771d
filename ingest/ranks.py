"""Which rank each event of a file belongs to, and what the file says of its ranks:
distributedInfo's rank and world size, the ranks process metadata names (merged files), each
pid's rank where events carry no args.rank, a merged file's rows ordered by rank, and the host
and GPU the file was recorded on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .columns import METADATA_KIND, as_int, phase_kinds
from .decode import RawEvent, TraceShell, json_excerpt
from .errors import TraceFormatError
from .parse_options import ParseOptions
from .schema import MAX_RANK

# process_name / process_labels metadata written by merge tools, e.g. "rank 3: python".
_RANK_IN_NAME = re.compile(r"\brank[\s_:#=-]*(\d+)", re.IGNORECASE | re.ASCII)


def process_names(
    raw: list[RawEvent], first_idx: int, kinds: np.ndarray | None = None
) -> dict[int, dict[int, int]]:
    """pid → {rank: index of the first event naming it} from metadata events whose name says
    the rank (merged files); a pid may be named with several ranks (an error, if it matters).
    `kinds`: `columns.phase_kinds(raw)`, where the caller has it."""
    ranks: dict[int, dict[int, int]] = {}
    if kinds is None:
        kinds = phase_kinds(raw)
    named = np.flatnonzero(kinds == METADATA_KIND).tolist()
    for i in named:
        e = raw[i]
        if e.name not in ("process_name", "process_labels"):
            continue
        pid = as_int(e.pid)
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


def distributed_info(path: Path, top: TraceShell) -> dict[str, Any]:
    """The trace's distributedInfo (empty where it has none; not an object: an error)."""
    info = top.distributedInfo
    if info is None:
        return {}
    if not isinstance(info, dict):
        raise TraceFormatError(path, f"distributedInfo is {json_excerpt(info)}, not an object")
    return info


def info_rank(path: Path, dist: dict[str, Any]) -> int | None:
    """distributedInfo.rank; one that is there but no rank is an error (not rank 0)."""
    return _info_int(path, dist, "rank", 0, f"a rank in 0..{MAX_RANK} (pass --rank N)")


def trace_world_size(path: Path, dist: dict[str, Any]) -> int | None:
    """distributedInfo.world_size (None where it is not there)."""
    return _info_int(path, dist, "world_size", 1, f"a size in 1..{MAX_RANK + 1}")


def _info_int(path: Path, dist: dict[str, Any], key: str, low: int, what: str) -> int | None:
    """distributedInfo[key] as an int in low..MAX_RANK + low (None where it is not there); any
    other value is an error saying it is not `what`."""
    value = dist.get(key)
    if value is None:
        return None
    number = None if isinstance(value, bool) else as_int(value)
    if number is None or not low <= number <= MAX_RANK + low:
        raise TraceFormatError(path, f"distributedInfo.{key} is {json_excerpt(value)}, not {what}")
    return number


def rows_by_rank(handover: list[pa.Table]) -> pa.Table:
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


def event_ranks(
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
