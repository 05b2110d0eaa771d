"""Merged multi-rank trace files built from real per-rank files, the way merge tools write them.

Each rank's pids are remapped to rank*1_000_000 + pid; correlation, External id and flow ids are
kept as they are, so they collide across ranks. The ranks are labelled, as merge tools do, either
by `args.rank` on every complete event plus process_name metadata naming the rank (`labels=
"args"`, the default), or by the metadata alone (`labels="metadata"`: each process_name becomes
"rank R: <its name>", and a pid without one gets one). Event order within a rank is kept, or, with
`interleave`, every event of every rank is sorted by ts, as time-ordered merges write them
(metadata and other events without ts first): `"stable"` (or True) keeps equal timestamps in rank
order, then in-rank order; `"quicksort"` sorts as pandas' `sort_values("ts")` does (numpy's
quicksort), which leaves equal timestamps in no particular order; `"reversed-ties"` puts events
with equal timestamps in the reverse of their order (the worst case for ties broken by position).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np

from .oracle import load_json, trace_events

PID_STRIDE = 1_000_000
# Rank 1's GPU in merged trace_filter: Kineto puts GPU activity on pid = device, here 1.
UNLABELLED_PID = 1 * PID_STRIDE + 1
# Exact µs decimals out, as they came in.
_ENCODER = msgspec.json.Encoder(decimal_format="number")
_NO_TS = Decimal("-Infinity")


def merged_pid(rank: int, pid: Any) -> Any:
    return rank * PID_STRIDE + pid if isinstance(pid, int) else pid


def write_merged(
    per_rank: Sequence[Path],
    out: Path,
    unlabelled_pids: Collection[int] = (),
    *,
    labels: Literal["args", "metadata"] = "args",
    interleave: bool | Literal["stable", "quicksort", "reversed-ties"] = False,
    ranks: Sequence[int] | None = None,
) -> Path:
    """Write one merged trace of per-rank files (rank = position, or `ranks[i]` for file i);
    events on the merged pids `unlabelled_pids` get neither args.rank nor rank-naming metadata."""
    ranks = list(range(len(per_rank))) if ranks is None else list(ranks)
    merged: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    for rank, path in zip(ranks, per_rank, strict=True):
        doc = load_json(path)
        if not top and isinstance(doc, dict):
            top = {k: v for k, v in doc.items() if k != "traceEvents"}
        pids: set[int] = set()
        named: set[int] = set()
        for event in trace_events(doc):
            event = dict(event)
            if "pid" in event:
                event["pid"] = merged_pid(rank, event["pid"])
                if isinstance(event["pid"], int):
                    pids.add(event["pid"])
            pid = event.get("pid")
            if pid in unlabelled_pids:
                merged.append(event)
                continue
            if labels == "args" and event.get("ph") == "X":
                event["args"] = {**(event.get("args") or {}), "rank": rank}
            if labels == "metadata" and _is_process_name(event):
                old = (event.get("args") or {}).get("name", "")
                event["args"] = {**event["args"], "name": f"rank {rank}: {old}"}
                named.add(pid)
            merged.append(event)
        for pid in sorted(pids - set(unlabelled_pids) - named):
            merged.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"rank {rank}: trainer"},
                }
            )
    if interleave == "reversed-ties":
        merged = [e for _, e in sorted(enumerate(merged), key=lambda p: (_ts(p[1]), -p[0]))]
    elif interleave == "quicksort":
        ts = [_ts(e) for e in merged]
        keys = np.array([-(2**62) if t == _NO_TS else int(t * 1000) for t in ts], np.int64)
        order = np.argsort(keys, kind="quicksort")
        merged = [merged[i] for i in order]
    elif interleave:
        merged.sort(key=_ts)  # stable
    out.write_bytes(_ENCODER.encode({**top, "traceEvents": merged}))
    return out


def _is_process_name(event: dict[str, Any]) -> bool:
    return (
        event.get("ph") == "M"
        and event.get("name") == "process_name"
        and isinstance(event.get("args"), dict)
    )


def _ts(event: dict[str, Any]) -> Decimal:
    ts = event.get("ts")
    if event.get("ph") == "M" or ts is None:
        return _NO_TS
    return Decimal(ts) if not isinstance(ts, Decimal) else ts
