"""One rank's share of the report: its rows of the per-rank tables and its findings, from its
archived rows (`FrameSource`) and step windows. `build_report` calls it for each rank it reads;
a summary ingest's worker calls it on the rank it has just parsed (`summarise`), so a summary
rank's figures are the full report's by construction."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.edgesets.native.frame import FrameSource
from tracegraph.ingest.memory_events import memory_rows

from . import analyses
from .activity import exact_activity, hta_activity
from .allocations import Allocation, factory_calls, large_allocations
from .allocator import allocator_rows, churn_note
from .annotations import gpu_annotations
from .cpu import CpuEvents
from .cpu_findings import RankEvents, cpu_findings
from .dtypes import dtype_casts
from .findings import Finding, Ids, rank_findings
from .kernel_sequences import sequence_rows
from .launchers import launched_kernels, launcher_rows
from .modules import module_rows
from .op_args import EventOpArgs, OpArgs
from .steps import StepWindow, rows_in, step_figures, windows_of

# the per-rank tables, each a list of rows (`report.TABLES` has their schemas)
RANK_TABLES = (
    "steps", "temporal", "overlap", "kernel_types", "top_kernels", "idle", "launches", "queues",
    "gpu_annotations", "allocator", "op_categories", "op_shapes", "module_tree",
    "kernel_sequences",
)  # fmt: skip
# the tables by operator and module, which a summary rank has not (`ingest --full-ranks`)
OPERATOR_TABLES = ("op_categories", "op_shapes", "module_tree", "kernel_sequences")


@dataclass
class RankFacts:
    rows: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {name: [] for name in RANK_TABLES}
    )
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class FindingInputs:
    """What the CPU rules read beyond the rank's rows: its dtype-changing casts (ev_idx), its
    large factory calls, where to read ops' recorded arguments, and its allocator's events."""

    run_idx: int
    ops: OpArgs
    casts: Any  # np.ndarray of ev_idx
    factories: list[Allocation]
    memory: pa.Table | None = None  # its MemoryEvent rows (`[memory]` instants), if any
    # the per-operator tables (OPERATOR_TABLES); a summary worker leaves them to --full-ranks
    operators: bool = True
    sequence_op: str | None = None  # the calls whose kernel sequences count (None: CPU ops')


def rank_facts(
    source: FrameSource,
    windows: list[StepWindow],
    step: int | None,
    top: int,
    inputs: FindingInputs | None,
) -> RankFacts:
    """The rank's rows of every per-rank table; with `inputs`, its findings too (else, HTA's
    reading of the rows: `hta_activity`, and no findings). With `step`, `windows` is that
    step's one window and the figures are of its work."""
    facts = RankFacts()
    rows = facts.rows
    gpu = whole = (exact_activity if inputs is not None else hta_activity)(source)
    if step is not None:  # the step's work; `whole` still says when the GPU was busy
        gpu = whole.take(rows_in(whole, windows[0]))
    rows["steps"] += step_figures(gpu, windows)
    rows["temporal"].append(analyses.temporal_breakdown(gpu))
    rows["overlap"].append(analyses.comm_comp_overlap(gpu))
    rows["kernel_types"] += analyses.kernel_type_shares(gpu)
    rows["top_kernels"] += analyses.top_kernels(gpu, top)
    rows["idle"] += analyses.idle_breakdown(gpu)
    rows["launches"].append(analyses.launch_stats(gpu))
    window = windows[0] if step is not None else None
    rows["gpu_annotations"] += gpu_annotations(source, inputs is None, window)
    if inputs is None:
        return facts
    rows["queues"] += analyses.queue_lengths(gpu)
    if inputs.memory is not None:
        rows["allocator"] += allocator_rows(gpu.rank, inputs.memory, windows, source.rows)
    if inputs.operators:
        kernels = launched_kernels(source.rows)
        categories, shapes = launcher_rows(gpu.rank, source.rows, window, inputs.ops, top, kernels)
        rows["op_categories"] += categories
        rows["op_shapes"] += shapes
        rows["module_tree"] += module_rows(gpu.rank, source.rows, window, kernels)
        rows["kernel_sequences"] += sequence_rows(
            gpu.rank, source.rows, window, top, inputs.sequence_op, kernels=kernels
        )
    events = source.rows if step is None else _during(source.rows, windows[0])
    figures = (rows["temporal"][-1], rows["overlap"][-1])
    ids = Ids(inputs.run_idx, gpu.rank)
    cpu = CpuEvents.of(events)
    facts.findings += rank_findings(gpu, whole, cpu, figures, len(windows), inputs.run_idx)
    made = large_allocations(inputs.ops, gpu.rank, cpu, inputs.factories)
    rank_events = RankEvents(gpu.rank, cpu, whole, windows, ids, inputs.casts, made)
    note = churn_note(rows["allocator"])
    facts.findings += [
        replace(f, detail=f"{f.detail}; {note}") if f.kind == "memory_churn" and note else f
        for f in cpu_findings(rank_events)
    ]
    return facts


def _during(rows: pa.Table, window: StepWindow) -> pa.Table:
    """The rows that start in the step's window."""
    ts = rows["ts"]
    return rows.filter(pc.and_(pc.greater_equal(ts, window.ts), pc.less(ts, window.end)))


def summarise(
    rank: int, rows: pa.Table, events: pa.Table, steps: pa.Table, run_idx: int, top: int
) -> RankFacts:
    """A summary worker's facts of one rank, over every step: from its archive rows, keyed
    events (for ops' recorded arguments) and Step rows."""
    ops = EventOpArgs(events)
    inputs = FindingInputs(
        run_idx,
        ops,
        dtype_casts(ops, [rank])[rank],
        factory_calls(ops, [rank])[rank],
        memory_rows(events),
        operators=False,  # ~4 ms a rank of 25: a fleet's summary does without them
    )
    return rank_facts(FrameSource(rank, rows), windows_of(steps).get(rank, []), None, top, inputs)
