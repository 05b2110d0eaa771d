"""The report per ProfilerStep: which GPU work belongs to a step, and each step's figures.

GPU work belongs to the step whose window holds its anchor, the start of the call that launched
it (else its own start): the GPU runs behind the CPU, so a kernel launched late in step N that
runs while the CPU is in step N + 1 is step N's work. Step N's window runs from its annotation's
start to the next step's start (the last step's: to its annotation's end), so launches between
two annotations count to the earlier step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.intervals import overlap_length, union_length
from tracegraph.ingest.store import GraphStore

from .activity import COMMUNICATION, COMPUTATION, GpuActivity
from .analyses import Row


@dataclass(frozen=True)
class StepWindow:
    """One rank's ProfilerStep#`step`: its annotation's span and the window its work is in."""

    rank: int
    step: int
    name: str
    ts: int
    dur: int
    end: int  # the window's end: the next step's start, or the annotation's end


def step_windows(store: GraphStore, run: str) -> dict[int, list[StepWindow]]:
    """Each rank's steps in order (ranks without ProfilerStep annotations have none)."""
    table = store.run(
        "MATCH (s:Step) WHERE s.run = $run AND s.step >= 0 "
        "RETURN s.rank AS rank, s.step AS step, s.name AS name, s.ts AS ts, s.dur AS dur "
        "ORDER BY rank, ts",
        {"run": run},
    ).table
    return windows_of(table)


def windows_of(steps: pa.Table) -> dict[int, list[StepWindow]]:
    """Each rank's steps in order, from Step rows (rank, step, name, ts, dur; step -1, a rank's
    whole trace, is no step)."""
    steps = steps.filter(pc.greater_equal(steps["step"], 0))
    order = pc.sort_indices(steps, sort_keys=[("rank", "ascending"), ("ts", "ascending")])
    table = steps.select(["rank", "step", "name", "ts", "dur"]).take(order).to_pylist()
    out: dict[int, list[StepWindow]] = {}
    for i, row in enumerate(table):
        following = table[i + 1] if i + 1 < len(table) else None
        last = following is None or following["rank"] != row["rank"]
        end = row["ts"] + row["dur"] if last else following["ts"]  # type: ignore[index]
        out.setdefault(row["rank"], []).append(
            StepWindow(row["rank"], row["step"], row["name"], row["ts"], row["dur"], end)
        )
    return out


def rows_in(gpu: GpuActivity, window: StepWindow) -> np.ndarray:
    """Positions of the GPU rows that are the step's work."""
    anchor = gpu.anchor()
    return np.nonzero((anchor >= window.ts) & (anchor < window.end))[0]


def step_figures(gpu: GpuActivity, windows: list[StepWindow]) -> list[Row]:
    """Per step: its CPU duration, and its GPU work's span, busy, idle, compute and exposed
    communication time (a straggler's steps stand out in this table, not on the timeline)."""
    rows: list[Row] = []
    for w in windows:
        sel = rows_in(gpu, w)
        ts, end, kind = gpu.ts[sel], gpu.end[sel], gpu.kernel_type[sel]
        span = int(end.max() - ts.min()) if len(sel) else 0
        busy = union_length(ts, end)
        comp, comm = kind == COMPUTATION, kind == COMMUNICATION
        communication = union_length(ts[comm], end[comm])
        overlapped = overlap_length((ts[comm], end[comm]), (ts[comp], end[comp]))
        rows.append(
            {
                "rank": gpu.rank,
                "step": w.step,
                "step_ns": w.dur,
                "gpu_work": len(sel),
                "kernel_time_ns": span,
                "busy_ns": int(busy),
                "idle_ns": span - int(busy),
                "compute_ns": int(union_length(ts[comp], end[comp])),
                "exposed_communication_ns": int(communication - overlapped),
            }
        )
    return rows
