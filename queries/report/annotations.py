"""GPU time by user annotation: the `gpu_user_annotation` ranges Kineto writes on the GPU's
timeline for each `record_function` range whose work ran there, per rank and name: how many,
their total, mean, min, max and standard deviation (sample, 0 for one), as HTA's
`get_gpu_user_annotation_breakdown` gives them.

Exact: every such range, ns as recorded; with `--step`, those starting in the step's window.
HTA-compatible: the rows of HTA's frame (its µs, the last ProfilerStep dropped: `rank_frame`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.edgesets.native.frame import FrameSource, rank_frame

from .analyses import Row
from .steps import StepWindow

CATEGORY = "gpu_user_annotation"


def gpu_annotations(source: FrameSource, hta: bool, window: StepWindow | None = None) -> list[Row]:
    """One row per annotation name of the rank, most total time first."""
    if hta:
        frame = rank_frame(source, hta_times=True, hta_quirks=True)
        mine = frame.cat_in((CATEGORY,))
        names = [frame.name.at(int(r)) for r in np.nonzero(mine)[0]]
        durations = frame.dur[mine].astype(np.int64) * frame.unit_ns
        return _rows(source.rank, names, durations)
    rows = source.rows
    mine = pc.equal(pc.fill_null(rows["cat"], ""), CATEGORY)
    if window is not None:
        ts = rows["ts"]
        mine = pc.and_(mine, pc.and_(pc.greater_equal(ts, window.ts), pc.less(ts, window.end)))
    picked = rows.select(["name", "dur"]).filter(mine)
    names = pc.fill_null(picked["name"], "").to_pylist()
    durations = ints(picked["dur"], 0)
    return _rows(source.rank, names, durations)


def _rows(rank: int, names: list[str], durations: np.ndarray) -> list[Row]:
    if not names:
        return []
    values, group = np.unique(np.array(names, object), return_inverse=True)
    order = np.argsort(group.reshape(-1), kind="stable")
    bounds = np.searchsorted(group.reshape(-1)[order], np.arange(len(values) + 1))
    out = []
    for i, name in enumerate(values.tolist()):
        dur = durations[order[bounds[i] : bounds[i + 1]]]
        out.append(
            {
                "rank": rank,
                "name": name,
                "count": len(dur),
                "total_ns": int(dur.sum()),
                "mean_ns": float(dur.mean()),
                "min_ns": int(dur.min()),
                "max_ns": int(dur.max()),
                "std_ns": float(dur.std(ddof=1)) if len(dur) > 1 else 0.0,
            }
        )
    out.sort(key=lambda r: (-r["total_ns"], r["name"]))
    return out


SCHEMA = pa.schema(
    [("rank", pa.int64()), ("name", pa.string()), ("count", pa.int64()),
     ("total_ns", pa.int64()), ("mean_ns", pa.float64()), ("min_ns", pa.int64()),
     ("max_ns", pa.int64()), ("std_ns", pa.float64())]
)  # fmt: skip
