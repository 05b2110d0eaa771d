"""Time series of one rank's GPU work, as HTA's `get_queue_length_time_series` and
`get_memory_bw_time_series` give them: a step function, one row where the value changes (it
holds until the next row), the value after every change at that instant.

- queue length per stream: kernels launched and not yet started (+1 at the launching call's
  start, -1 at the kernel's start; kernels without a known launch are left out);
- memory bandwidth per copy kind (`Memcpy HtoD`, `Memset`, ...): the summed bandwidth of the
  copies running, each Kineto's recorded `memory bandwidth (GB/s)` (from the copy's exact
  duration), else its bytes over its duration (GB/s = bytes/ns); copies with neither are left
  out. HTA reads the recorded figure too, and gives a 0 µs copy 1 µs.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.edgesets.records import run_source
from tracegraph.ingest.store import GraphStore

from .activity import NO_LAUNCH, GpuActivity, exact_activity, hta_activity
from .memory import MEMORY_CATEGORIES, memory_kind

QUEUE_SCHEMA = pa.schema(
    [("rank", pa.int64()), ("stream", pa.int64()), ("ts", pa.int64()), ("queued", pa.int64())]
)
BANDWIDTH_SCHEMA = pa.schema(
    [("rank", pa.int64()), ("kind", pa.string()), ("ts", pa.int64()), ("gbps", pa.float64())]
)


def queue_series(gpu: GpuActivity) -> pa.Table:
    """Per stream (the trace's id), the kernels launched and not yet started over time."""
    known = gpu.launch_ts != NO_LAUNCH
    parts = []
    for lane in np.unique(gpu.lane[known]).tolist():
        rows = np.flatnonzero(known & (gpu.lane == lane))
        times, values = _changes(
            np.concatenate((gpu.launch_ts[rows], gpu.ts[rows])),
            np.concatenate((np.ones(len(rows)), -np.ones(len(rows)))),
        )
        stream = np.full(len(times), gpu.stream[rows[0]], np.int64)
        parts.append((stream, times, values.astype(np.int64)))
    return _table(QUEUE_SCHEMA, gpu.rank, parts)


def bandwidth_series(copies: pa.Table) -> pa.Table:
    """Per rank and copy kind, the summed bandwidth (GB/s) of the copies running, from the
    copies' rank, name, ts, dur and args."""
    args = pc.fill_null(copies["args"], "")
    recorded = pc.extract_regex(args, r'"memory bandwidth \(GB/s\)":\s*(?P<g>[-+0-9.eE]+)[,}\s]')
    found = pc.extract_regex(args, r'"bytes":\s*(?P<b>[0-9]+)[,}\s]')
    dur = ints(copies["dur"], 0)
    has_rate = pc.is_valid(recorded).to_numpy(zero_copy_only=False)
    sized = (pc.is_valid(found).to_numpy(zero_copy_only=False) & (dur > 0)) | has_rate
    size = np.zeros(len(dur))
    size[pc.is_valid(found).to_numpy(zero_copy_only=False)] = pc.cast(
        pc.struct_field(found.drop_null(), [0]), pa.float64()
    ).to_numpy()
    rates = np.zeros(len(dur))
    rates[has_rate] = pc.cast(pc.struct_field(recorded.drop_null(), [0]), pa.float64()).to_numpy()
    # Kineto's own figure where it wrote one (from the copy's exact duration), else bytes/ns
    rates = np.where(has_rate, rates, size / np.maximum(dur, 1))
    copies, dur, rates = copies.filter(pa.array(sized)), dur[sized], rates[sized]
    ts = copies["ts"].to_numpy().astype(np.int64)
    ranks = copies["rank"].to_numpy().astype(np.int64)
    kinds = np.array([memory_kind(n) for n in pc.fill_null(copies["name"], "").to_pylist()])
    tables = []
    for rank in sorted(set(ranks.tolist())):
        parts = []
        for kind in sorted(set(kinds[ranks == rank].tolist())):
            mine = (kinds == kind) & (ranks == rank)
            rate = rates[mine]
            times, values = _changes(
                np.concatenate((ts[mine], ts[mine] + dur[mine])), np.concatenate((rate, -rate))
            )
            parts.append((np.full(len(times), kind, object), times, np.round(values, 6) + 0.0))
        tables.append(_table(BANDWIDTH_SCHEMA, rank, parts))
    return pa.concat_tables(tables) if tables else BANDWIDTH_SCHEMA.empty_table()


def _changes(times: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct times and the running sum of `deltas` after all of each time's."""
    order = np.argsort(times, kind="stable")
    times, running = times[order], np.cumsum(deltas[order])
    last = np.append(times[1:] != times[:-1], True)  # each time's last change
    return times[last], running[last]


def _table(schema: pa.Schema, rank: int, parts: list[tuple[np.ndarray, ...]]) -> pa.Table:
    if not parts:
        return schema.empty_table()
    keys, times, values = (np.concatenate(column) for column in zip(*parts, strict=True))
    return pa.table(
        [pa.array(np.full(len(times), rank, np.int64)), pa.array(keys.tolist()),
         pa.array(times), pa.array(values)],
        schema=schema,
    )  # fmt: skip


def run_series(
    store: GraphStore, run: str | None, rank: int | None, which: str, hta_compatible: bool = False
) -> pa.Table:
    """`which` ("queue" or "bandwidth") of every loaded rank of the run, or of `rank`; the
    queue with `hta_compatible` in HTA 0.5.0's reading (whole µs from the trace's start, the
    last ProfilerStep left out)."""
    from .report import ReportError, archived_rank_sources

    source = run_source(store, run)
    loaded = sorted(source.files)
    if rank is not None and rank not in loaded:
        raise ReportError(
            f"{store.path}: run '{source.run}' has no loaded rank {rank} (ranks: {loaded})"
        )
    wanted = loaded if rank is None else [rank]
    if which == "bandwidth":
        copies = store.run(
            "MATCH (k:Kernel) WHERE k.run = $run AND k.cat IN $cats AND k.rank IN $ranks "
            "RETURN k.rank AS rank, k.name AS name, k.ts AS ts, k.dur AS dur, k.args AS args",
            {"run": source.run, "cats": list(MEMORY_CATEGORIES), "ranks": wanted},
        ).table
        return bandwidth_series(copies)
    reading = hta_activity if hta_compatible else exact_activity
    tables = [
        queue_series(reading(frame))
        for frame in archived_rank_sources(store.path, store, source, wanted)
    ]
    return pa.concat_tables(tables) if tables else QUEUE_SCHEMA.empty_table()
