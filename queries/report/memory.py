"""Memory copies and sets by kind (`Memcpy HtoD`, `Memcpy DtoH`, `Memset`, ...) per rank: how
many, how long, how many bytes and the bandwidth achieved, where the trace records each copy's
size (Kineto's `bytes` arg); a trace that records none gives the counts and times only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.row_codes import row_codes
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
    kind_of_name = [memory_kind(n) for n in names.dictionary.to_pylist()]
    kinds = sorted(set(kind_of_name))  # codes in name order: groups sort as the names do
    code = np.array([kinds.index(k) for k in kind_of_name], np.int64)
    kind = code[names.indices.to_numpy(zero_copy_only=False)]
    rank = ints(table["rank"])
    dur = ints(table["dur"], 0)
    found = pc.extract_regex(pc.fill_null(table["args"], ""), r'"bytes":\s*(?P<b>[0-9]+)[,}\s]')
    sized = pc.is_valid(found).to_numpy(zero_copy_only=False) & (dur > 0)
    size = np.zeros(len(dur), np.int64)
    sizes = pc.struct_field(found, [0]).filter(pa.array(sized))
    size[sized] = pc.cast(sizes, pa.int64()).to_numpy()
    group, first = row_codes(rank, kind)
    groups = np.stack([rank[first], kind[first]], axis=1)
    n = len(groups)

    def total(values: np.ndarray) -> list[int]:
        out = np.zeros(n, np.int64)
        np.add.at(out, group, values)
        return out.tolist()

    count, total_ns = total(np.ones(len(dur), np.int64)), total(dur)
    byte_sum, sized_ns = total(size), total(np.where(sized, dur, 0))
    any_sized = total(sized.astype(np.int64))
    rate = np.full(n, -np.inf)
    np.maximum.at(rate, group[sized], size[sized] / dur[sized])
    rows = []
    for g, (r, k) in enumerate(groups.tolist()):
        known = any_sized[g] > 0
        rate_of_sized = byte_sum[g] / sized_ns[g] if known and byte_sum[g] and sized_ns[g] else None
        rows.append(
            {
                "rank": r,
                "kind": kinds[k],
                "count": count[g],
                "total_ns": total_ns[g],
                "bytes": byte_sum[g] if known else None,
                # bytes per ns = GB/s, over the copies whose size is known
                "gbps": round(rate_of_sized, 3) if rate_of_sized is not None else None,
                "max_gbps": round(float(rate[g]), 3) if known else None,
            }
        )
    return rows


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("kind", pa.string()), ("count", pa.int64()),
     ("total_ns", pa.int64()), ("bytes", pa.int64()), ("gbps", pa.float64()),
     ("max_gbps", pa.float64())]
)  # fmt: skip
