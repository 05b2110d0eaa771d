"""Merged multi-rank trace files built from real per-rank files, the way merge tools write them.

Each rank's pids are remapped to rank*1_000_000 + pid, every complete event gets `args.rank`, and
process_name metadata names the rank; correlation, External id and flow ids are kept as they are,
so they collide across ranks. Event order within a rank is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .oracle import load_json, trace_events

PID_STRIDE = 1_000_000
# Rank 1's GPU in merged trace_filter: Kineto puts GPU activity on pid = device, here 1.
UNLABELLED_PID = 1 * PID_STRIDE + 1
# Exact µs decimals out, as they came in.
_ENCODER = msgspec.json.Encoder(decimal_format="number")


def merged_pid(rank: int, pid: Any) -> Any:
    return rank * PID_STRIDE + pid if isinstance(pid, int) else pid


def write_merged(
    per_rank: Sequence[Path], out: Path, unlabelled_pids: Collection[int] = ()
) -> Path:
    """Write one merged trace of per-rank files (rank = position); events on the merged pids
    `unlabelled_pids` get neither args.rank nor rank-naming metadata."""
    merged: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    for rank, path in enumerate(per_rank):
        doc = load_json(path)
        if not top and isinstance(doc, dict):
            top = {k: v for k, v in doc.items() if k != "traceEvents"}
        pids: set[int] = set()
        for event in trace_events(doc):
            event = dict(event)
            if "pid" in event:
                event["pid"] = merged_pid(rank, event["pid"])
                if isinstance(event["pid"], int):
                    pids.add(event["pid"])
            if event.get("ph") == "X" and event.get("pid") not in unlabelled_pids:
                event["args"] = {**(event.get("args") or {}), "rank": rank}
            merged.append(event)
        for pid in sorted(pids - set(unlabelled_pids)):
            merged.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"rank {rank}: trainer"},
                }
            )
    out.write_bytes(_ENCODER.encode({**top, "traceEvents": merged}))
    return out
