"""What the explorer's overview shows: step times per rank, stragglers per step, GPU busy share.

Steps are the `ProfilerStep#N` annotations of each rank. A run without them is one step per rank
covering its whole trace (step -1, "whole trace"). GPU busy time is the union of the rank's GPU
activity intervals inside the step window, so overlapping streams (compute + NCCL) count once.

Finding the annotations scans every Op name and GPU busy time reads every kernel: on millions of
events that takes seconds. Where the database has a `Step` node table (STEP_TABLE_COLUMNS, one
row per rank and step, written at ingest) both come from it instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest import schema
from tracegraph.ingest.steps import STEP_PREFIX, WHOLE_TRACE, busy_in_windows
from tracegraph.ingest.store import GraphStore

from .crossrank import StepVerdict, step_verdicts
from .runs import EVENT_LABELS, RunRef, id_filter

STEP_SCHEMA = pa.schema(
    [
        ("rank", pa.int64()),
        ("step", pa.int64()),
        ("name", pa.string()),
        ("id", pa.int64()),
        ("ts", pa.int64()),
        ("dur", pa.int64()),
    ]
)


# The summary table these functions read when it exists (see the module docstring).
STEP_TABLE = "Step"
STEP_TABLE_COLUMNS = tuple(
    (c.name, "INT64" if c.type == pa.int64() else "STRING") for c in schema.STEP.columns
)  # written at ingest (ingest/steps.py)


def has_table(store: GraphStore, name: str) -> bool:
    tables = store.run("CALL show_tables() RETURN name").table["name"].to_pylist()
    return name in tables


@dataclass(frozen=True)
class RunOverview:
    """Step times of one run and how they spread across ranks."""

    run: RunRef
    step_times: pa.Table  # rank, step, name, id, ts, dur (one row per rank and step)
    steps: pa.Table  # step, name, ranks, min_ns, median_ns, max_ns, spread, slowest_rank, ...
    # per step name: what bound it across ranks, from the `native` edge set (when built)
    verdicts: dict[str, StepVerdict] = field(default_factory=dict)

    def start_offsets(self) -> dict[tuple[int, int], int]:
        """(rank, step) → how much later than the earliest rank the step started (ns)."""
        return start_offsets(self.step_times)


def step_times(store: GraphStore, run: RunRef) -> pa.Table:
    """One row per rank and step: the ProfilerStep annotation (or the whole trace of the rank)."""
    if has_table(store, STEP_TABLE):
        return _summary(store, run).select(STEP_SCHEMA.names).cast(STEP_SCHEMA)
    table = store.run(
        f"MATCH (s:Op) WHERE {id_filter('s', run.run_idx)} AND s.name STARTS WITH '{STEP_PREFIX}' "
        "RETURN s.rank AS rank, s.name AS name, s.id AS id, s.ts AS ts, s.dur AS dur"
    ).table
    if table.num_rows == 0:
        return whole_trace_steps(store, run)
    numbers = [_step_number(n) for n in table["name"].to_pylist()]
    table = table.append_column("step", pa.array(numbers, pa.int64()))
    table = table.filter(pc.is_valid(table["step"]))
    return (
        table.select(STEP_SCHEMA.names)
        .cast(STEP_SCHEMA)
        .sort_by([("step", "ascending"), ("rank", "ascending")])
    )


def whole_trace_steps(store: GraphStore, run: RunRef) -> pa.Table:
    """One pseudo-step per rank spanning all of its events."""
    spans = store.run(
        f"MATCH (e:{EVENT_LABELS}) WHERE {id_filter('e', run.run_idx)} "
        "RETURN e.rank AS rank, min(e.ts) AS ts, max(e.ts + e.dur) AS end_ts ORDER BY rank"
    ).table
    n = spans.num_rows
    return pa.table(
        {
            "rank": spans["rank"],
            "step": pa.array([WHOLE_TRACE] * n, pa.int64()),
            "name": pa.array(["whole trace"] * n, pa.string()),
            "id": pa.nulls(n, pa.int64()),
            "ts": spans["ts"],
            "dur": pc.subtract(spans["end_ts"], spans["ts"]),
        },
        schema=STEP_SCHEMA,
    )


def _step_number(name: str) -> int | None:
    tail = name[len(STEP_PREFIX) :]
    return int(tail) if tail.isdigit() else None


def step_spread(times: pa.Table) -> pa.Table:
    """Per step: min, median and max over ranks, the relative spread and the slowest rank."""
    rows = []
    steps = times["step"].to_numpy()
    ranks, durs = times["rank"].to_numpy(), times["dur"].to_numpy()
    names = times["name"].to_pylist()
    for step in np.unique(steps):
        at = np.flatnonzero(steps == step)
        d = durs[at]
        median = float(np.median(d))
        rows.append(
            {
                "step": int(step),
                "name": names[at[0]],
                "ranks": len(at),
                "min_ns": int(d.min()),
                "median_ns": int(median),
                "max_ns": int(d.max()),
                "spread": float((d.max() - d.min()) / median) if median else 0.0,
                "slowest_rank": int(ranks[at[int(np.argmax(d))]]),
                "fastest_rank": int(ranks[at[int(np.argmin(d))]]),
                "histogram": histogram(d),
            }
        )
    return pa.Table.from_pylist(rows, schema=SPREAD_SCHEMA)


SPREAD_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("name", pa.string()),
        ("ranks", pa.int64()),
        ("min_ns", pa.int64()),
        ("median_ns", pa.int64()),
        ("max_ns", pa.int64()),
        ("spread", pa.float64()),
        ("slowest_rank", pa.int64()),
        ("fastest_rank", pa.int64()),
        ("histogram", pa.list_(pa.int64())),
    ]
)


def histogram(values: np.ndarray, bins: int = 8) -> list[int]:
    """Counts of `values` in `bins` equal-width bins between their min and max."""
    if len(values) == 0:
        return [0] * bins
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return [len(values)] + [0] * (bins - 1)
    counts, _ = np.histogram(values, bins=bins, range=(lo, hi))
    return [int(c) for c in counts]


def start_offsets(times: pa.Table) -> dict[tuple[int, int], int]:
    """(rank, step) → its start minus the earliest rank's start of that step (ns)."""
    rows = times.to_pylist()
    first: dict[int, int] = {}
    for r in rows:
        first[r["step"]] = min(first.get(r["step"], r["ts"]), r["ts"])
    return {(r["rank"], r["step"]): r["ts"] - first[r["step"]] for r in rows}


def run_overview(store: GraphStore, run: RunRef) -> RunOverview:
    times = step_times(store, run)
    verdicts = {v.step: v for v in step_verdicts(store, run.name)}
    return RunOverview(run, times, step_spread(times), verdicts)


def _summary(store: GraphStore, run: RunRef) -> pa.Table:
    names = ", ".join(f"s.{c} AS {c}" for c, _ in STEP_TABLE_COLUMNS)
    return store.run(
        f"MATCH (s:{STEP_TABLE}) WHERE s.run = $run RETURN {names} ORDER BY step, rank",
        {"run": run.name},
    ).table


def gpu_busy(store: GraphStore, run: RunRef, times: pa.Table) -> pa.Table:
    """Per rank and step: GPU busy time (union of activity intervals in the window) and share."""
    if has_table(store, STEP_TABLE):
        summary = _summary(store, run)
        durs = summary["dur"].to_numpy()
        busy = summary["gpu_busy_ns"].to_numpy()
        share = np.divide(busy, durs, out=np.zeros(len(durs)), where=durs > 0)
        return pa.table(
            {
                "rank": summary["rank"],
                "step": summary["step"],
                "busy_ns": summary["gpu_busy_ns"],
                "share": pa.array(share, pa.float64()),
            }
        )
    kernels = store.run(
        f"MATCH (k:Kernel) WHERE {id_filter('k', run.run_idx)} "
        "RETURN k.rank AS rank, k.ts AS ts, k.dur AS dur"
    ).table
    return busy_in_windows(kernels, times).drop_columns(["kernels"])
