"""A run as Chrome trace JSON, for ui.perfetto.dev or chrome://tracing: its events (one rank or
all), an edge set's critical path overlaid, its events marked and a flow arrow where it moves
from one track to another (a launch, a sync, another thread or rank) (and, for a
native set, its segments as slices on a "critical path (segments)" track of each rank), and the
report's findings as instant events.

Tracks: each rank is two processes, its host threads (pid 2·rank) and its GPU streams (pid
2·rank + 1). Times are µs from the run's first event, written from integer ns (three decimals:
exact, where epoch µs as floats would round to a quarter µs); the origin is in `otherData`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import pyarrow as pa

from tracegraph.ingest import schema
from tracegraph.ingest.python_frames import readable
from tracegraph.ingest.store import GraphStore

from .dependencies import dependency_edges
from .report.findings import Finding
from .runs import id_filter

CRITICAL = "terrible"  # the trace viewers' colour name for events on the critical path
SEGMENT_TID = 2**31 - 1  # each rank's "critical path (segments)" track


def write_chrome_trace(
    out: TextIO,
    store: GraphStore,
    run: str,
    run_idx: int,
    *,
    rank: int | None = None,
    edge_set: str | None = None,
    findings: Sequence[Finding] = (),
) -> dict[str, int]:
    """Write the trace to `out`; counts of what was written (events, flows, findings)."""
    events = _events(store, run_idx, rank)
    origin = int(min((t.column("ts").to_numpy().min() for t in events.values() if t.num_rows),
                     default=0))  # fmt: skip
    path = _critical_path(store, edge_set, run_idx, rank) if edge_set else None
    critical = set(path["src_id"].to_pylist()) | set(path["dst_id"].to_pylist()) if path else set()
    where: dict[int, tuple[int, int, int]] = {}  # event id → (pid, tid, ts)
    out.write('{"displayTimeUnit": "ns",\n "otherData": ')
    out.write(json.dumps({"run": run, "time_origin_ns": origin, "edge_set": edge_set}))
    out.write(',\n "traceEvents": [\n')
    separator = ""

    def emit(text: str) -> None:
        nonlocal separator
        out.write(separator + text)
        separator = ",\n"

    counts = {"events": 0, "path_edges": 0, "flows": 0, "segments": 0, "findings": 0}
    for line in _metadata(events):
        emit(line)
    for label, table in events.items():
        for row in table.to_pylist():
            pid, tid = _track(label, row)
            where[row["id"]] = (pid, tid, row["ts"])
            colour = f', "cname": "{CRITICAL}"' if row["id"] in critical else ""
            emit(
                f'{{"ph": "X", "name": {json.dumps(row["name"] or "")}, '
                f'"cat": {json.dumps(row["cat"] or label)}, "pid": {pid}, "tid": {tid}, '
                f'"ts": {_us(row["ts"] - origin)}, "dur": {_us(row["dur"] or 0)}{colour}, '
                f'"args": {{"id": {row["id"]}, "rank": {row["rank"]}}}}}'
            )
            counts["events"] += 1
    if path is not None:
        # an arrow where the path moves to another track (a launch, a sync, another thread or
        # rank); along one track its events are marked, an arrow per edge would bury them
        for i, edge in enumerate(path.to_pylist()):
            counts["path_edges"] += 1
            src = where.get(edge["src_id"], (-1, -1, 0))[:2]
            dst = where.get(edge["dst_id"], (-1, -1, 0))[:2]
            if src == dst:
                continue
            for phase, end, (pid, tid) in (("s", "src", src), ("f", "dst", dst)):
                binding = ', "bp": "e"' if phase == "f" else ""
                emit(
                    f'{{"ph": "{phase}", "id": {i}, "name": "critical path", '
                    f'"cat": "critical_path", "pid": {pid}, "tid": {tid}, '
                    f'"ts": {_us(edge[f"{end}_time"] - origin)}{binding}}}'
                )
            counts["flows"] += 1
    if path is not None and edge_set is not None:
        for line, is_slice in _segment_slices(store, run, edge_set, path, origin, rank):
            emit(line)
            counts["segments"] += is_slice
    for finding in findings:  # at its first evidence event that is in the trace
        at = next((i for i in finding.evidence_ids if i in where), None)
        if at is None:
            continue
        pid, tid, ts = where[at]
        args = {"summary": f"{finding.title}: {finding.detail}", "fix": finding.fix}
        emit(
            f'{{"ph": "i", "s": "p", "name": {json.dumps(finding.kind)}, '
            f'"cat": "finding", "pid": {pid}, "tid": {tid}, "ts": {_us(ts - origin)}, '
            f'"args": {json.dumps(args)}}}'
        )
        counts["findings"] += 1
    out.write("\n]}\n")
    return counts


def _events(store: GraphStore, run_idx: int, rank: int | None) -> dict[str, pa.Table]:
    out = {}
    for label in schema.EVENT_LABELS:
        extra = ", n.stream AS stream, n.device AS device" if label == "Kernel" else ""
        out[label] = store.run(
            f"MATCH (n:{label}) WHERE {id_filter('n', run_idx, rank)} "
            "RETURN n.id AS id, n.rank AS rank, n.name AS name, n.cat AS cat, n.pid AS pid, "
            f"n.tid AS tid, n.ts AS ts, n.dur AS dur{extra} ORDER BY n.id"
        ).table
    return out


def _critical_path(store: GraphStore, edge_set: str, run_idx: int, rank: int | None) -> pa.Table:
    edges = dependency_edges(store, edge_set, run_idx, rank)
    on_path = edges.filter(edges["on_critical_path"])
    return on_path.sort_by([("src_time", "ascending"), ("path_order", "ascending")])


def _track(label: str, row: dict[str, object]) -> tuple[int, int]:
    rank = int(row["rank"])  # type: ignore[call-overload]
    if label == "Kernel":
        stream = row.get("stream")
        return 2 * rank + 1, int(stream if stream is not None else row["tid"] or 0)  # type: ignore[call-overload]
    return 2 * rank, int(row["tid"] or 0)  # type: ignore[call-overload]


def _metadata(events: dict[str, pa.Table]) -> Iterator[str]:
    ranks = sorted({r for t in events.values() for r in t.column("rank").to_pylist()})
    for rank in ranks:
        for pid, what in ((2 * rank, "host"), (2 * rank + 1, "GPU")):
            yield (
                f'{{"ph": "M", "name": "process_name", "pid": {pid}, '
                f'"args": {{"name": "rank {rank} ({what})"}}}}'
            )


def _segment_slices(
    store: GraphStore, run: str, edge_set: str, path: pa.Table, origin: int, rank: int | None
) -> Iterator[tuple[str, bool]]:
    """A native set's path segments (two levels) as slices on a "critical path" track of each
    rank, from their first path edge's start to their last one's end (their parts nest): each
    line, and whether it is a slice (else the track's name)."""
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run AND e.name = $name RETURN e.window AS window",
        {"run": run, "name": edge_set},
    ).table
    if table.num_rows == 0:
        return
    window = json.loads(table["window"][0].as_py() or "{}")
    times = {
        (schema.key_rank(row["dst_id"]), row["path_order"]): (row["src_time"], row["dst_time"])
        for row in path.select(["dst_id", "path_order", "src_time", "dst_time"]).to_pylist()
    }
    for key, entries in (window.get("ranks") or {}).items():
        r = int(key)
        if rank is not None and r != rank:
            continue
        named = False
        for entry in entries or ():
            start = (entry.get("path_order") or [0, 0])[0]
            for seg in _two_levels(entry.get("segments") or ()):
                first, last = seg["path_edges"]
                a, b = times.get((r, start + first)), times.get((r, start + last - 1))
                if a is None or b is None or seg["ns"] <= 0:
                    continue
                if not named:
                    yield (
                        f'{{"ph": "M", "name": "thread_name", "pid": {2 * r}, '
                        f'"tid": {SEGMENT_TID}, "args": {{"name": "critical path (segments)"}}}}',
                        False,
                    )
                    named = True
                args = {"path_us": seg["ns"] / 1e3, "saving_us": _saving_us(seg)}
                yield (
                    f'{{"ph": "X", "name": {json.dumps(readable(str(seg["name"])))}, '
                    f'"cat": "critical_path_segment", "pid": {2 * r}, "tid": {SEGMENT_TID}, '
                    f'"ts": {_us(a[0] - origin)}, "dur": {_us(max(b[1] - a[0], 0))}, '
                    f'"args": {json.dumps(args)}}}',
                    True,
                )


def _two_levels(segments: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Stored segments (JSON) and their children: the two levels a window keeps."""
    for seg in segments:
        yield seg
        yield from seg.get("children") or ()


def _saving_us(seg: dict[str, Any]) -> float | None:
    saving = seg.get("saving_ns")
    return None if saving is None else int(saving) / 1e3


def _us(ns: int) -> str:
    """ns as µs with three decimals, from integers (exact)."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}"
