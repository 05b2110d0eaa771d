"""Memory copies and sets by kind (`Memcpy HtoD`, `Memcpy DtoH`, `Memset`, ...) per rank: how
many, how long, how many bytes and the bandwidth achieved, where the trace records each copy's
size (Kineto's `bytes` arg); a trace that records none gives the counts and times only."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from tracegraph.ingest.store import GraphStore

from .analyses import Row

MEMORY_CATEGORIES = ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")


def memory_kind(name: str) -> str:
    """The copy's kind as HTA names it: `Memset`, `Memcpy HtoD`, ... (`Memcpy Unknown`)."""
    if name.startswith("Memset"):
        return "Memset"
    if not name.startswith("Memcpy"):
        return "Memcpy Unknown"
    return name[:11]


def memory_rows(store: GraphStore, run: str, ranks: Sequence[int]) -> list[Row]:
    table = store.run(
        "MATCH (k:Kernel) WHERE k.run = $run AND k.cat IN $cats "
        "RETURN k.rank AS rank, k.name AS name, k.dur AS dur, k.args AS args",
        {"run": run, "cats": list(MEMORY_CATEGORIES)},
    ).table
    wanted = set(ranks)
    groups: dict[tuple[int, str], list[tuple[int, int | None]]] = {}
    for rank, name, dur, args in zip(
        *(table[c].to_pylist() for c in ("rank", "name", "dur", "args")), strict=True
    ):
        if rank in wanted:
            groups.setdefault((rank, memory_kind(name or "")), []).append((dur or 0, _bytes(args)))
    rows = []
    for (rank, kind), copies in sorted(groups.items()):
        durs = np.array([d for d, _ in copies], np.int64)
        sized = [(d, b) for d, b in copies if b is not None and d > 0]
        total_bytes = sum(b for _, b in sized) if sized else None
        sized_ns = sum(d for d, _ in sized)
        rows.append(
            {
                "rank": rank,
                "kind": kind,
                "count": len(copies),
                "total_ns": int(durs.sum()),
                "bytes": total_bytes,
                # bytes per ns = GB/s, over the copies whose size is known
                "gbps": round(total_bytes / sized_ns, 3) if total_bytes and sized_ns else None,
                "max_gbps": round(max(b / d for d, b in sized), 3) if sized else None,
            }
        )
    return rows


def _bytes(args: str | None) -> int | None:
    try:
        value = json.loads(args).get("bytes") if args else None
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int | float) and value >= 0 else None


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("kind", pa.string()), ("count", pa.int64()),
     ("total_ns", pa.int64()), ("bytes", pa.int64()), ("gbps", pa.float64()),
     ("max_gbps", pa.float64())]
)  # fmt: skip
