"""What a Kineto trace file says, read without tracegraph: the independent oracle of the suite.

Nothing here imports tracegraph. The JSON is decoded into a minimal msgspec struct (plain `json`
builds every args dict and is about 3x slower on the big traces; `test_oracle_reads_what_json_reads`
checks the two agree) and every conversion after that is plain Python: timestamps go through
`Decimal`, so µs with three decimals at epoch scale become exact nanoseconds. The functions run in
worker processes too, so they return plain picklable values.
"""

from __future__ import annotations

import gzip
from collections import Counter
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

LABEL_OF_CATEGORY = {
    **dict.fromkeys(("cpu_op", "user_annotation", "python_function", "Operator", "overhead"), "Op"),
    **dict.fromkeys(("cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"), "Runtime"),
    **dict.fromkeys(
        ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"),
        "Kernel",
    ),
}
COLUMNS = ("ev_idx", "label", "cat", "name", "pid", "tid", "ts", "dur", "correlation")


class _Args(msgspec.Struct):
    correlation: Any = None


class _Event(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")
    args: _Args | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Event] = []
    distributedInfo: Any = None


_DECODER = msgspec.json.Decoder(_Doc | list[_Event])


class Event(NamedTuple):
    """One complete ('X') event of a node category, as the file states it."""

    ev_idx: int
    label: str
    cat: str
    name: Any
    pid: Any  # int, or str in old traces ("stream 7")
    tid: Any
    ts: int  # ns
    dur: int | None  # ns
    correlation: Any


class TraceFacts(NamedTuple):
    path: str
    distributed_rank: int | None
    columns: dict[str, dict[str, list[Any]]]  # label -> COLUMNS of its events, in file order
    launched: list[int]  # GPU events whose correlation has a runtime call in the file
    cuda_syncs: int  # complete events of category cuda_sync

    def counts(self) -> Counter[str]:
        return Counter({label: len(c["ev_idx"]) for label, c in self.columns.items()})

    def events(self, label: str | None = None) -> list[Event]:
        """The events of one label, or of all, in file order."""
        labels = [label] if label else list(self.columns)
        found = [
            Event(*row)
            for lb in labels
            if lb in self.columns
            for row in zip(*(self.columns[lb][c] for c in COLUMNS), strict=True)
        ]
        return found if label else sorted(found, key=lambda e: e.ev_idx)


def read_bytes(path: Path) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def to_ns(micros: str | int | Decimal) -> int:
    """Exact nanoseconds of a JSON µs number, given as its text (or an int / Decimal)."""
    if isinstance(micros, int):
        return micros * 1000
    if isinstance(micros, str) and micros.lstrip("-").isdigit():
        return int(micros) * 1000
    return int((Decimal(micros) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def trace_facts(path: Path | str) -> TraceFacts:
    doc = _DECODER.decode(read_bytes(Path(path)))
    raw_events = doc if isinstance(doc, list) else doc.traceEvents
    columns: dict[str, dict[str, list[Any]]] = {}
    cuda_syncs = 0
    for i, e in enumerate(raw_events):
        cuda_syncs += e.ph == "X" and e.cat == "cuda_sync"
        label = LABEL_OF_CATEGORY.get(e.cat) if isinstance(e.cat, str) else None
        ts = bytes(e.ts)
        if e.ph != "X" or label is None or not ts or ts == b"null":
            continue
        dur = bytes(e.dur)
        row = (
            i,
            label,
            e.cat,
            e.name,
            e.pid,
            e.tid,
            to_ns(ts.decode()),
            to_ns(dur.decode()) if dur and dur != b"null" else None,
            e.args.correlation if e.args is not None else None,
        )
        of_label = columns.setdefault(label, {c: [] for c in COLUMNS})
        for column, value in zip(COLUMNS, row, strict=True):
            of_label[column].append(value)
    empty: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    runtime_correlations = {
        c for c in columns.get("Runtime", empty)["correlation"] if c is not None
    }
    kernels = columns.get("Kernel", empty)
    launched = [
        i
        for i, c in zip(kernels["ev_idx"], kernels["correlation"], strict=True)
        if c is not None and c in runtime_correlations
    ]
    dist = doc.distributedInfo if not isinstance(doc, list) else None
    rank = dist.get("rank") if isinstance(dist, dict) else None
    return TraceFacts(str(path), rank, columns, launched, cuda_syncs)


def calls_reference(events: list[Event]) -> set[tuple[int, int]]:
    """(parent ev_idx, child ev_idx) of CPU ranges, by a plain stack walk per thread.

    Ranges are visited by start, longer first; a range's parent is the innermost open range that
    ends no earlier than it does. Ranges with identical bounds nest by category (annotation
    outside op outside runtime call), then by file order.
    """
    outer_first = {
        "user_annotation": 0,
        "python_function": 1,
        "cpu_op": 2,
        "Operator": 2,
        "overhead": 3,
        "cuda_runtime": 4,
        "Runtime": 4,
        "mtia_runtime": 4,
        "cuda_driver": 5,
    }
    by_thread: dict[tuple[Any, Any], list[Event]] = {}
    for e in events:
        if e.label in ("Op", "Runtime"):
            by_thread.setdefault((e.pid, e.tid), []).append(e)
    edges: set[tuple[int, int]] = set()
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e.ts, -end(e), outer_first.get(e.cat, 9), e.ev_idx))
        stack: list[Event] = []
        for e in thread:
            while stack and end(stack[-1]) < end(e):
                stack.pop()
            if stack:
                edges.add((stack[-1].ev_idx, e.ev_idx))
            stack.append(e)
    return edges


def end(e: Event) -> int:
    return e.ts + (e.dur or 0)


def stream_reference(events: list[Event]) -> set[tuple[int, int, int]]:
    """(ev_idx, next ev_idx, gap_ns) of consecutive GPU activities per Kineto (pid, tid)."""
    streams: dict[tuple[Any, Any], list[Event]] = {}
    for e in events:
        if e.label == "Kernel":
            streams.setdefault((e.pid, e.tid), []).append(e)
    edges = set()
    for stream in streams.values():
        stream.sort(key=lambda e: (e.ts, e.ev_idx))
        for a, b in zip(stream, stream[1:], strict=False):
            edges.add((a.ev_idx, b.ev_idx, b.ts - end(a)))
    return edges


def load_json(path: Path) -> Any:
    """The document as `json` reads it, floats as Decimal (for building test inputs)."""
    import json

    return json.loads(read_bytes(path), parse_float=Decimal)


def trace_events(doc: Any) -> list[dict[str, Any]]:
    return doc if isinstance(doc, list) else doc["traceEvents"]
