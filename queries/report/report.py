"""`tracegraph report`: HTA's standard analyses of every rank of a run, and the findings.

Read from the run's archive a rank at a time (never the traces), computed by whole-array sweeps
(`analyses`), checked where computed (a share never exceeds its whole), and returned as Arrow
tables. `hta_compatible` reads the rows as HTA 0.5.0 does, to check figures against HTA's own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.archive import read_rank, run_archive
from tracegraph.ingest.edgesets.native.frame import FrameSource
from tracegraph.ingest.edgesets.native.sources import rank_sources
from tracegraph.ingest.edgesets.records import pid_ranks, run_source
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.store import GraphStore

from . import analyses
from .activity import GpuActivity, exact_activity, hta_activity
from .findings import Finding, rank_findings
from .steps import StepWindow, rows_in, step_figures, step_windows

DEFAULT_TOP = 10
HTA_MODE = "hta-0.5.0"


class ReportError(TracegraphError):
    """A report that cannot be made (no such rank, a run without GPU activity asked for)."""


@dataclass(frozen=True)
class Report:
    """The analyses of one run: a table each (one row per rank, or per rank and stream, type
    or kernel), and the findings, most costly first."""

    run: str
    mode: str  # "exact" | HTA_MODE
    ranks: tuple[int, ...]
    temporal: pa.Table
    overlap: pa.Table
    kernel_types: pa.Table
    top_kernels: pa.Table
    idle: pa.Table
    launches: pa.Table
    steps: pa.Table  # per rank and step (exact reading only)
    step: int | None = None  # the one ProfilerStep reported (None: the whole trace)
    findings: tuple[Finding, ...] = field(default=())

    def tables(self) -> dict[str, pa.Table]:
        return {
            "steps": self.steps,
            "temporal": self.temporal,
            "overlap": self.overlap,
            "kernel_types": self.kernel_types,
            "top_kernels": self.top_kernels,
            "idle": self.idle,
            "launches": self.launches,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "mode": self.mode,
            "ranks": list(self.ranks),
            "step": self.step,
            "findings": [f.to_json() for f in self.findings],
            **{name: table.to_pylist() for name, table in self.tables().items()},
        }


def build_report(
    db: Path,
    store: GraphStore,
    run: str | None = None,
    *,
    ranks: Sequence[int] | None = None,
    step: int | None = None,
    hta_compatible: bool = False,
    top: int = DEFAULT_TOP,
) -> Report:
    """The report of `run` (the database's only run when None), of every rank or of `ranks`,
    over the whole trace or the GPU work of ProfilerStep#`step` (see `steps`)."""
    if step is not None and hta_compatible:
        raise ReportError("--step: HTA's analyses cover the whole trace; drop --hta-compatible")
    source = run_source(store, run)
    wanted = sorted(source.files) if ranks is None else sorted(set(ranks))
    unknown = [r for r in wanted if r not in source.files]
    if unknown:
        raise ReportError(
            f"{db}: run '{source.run}' has no rank(s) {unknown} (ranks: {sorted(source.files)})"
        )
    windows = {} if hta_compatible else step_windows(store, source.run)
    if step is not None:
        windows = {r: _the_step(db, source.run, r, windows.get(r, []), step) for r in wanted}
    read = hta_activity if hta_compatible else exact_activity
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in _SCHEMAS}
    found: list[Finding] = []
    for frame_source in _rank_sources(db, store, source, wanted):
        gpu = read(frame_source)
        mine = windows.get(gpu.rank, [])
        if step is not None:
            gpu = gpu.take(rows_in(gpu, mine[0]))
        rows["steps"] += step_figures(gpu, mine)
        _add(rows, gpu, top)
        if not hta_compatible:
            events = frame_source.rows if step is None else _during(frame_source.rows, mine[0])
            figures = (rows["temporal"][-1], rows["overlap"][-1])
            found += rank_findings(gpu, events, figures, len(mine), source.run_idx)
    tables = {name: pa.Table.from_pylist(rows[name], schema=_SCHEMAS[name]) for name in rows}
    report = Report(
        source.run,
        HTA_MODE if hta_compatible else "exact",
        tuple(wanted),
        tables["temporal"],
        tables["overlap"],
        tables["kernel_types"],
        tables["top_kernels"],
        tables["idle"],
        tables["launches"],
        tables["steps"],
        step,
        tuple(sorted(found, key=lambda f: (-f.cost_ns_per_step, f.rank, f.rule))),
    )
    return report


def _during(rows: pa.Table, window: StepWindow) -> pa.Table:
    """The rows that start in the step's window."""
    ts = rows["ts"]
    return rows.filter(pc.and_(pc.greater_equal(ts, window.ts), pc.less(ts, window.end)))


def _the_step(db: Path, run: str, rank: int, windows: list[StepWindow], step: int) -> list:
    for w in windows:
        if w.step == step:
            return [w]
    have = ", ".join(str(w.step) for w in windows) or "none"
    raise ReportError(
        f"{db}: run '{run}' rank {rank} has no ProfilerStep#{step} (its steps: {have})"
    )


def _add(rows: dict[str, list[dict[str, Any]]], gpu: GpuActivity, top: int) -> None:
    rows["temporal"].append(analyses.temporal_breakdown(gpu))
    rows["overlap"].append(analyses.comm_comp_overlap(gpu))
    rows["kernel_types"] += analyses.kernel_type_shares(gpu)
    rows["top_kernels"] += analyses.top_kernels(gpu, top)
    rows["idle"] += analyses.idle_breakdown(gpu)
    rows["launches"].append(analyses.launch_stats(gpu))


def _rank_sources(
    db: Path, store: GraphStore, source: Any, ranks: list[int]
) -> Iterator[FrameSource]:
    """Each rank's archived rows, one rank held at a time (a run ingested before archives:
    re-read from its traces)."""
    folder = run_archive(db, store, source.run_idx)
    if folder is not None:
        for rank in ranks:
            rows = read_rank(folder, rank)
            if rows is None:
                raise ReportError(f"{folder}: the run's archive lacks rank {rank}; re-ingest it")
            yield FrameSource(rank, rows)
        return
    files = {r: source.files[r] for r in ranks}
    counts = {r: source.counts[r] for r in ranks}
    pids = pid_ranks(store, source.run_idx) if len(set(files.values())) < len(files) else {}
    yield from rank_sources(db, files, counts, pids, None)


_I, _F, _S = pa.int64(), pa.float64(), pa.string()
_SCHEMAS = {
    "steps": pa.schema(
        [("rank", _I), ("step", _I), ("step_ns", _I), ("gpu_work", _I), ("kernel_time_ns", _I),
         ("busy_ns", _I), ("idle_ns", _I), ("compute_ns", _I), ("exposed_communication_ns", _I)]
    ),
    "temporal": pa.schema(
        [("rank", _I), ("kernel_time_ns", _I), ("idle_ns", _I), ("compute_ns", _I),
         ("non_compute_ns", _I), ("idle_pct", _F), ("compute_pct", _F), ("non_compute_pct", _F),
         ("idle_host_wait_ns", _I), ("idle_kernel_wait_ns", _I), ("idle_other_ns", _I)]
    ),
    "overlap": pa.schema(
        [("rank", _I), ("communication_ns", _I), ("overlapped_ns", _I), ("overlap_pct", _F)]
    ),
    "kernel_types": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("total_ns", _I), ("pct", _F)]
    ),
    "top_kernels": pa.schema(
        [("rank", _I), ("kernel_type", _S), ("name", _S), ("names", _I), ("count", _I),
         ("total_ns", _I), ("mean_ns", _F), ("min_ns", _I), ("max_ns", _I), ("std_ns", _F)]
    ),
    "idle": pa.schema(
        [("rank", _I), ("stream", _I), ("idle_category", _S), ("idle_ns", _I), ("ratio", _F)]
    ),
    "launches": pa.schema(
        [("rank", _I), ("launches", _I)]
        + [(f"{p}_{s}_ns", _F) for p in ("call", "delay") for s in ("mean", "p50", "p95", "max")]
    ),
}  # fmt: skip
