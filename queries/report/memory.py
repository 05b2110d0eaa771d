"""Memory copies and sets by kind (`Memcpy HtoD`, `Memcpy DtoH`, `Memset`, ...) per rank: how
many, how long, how many bytes and the bandwidth achieved, where the trace records each copy's
size (Kineto's `bytes` arg); a trace that records none gives the counts and times only."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

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
    """Per rank and kind, by whole-column passes (the size read from `args` by a regex)."""
    table = store.run(
        "MATCH (k:Kernel) WHERE k.run = $run AND k.cat IN $cats AND k.rank IN $ranks "
        "RETURN k.rank AS rank, k.name AS name, k.dur AS dur, k.args AS args",
        {"run": run, "cats": list(MEMORY_CATEGORIES), "ranks": list(ranks)},
    ).table
    return rows_of(table)


def event_rows(events: pa.Table) -> list[Row]:
    """The same rows from one rank's keyed events (a summary worker's)."""
    copies = pc.and_(
        pc.equal(events["label"], "Kernel"),
        pc.is_in(events["cat"], value_set=pa.array(MEMORY_CATEGORIES)),
    )
    return rows_of(events.select(["rank", "name", "dur", "args"]).filter(copies))


def rows_of(table: pa.Table) -> list[Row]:
    """Per rank and kind, from the copies' rank, name, dur and args."""
    if table.num_rows == 0:
        return []
    names = pc.dictionary_encode(pc.fill_null(table["name"], "")).combine_chunks()
    kinds = pa.array([memory_kind(n) for n in names.dictionary.to_pylist()], pa.string())
    found = pc.extract_regex(pc.fill_null(table["args"], ""), r'"bytes":\s*(?P<b>[0-9]+)[,}\s]')
    dur = pc.fill_null(table["dur"], 0)
    sized = pc.and_(pc.is_valid(found), pc.greater(dur, 0))
    size = pc.if_else(sized, pc.cast(pc.struct_field(found, [0]), pa.int64()), None)
    frame = pa.table({
        "rank": table["rank"],
        "kind": kinds.take(names.indices),
        "dur": dur,
        "bytes": size,
        "sized_ns": pc.if_else(sized, dur, 0),
        "rate": pc.divide(pc.cast(size, pa.float64()), pc.cast(dur, pa.float64())),
    })  # fmt: skip
    groups = frame.group_by(["rank", "kind"]).aggregate(
        [("dur", "count"), ("dur", "sum"), ("bytes", "sum"), ("sized_ns", "sum"), ("rate", "max")]
    )
    rows = []
    for g in groups.sort_by([("rank", "ascending"), ("kind", "ascending")]).to_pylist():
        total, sized_ns = g["bytes_sum"], g["sized_ns_sum"]
        rows.append(
            {
                "rank": g["rank"],
                "kind": g["kind"],
                "count": g["dur_count"],
                "total_ns": g["dur_sum"],
                "bytes": total,
                # bytes per ns = GB/s, over the copies whose size is known
                "gbps": round(total / sized_ns, 3) if total and sized_ns else None,
                "max_gbps": round(g["rate_max"], 3) if g["rate_max"] is not None else None,
            }
        )
    return rows


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("kind", pa.string()), ("count", pa.int64()),
     ("total_ns", pa.int64()), ("bytes", pa.int64()), ("gbps", pa.float64()),
     ("max_gbps", pa.float64())]
)  # fmt: skip
