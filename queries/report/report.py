"""`tracegraph report`: HTA's standard analyses of every rank of a run, and the findings.

Read from the run's archive a rank at a time (never the traces), computed by whole-array sweeps
(`analyses`, `collectives`), checked where computed (a share never exceeds its whole), and
returned as Arrow tables. `hta_compatible` reads the rows as HTA 0.5.0 does, to check figures
against HTA's own (no findings, no collectives: HTA has neither). A rank's share is
`rank_facts`; a summary rank's (`ingest --summary`) was computed by the same function at ingest
and is read back from the archive (`summary_tier`), and a report with summary ranks tells its
story from the collective arrivals, not the path.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracegraph.ingest import schema
from tracegraph.ingest.archive import read_rank, run_archive
from tracegraph.ingest.edgesets.native.crossrank import CrossRankPath
from tracegraph.ingest.edgesets.native.edge_set import build_each_step
from tracegraph.ingest.edgesets.native.frame import FrameSource
from tracegraph.ingest.edgesets.native.options import NativeOptions
from tracegraph.ingest.edgesets.native.rank_build import RankBuild, build_rank
from tracegraph.ingest.edgesets.native.segments import heaviest_on, step_segments
from tracegraph.ingest.edgesets.native.sources import file_events, rank_sources
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.edgesets.records import RunSource, pid_ranks, rank_hosts, run_source
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.store import GraphStore

from . import collectives
from .allocations import factory_calls
from .allocator import stored_events
from .contract import report_json
from .counters import counter_rows, has_counters
from .dtypes import dtype_casts
from .findings import Finding
from .gpu_specs import SPECS, spec_for
from .memory import memory_rows
from .nodes import node_rows
from .op_args import StoreOpArgs
from .op_perf import op_perf_rows, rank_gpus
from .rank_facts import FindingInputs, rank_facts
from .ranks import ranks_phrase
from .savings import (
    arrival_waits,
    folded,
    path_waits,
    ranked,
    step_graphs,
    straggler_findings,
    transfer_only,
    with_savings,
)
from .spread import spread_rows, step_medians
from .steps import StepWindow, step_windows
from .summary_tier import summary_rows
from .tables import TABLES
from .unmatched import unmatched as collective_divergence

DEFAULT_TOP = 10
HTA_MODE = "hta-compatible"


FINDINGS_TABLE = pa.schema(
    [("kind", pa.string()), ("rank", pa.int64()), ("ranks", pa.list_(pa.int64())),
     ("step", pa.int64()), ("cost_us", pa.float64()), ("saving_us", pa.float64()),
     ("events", pa.int64()), ("summary", pa.string()), ("fix", pa.string()),
     ("evidence_ids", pa.list_(pa.int64())), ("evidence_cypher", pa.string())]
)  # fmt: skip


class ReportError(TracegraphError):
    """A report that cannot be made (no such rank or step, a step with --hta-compatible)."""


@dataclass(frozen=True)
class Report:
    """The analyses of one run, a table each (see `TABLES`), and the findings, most costly
    first; `bound_by` per step: the rank and op that bound it, its path's length and top-level
    segments (the native path, across ranks where the step joins them)."""

    run: str
    mode: str  # "exact" | HTA_MODE
    ranks: tuple[int, ...]
    step: int | None  # the one ProfilerStep reported (None: every step)
    tables: Mapping[str, pa.Table]
    findings: tuple[Finding, ...]
    bound_by: Mapping[int, dict[str, object]]
    # the ranks of the summary tier (no events: figures and findings as their ingest kept
    # them, stragglers from the arrivals; no critical path or savings): see `summary_tier`
    summarised: tuple[int, ...] = ()
    # (step, rank) → the rank's lateness at the step's collectives (`collectives`; the spread's
    # `late` metric, per rank)
    lateness: Mapping[tuple[int, int], int] = field(default_factory=dict)

    def __getattr__(self, name: str) -> pa.Table:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    def to_json(self) -> dict[str, Any]:
        """The report's JSON (its contract is in docs/report.md)."""
        return report_json(self)

    def findings_table(self) -> pa.Table:
        """The findings as Arrow, most costly first, with the JSON contract's names and units
        (kind, rank, ranks, step, cost_us, saving_us, events, evidence_ids, evidence_cypher,
        summary, fix): what a notebook filters and sorts (`.to_pandas()`)."""
        rows = []
        for finding in self.findings:
            row = finding.to_json()
            evidence = row.pop("evidence")
            rows.append(
                row | {"evidence_ids": evidence["ids"], "evidence_cypher": evidence["cypher"]}
            )
        return pa.Table.from_pylist(rows, schema=FINDINGS_TABLE)


def build_report(
    db: Path,
    store: GraphStore,
    run: str | None = None,
    *,
    ranks: Sequence[int] | None = None,
    step: int | None = None,
    hta_compatible: bool = False,
    top: int = DEFAULT_TOP,
    gpu: str | None = None,
    sequence_op: str | None = None,
) -> Report:
    """The report of `run` (the database's only run when None), of every rank or of `ranks`,
    over every step or the GPU work of ProfilerStep#`step` (see `steps`); `gpu` names every
    rank's GPU for the roofline (else each trace's own device name); `sequence_op` the calls whose
    kernel sequences `kernel_sequences` counts (names holding it; else the CPU ops Python
    called)."""
    if step is not None and hta_compatible:
        raise ReportError("--step: HTA's analyses cover the whole trace; drop --hta-compatible")
    if gpu is not None and spec_for(gpu) is None:
        known = ", ".join(SPECS)
        raise ReportError(f"--gpu {gpu}: not a GPU tracegraph knows (one of: {known})")
    source = run_source(store, run)
    every_rank = sorted({*source.files, *source.summarised})
    wanted = every_rank if ranks is None else sorted(set(ranks))
    unknown = [r for r in wanted if r not in every_rank]
    if unknown:
        raise ReportError(
            f"{db}: run '{source.run}' has no rank(s) {unknown} (ranks: {every_rank})"
        )
    summarised = sorted(set(source.summarised) & set(wanted))
    if summarised and (hta_compatible or step is not None):
        flag = "--hta-compatible" if hta_compatible else f"--step {step}"
        raise ReportError(
            f"{db}: {flag} needs every rank's events, and run '{source.run}' has only a "
            f"summary of {ranks_phrase(summarised)}: report without it, or ingest the run "
            "without --summary"
        )
    every_step = {} if hta_compatible else step_windows(store, source.run)
    windows = every_step
    if step is not None:
        windows = {r: _the_step(db, source.run, r, every_step.get(r, []), step) for r in wanted}
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in TABLES}
    found: list[Finding] = []
    if not hta_compatible:
        ops = StoreOpArgs(store, source.run)
        casts = dtype_casts(ops, wanted)
        factories = factory_calls(ops, wanted)
    # every rank's graphs, built from the rows read here (else `build_each_step` reads them
    # again), where the report is of every rank: the cross-rank paths need them all
    builds: list[RankBuild] | None = (
        [] if not hta_compatible and wanted == sorted(source.files) and not summarised else None
    )
    loaded = [r for r in wanted if r not in summarised]
    reread: dict[int, pa.Table] = {}  # ranks' events re-read for their counters (a file once)
    for frame_source in archived_rank_sources(db, store, source, loaded):
        if builds is not None:
            builds.append(build_rank(frame_source, NativeOptions(), Window(), all_steps=True))
        rank = frame_source.rank
        inputs = None
        if not hta_compatible:
            memory = stored_events(store, source.run_idx, rank)
            inputs = FindingInputs(
                source.run_idx, ops, casts[rank], factories[rank], memory,
                sequence_op=sequence_op,
            )  # fmt: skip
        facts = rank_facts(frame_source, windows.get(rank, []), step, top, inputs)
        for name, more in facts.rows.items():
            rows[name] += more
        if has_counters(frame_source.rows):  # CUPTI's range profiler: its counters are args
            rows["counters"] += _counter_rows(db, store, source, rank, reread)
        found += facts.findings
    if summarised:
        kept = run_archive(db, store, source.run_idx)
        if kept is None:
            raise ReportError(f"{db}: run '{source.run}' has lost its archive; re-ingest it")
        more_rows, more_found = summary_rows(kept, summarised)
        for name, more in more_rows.items():
            rows[name] = sorted(rows[name] + more, key=lambda row: row["rank"])  # stable
        found += more_found
    bound_by: dict[int, dict[str, object]] = {}
    lateness: dict[tuple[int, int], int] = {}
    diverged: list[Finding] = []
    unmatched_waits: dict[int, int] = {}
    diverged_keys: frozenset[tuple[str, str, int]] = frozenset()
    unjoined: dict[int, int] = {}
    leave_out: Callable[[list[Finding]], list[Finding]] = list
    if not hta_compatible:
        hosts = rank_hosts(store, source.run)
        arrivals = collectives.participants(store, source.run)
        numbers = {w.step for ws in every_step.values() for w in ws}
        unmatched = collective_divergence(arrivals, every_step, len(numbers), source.run_idx, hosts)
        rows["unmatched"], diverged = unmatched.rows, unmatched.findings
        unmatched_waits, leave_out = unmatched.waited, unmatched.off_communication
        diverged_keys, unjoined = unmatched.diverged, unmatched.unjoined
        instances, per_rank, arrival_stragglers, lateness = collectives.collective_rows(
            arrivals, every_step, step, hosts, unmatched.hung, unmatched.ahead
        )
        rows["op_perf"] = op_perf_rows(rows["op_shapes"], rank_gpus(store, source.run), gpu)
        rows["memory"] = memory_rows(store, source.run, loaded) + rows["memory"]
        rows["memory"].sort(key=lambda row: row["rank"])  # stable: by kind within a rank
        rows["collectives"], rows["collective_ranks"] = instances, per_rank
        computed = {(r["step"], r["rank"]): r["compute_ns"] for r in rows["steps"]}
        medians = step_medians(rows["steps"])
        rows["spread"] = spread_rows("compute", computed, medians) + spread_rows(
            "late", lateness, medians
        )
        rows["nodes"] = node_rows(hosts, wanted, rows["spread"], lateness, computed)
    if summarised:
        # no events, no path: who was late is told by the arrivals alone, and no finding's
        # saving can be worked out
        rows["stragglers"] = arrival_stragglers
        # the waits of collectives that crossed steps or never completed are the divergence's
        # (`unmatched_waits`), not a late rank's: counted once
        matched = [
            c for c in rows["collectives"]
            if (c["collective"], c["process_group"], c["seq"]) not in diverged_keys
        ]  # fmt: skip
        found = folded(transfer_only(found, arrival_waits(matched), unmatched_waits))
    elif not hta_compatible:
        # the story (what bound each step, who was late, what fixing each finding saves) is
        # the native path's, built here in memory: the same computation `path` and `edges
        # --native` show
        built = build_each_step(db, run=source.run, depth=1, store=store, builds=builds)
        steps = step_graphs(built, step)
        paths = [p for p in built.paths if step is None or p.step == f"ProfilerStep#{step}"]
        rows["stragglers"] = _straggler_rows(paths, source.run_idx)
        bound_by = _bound_by(paths, steps)
        # folded first: a saving is a what-if over the whole step graph, so at many ranks one
        # per folded line, not one per rank
        waits = path_waits(paths)
        for r, w in unjoined.items():  # waits the paths cannot join (another step's)
            waits[r] = waits.get(r, 0) + w
        found = folded(transfer_only(found, waits, unmatched_waits))
        found = with_savings(leave_out(found), steps)
        found += straggler_findings(paths, steps, source.run_idx)
    found += diverged  # no saving modelled (the job hangs): ranked first all the same
    tables = {name: pa.Table.from_pylist(rows[name], schema=TABLES[name]) for name in TABLES}
    return Report(
        source.run,
        HTA_MODE if hta_compatible else "exact",
        tuple(wanted),
        step,
        tables,
        tuple(ranked(found)),
        bound_by,
        tuple(summarised),
        lateness if not hta_compatible else {},
    )


def _straggler_rows(paths: list[CrossRankPath], run_idx: int) -> list[dict[str, Any]]:
    """Per step, the straggler of the cross-rank verdict."""
    out = []
    for p in paths:
        st, number = p.straggler, p.step.removeprefix("ProfilerStep#")
        if st is None or not number.isdigit():
            continue
        out.append(
            {
                "step": int(number),
                "rank": st.rank,
                "wait_caused_ns": st.caused_wait_ns,
                "late_ns": st.lateness_ns,
                "collective": st.at,
                "event": schema.event_key(run_idx, st.rank, st.ev_idx),
            }
        )
    return out


def _bound_by(paths: list[CrossRankPath], steps: list[Any]) -> dict[int, dict[str, object]]:
    """Per step, the rank and op that bound it: across ranks where the step joins them, else
    the rank's own path's heaviest segment (one rank: that rank)."""
    out: dict[int, dict[str, object]] = {}
    for p in paths:
        number = p.step.removeprefix("ProfilerStep#")
        if number.isdigit():
            out[int(number)] = {
                "rank": p.bound_by_rank,
                "op": p.bound_by_op,
                "length_ns": p.length_ns,
                "segments": [seg.to_json(1) for seg in p.segments],
            }
    for s in steps:
        if s.number is None or s.number in out or len(s.index) != 1:
            continue
        (rank,) = s.index
        path = s.graph.longest()
        segments = step_segments(s.graph, path.edges, 1)
        out[s.number] = {
            "rank": rank,
            "op": heaviest_on(segments, rank),
            "length_ns": int(path.length),
            "segments": [seg.to_json(1) for seg in segments],
        }
    return out


def _the_step(
    db: Path, run: str, rank: int, windows: list[StepWindow], step: int
) -> list[StepWindow]:
    for w in windows:
        if w.step == step:
            return [w]
    have = ", ".join(str(w.step) for w in windows) or "none"
    raise ReportError(
        f"{db}: run '{run}' rank {rank} has no ProfilerStep#{step} (its steps: {have})"
    )


def _counter_rows(
    db: Path, store: GraphStore, source: RunSource, rank: int, reread: dict[int, pa.Table]
) -> list[dict[str, Any]]:
    """The rank's `counters` rows, its trace re-read (the archive's rows keep no args; a merged
    file read once for all its ranks, kept in `reread`); none, with a warning, where the trace
    cannot be read again: the rest of the report does not need it."""
    if rank not in reread:
        files = source.files
        pids = pid_ranks(store, source.run_idx) if len(set(files.values())) < len(files) else {}
        kept = run_archive(db, store, source.run_idx)
        try:
            reread.update(file_events(kept, files, source.counts, pids, rank))
        except TracegraphError as exc:
            warnings.warn(f"rank {rank}'s CUPTI counters left out: {exc}", stacklevel=2)
            return []
    return counter_rows(rank, reread.pop(rank))


def archived_rank_sources(
    db: Path, store: GraphStore, source: RunSource, ranks: list[int]
) -> Iterator[FrameSource]:
    """Each rank's archived rows, one rank held at a time (a run ingested before archives:
    re-read from its traces)."""
    kept = run_archive(db, store, source.run_idx)
    if kept is not None:
        for rank in ranks:
            rows = read_rank(kept, rank)
            if rows is None:
                raise ReportError(
                    f"{kept.folder}: the run's archive lacks rank {rank}; re-ingest it"
                )
            yield FrameSource(rank, rows)
        return
    files = {r: source.files[r] for r in ranks}
    counts = {r: source.counts[r] for r in ranks}
    pids = pid_ranks(store, source.run_idx) if len(set(files.values())) < len(files) else {}
    yield from rank_sources(db, files, counts, pids, None)
