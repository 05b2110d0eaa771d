"""The report's exact figures computed again from a trace file's raw JSON, in plain Python (json,
Decimal, loops), sharing no code with tracegraph: GPU activity is every complete event of a
kernel, memcpy or memset category, times in ns exactly as written."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset",
                  "mtia_ccp_events"}  # fmt: skip


def gpu_events(path: Path) -> list[tuple[int, int, str]]:
    """(start ns, end ns, name) of every GPU activity of a single-rank trace file."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    document = json.loads(raw, parse_float=Decimal)
    out = []
    for e in document["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and "dur" in e:
            start = int(Decimal(e["ts"]) * 1000)
            out.append((start, start + int(Decimal(e["dur"]) * 1000), e.get("name", "")))
    return out


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in intervals)


def intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def kind(name: str) -> str:
    if re.match(r"^nccl.*Kernel", name):
        return "COMMUNICATION"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "MEMORY"
    if "Memcpy" in name or name.startswith("Memset") or "Sync" in name:
        return "OTHER"
    return "COMPUTATION"


def gpu_annotations(path: Path) -> dict[str, tuple[int, int, int, int]]:
    """Per name of the `gpu_user_annotation` ranges: (count, total, min, max) in ns."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    durations: dict[str, list[int]] = defaultdict(list)
    for e in json.loads(raw, parse_float=Decimal)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "gpu_user_annotation" and "dur" in e:
            durations[e.get("name", "")].append(int(Decimal(e["dur"]) * 1000))
    return {n: (len(d), sum(d), min(d), max(d)) for n, d in durations.items()}


def figures(path: Path) -> dict[str, object]:
    """Span, idle, compute, non-compute, communication and its overlap with compute, each
    kernel name's (count, total) per type, and the GPU user annotations."""
    events = gpu_events(path)
    if not events:
        return {"span": 0, "gpu_annotations": gpu_annotations(path)}
    every = union([(a, b) for a, b, _ in events])
    comp = union([(a, b) for a, b, n in events if kind(n) == "COMPUTATION"])
    comm = union([(a, b) for a, b, n in events if kind(n) == "COMMUNICATION"])
    span = max(b for _, b, _ in events) - min(a for a, _, _ in events)
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for a, b, n in events:
        if kind(n) != "OTHER":
            totals[(kind(n), n)][0] += 1
            totals[(kind(n), n)][1] += b - a
    return {
        "span": span,
        "idle": span - length(every),
        "compute": length(comp),
        "non_compute": length(every) - length(comp),
        "communication": length(comm),
        "overlapped": intersection(comm, comp),
        "kernels": {k: tuple(v) for k, v in totals.items()},
        "gpu_annotations": gpu_annotations(path),
    }


def calls_under(path: Path, ops: set[str], calls: set[str]) -> tuple[int, int, list[int]]:
    """How many runtime calls named in `calls` run inside (same pid and tid, within its start
    and end) an op named in `ops`, their summed duration in ns, and their ends."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    events = [e for e in json.loads(raw, parse_float=Decimal)["traceEvents"]
              if e.get("ph") == "X" and "dur" in e]  # fmt: skip

    def span(e: dict) -> tuple[int, int]:
        start = int(Decimal(e["ts"]) * 1000)
        return start, start + int(Decimal(e["dur"]) * 1000)

    outer = [(e["pid"], e["tid"], *span(e)) for e in events
             if e.get("cat") in ("cpu_op", "Operator") and e.get("name") in ops]  # fmt: skip
    count, total, ends = 0, 0, []
    for e in events:
        if e.get("cat") in ("cuda_runtime", "Runtime") and e.get("name") in calls:
            a, b = span(e)
            if any(p == e["pid"] and t == e["tid"] and s <= a and b <= f
                   for p, t, s, f in outer):  # fmt: skip
                count, total = count + 1, total + b - a
                ends.append(b)
    return count, total, ends


def gpu_idle_after(path: Path, instants: list[int]) -> int:
    """The GPU's idle time from each instant to its next start (0 where it is busy then), less
    the time in ranges whose names say data loading."""
    busy = union([(a, b) for a, b, _ in gpu_events(path)])
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    loading = union(
        [
            (
                int(Decimal(e["ts"]) * 1000),
                int(Decimal(e["ts"]) * 1000) + int(Decimal(e["dur"]) * 1000),
            )
            for e in json.loads(raw, parse_float=Decimal)["traceEvents"]
            if e.get("ph") == "X" and "dur" in e and "dataloader" in e.get("name", "").lower()
        ]
    )
    idle = []
    for t in instants:
        if any(a <= t < b for a, b in busy):
            continue
        later = [a for a, _ in busy if a > t]
        if later:
            idle.append((t, min(later)))
    gaps = union(idle)
    return length(gaps) - intersection(gaps, loading)
