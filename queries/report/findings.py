"""Findings: rules over one rank's figures and archived events that name a known fault, what it
costs per step, the events that show it (and the Cypher that lists them), and which way the fix
lies. Each rule's threshold is documented with it; a rank is named only where a rule fires.
Computed from the same arrays as the report (no query per rank), so a report on many ranks
costs what reading their archives costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracegraph.ingest import schema
from tracegraph.ingest.intervals import Intervals, covered_between, exclusive_shares, merged

from .activity import COMMUNICATION, COMPUTATION, NO_LAUNCH, GpuActivity
from .analyses import Row
from .cpu import CpuEvents

HOST_WAIT_SHARE = 0.10  # GPU idle waiting for launches, as a share of the GPU span
EXPOSED_COMM_SHARE = 0.10  # communication not under compute, as a share of the GPU span
EVIDENCE_ROWS = 5
# ops that read a GPU value on the CPU, and the runtime calls that then block (CUDA and HIP):
# the rule fires where there is at least one such blocking call per step (the fault catalog's
# "sync in the hot loop") and the GPU idle time after them (the queue drained: from each call's
# end to the GPU's next start, less data loading in it) is at least SYNC_DRAIN_SHARE of the GPU
# span; that is its cost
SYNC_DRAIN_SHARE = 0.02
SYNC_FORCING_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero",
                    "aten::is_nonzero", "aten::masked_select", "aten::unique", "aten::_unique2",
                    "aten::to", "aten::_to_copy", "aten::copy_", "aten::equal",
                    "aten::repeat_interleave")  # fmt: skip
BLOCKING_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                  "cudaEventSynchronize", "hipStreamSynchronize", "hipDeviceSynchronize",
                  "hipMemcpy", "hipEventSynchronize")  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One fault on one rank: what, its cost per step, the evidence, and the fix direction."""

    kind: str  # the catalog's snake_case name, e.g. "sync_forcing_op"
    rank: int
    title: str
    cost_ns_per_step: int
    events: int  # how many events show it
    detail: str
    evidence_ids: tuple[int, ...]  # the most telling of them (at most EVIDENCE_ROWS)
    evidence_cypher: str  # lists the evidence events
    fix: str

    step: int | None = None  # the step it is about (None: every step of the rank)
    # the work it is about, whose time fixing it would take away: (rank, ev_idx of its events)
    # pairs, and how: "ranges" (CPU ranges and what they launch), "gpu" (GPU activity: its
    # time and the idle before it), "times" (CPU time in [ts, end) intervals: `times`)
    work: tuple[tuple[int, tuple[int, ...]], ...] = field(default=(), compare=False, repr=False)
    work_kind: str = "ranges"
    times: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = field(
        default=(), compare=False, repr=False
    )
    saving_ns_per_step: int | None = None  # the step time fixing it saves (None: not modelled)
    ranks: tuple[int, ...] = ()  # every rank it was found on (folded: one finding for them all)

    @property
    def all_ranks(self) -> tuple[int, ...]:
        return self.ranks or (self.rank,)

    def to_json(self) -> dict[str, Any]:
        """The report JSON's finding (docs/report.md: the JSON contract)."""
        saving = self.saving_ns_per_step
        return {
            "kind": self.kind,
            "rank": self.rank,
            "ranks": list(self.all_ranks),
            "step": self.step,
            "cost_us": round(self.cost_ns_per_step / 1e3, 3),
            "saving_us": None if saving is None else round(saving / 1e3, 3),
            "events": self.events,
            "evidence": {"ids": list(self.evidence_ids), "cypher": self.evidence_cypher},
            "summary": f"{self.title}: {self.detail}",
            "fix": self.fix,
        }


def rank_findings(
    gpu: GpuActivity,
    whole: GpuActivity,
    cpu: CpuEvents,
    figures: tuple[Row, Row],
    steps: int,
    run_idx: int,
) -> list[Finding]:
    """Every rule on one rank: the GPU work reported (one step's, or `whole`, all of it), its
    CPU events, its temporal and overlap rows, and the number of steps its costs are spread
    over."""
    temporal, overlap = figures
    span = int(temporal["kernel_time_ns"])
    if span <= 0:
        return []
    steps = max(steps, 1)
    ids = Ids(run_idx, gpu.rank)
    return [
        *_host_wait(gpu, temporal, span, steps, ids),
        *_exposed_communication(gpu, overlap, span, steps, ids),
        *_sync_forcing(cpu, whole, span, steps, ids),
    ]


@dataclass(frozen=True)
class Ids:
    """Event ids of one rank's events (by ev_idx)."""

    run_idx: int
    rank: int

    def of(self, ev_idx: np.ndarray) -> tuple[int, ...]:
        return tuple(int(schema.event_key(self.run_idx, self.rank, int(e))) for e in ev_idx)


def listing(label: str, ids: tuple[int, ...], returns: str) -> str:
    listed = ", ".join(str(i) for i in ids)
    return f"MATCH {label} WHERE {label[1]}.id IN [{listed}] RETURN {returns}"


def _host_wait(gpu: GpuActivity, temporal: Row, span: int, steps: int, ids: Ids) -> list[Finding]:
    waited = int(temporal.get("idle_host_wait_ns") or 0)
    if waited < HOST_WAIT_SHARE * span:
        return []
    lo, hi = merged(gpu.ts, gpu.end)
    gap_start, gap_end = hi[:-1], lo[1:]
    at = np.searchsorted(gap_end, gpu.ts)
    ends_gap = (at < len(gap_end)) & (gap_end[np.minimum(at, len(gap_end) - 1)] == gpu.ts)
    late = ends_gap & (gpu.launch_ts != NO_LAUNCH)
    late &= gpu.launch_ts > gap_start[np.minimum(at, max(len(gap_start) - 1, 0))]
    rows = np.nonzero(late)[0]
    gap = gap_end[at[rows]] - gap_start[at[rows]]
    order = np.lexsort((gpu.ev_idx[rows], -gap))[:EVIDENCE_ROWS]
    evidence = ids.of(gpu.ev_idx[rows][order])
    return [
        Finding(
            "host_bound_gpu",
            gpu.rank,
            "GPU idle waiting for the CPU to launch work",
            waited // steps,
            len(rows),
            f"the GPU sat idle {waited / 1e3:,.0f} µs ({waited / span:.1%} of its span) in "
            f"{len(rows):,} gaps ended by work whose launch call started only after the GPU "
            "had gone idle (evidence: the work ending the longest gaps)",
            evidence,
            listing(
                "(k:Kernel)",
                evidence,
                "k.id AS kernel, k.name AS name, k.ts AS ts ORDER BY ts",
            ),
            "feed the GPU faster: fewer, larger kernels (torch.compile, fused ops), CUDA graphs "
            "for launch-bound loops, and host work (data prep, Python, syncs) off the step's "
            "critical path",
            work=((gpu.rank, tuple(gpu.ev_idx[rows].tolist())),),
            work_kind="gpu_idle",
        )
    ]


def _exposed_communication(
    gpu: GpuActivity, overlap: Row, span: int, steps: int, ids: Ids
) -> list[Finding]:
    exposed = int(overlap["communication_ns"]) - int(overlap["overlapped_ns"])
    if exposed < EXPOSED_COMM_SHARE * span:
        return []
    comm = np.nonzero(gpu.kernel_type == COMMUNICATION)[0]
    comp = gpu.kernel_type == COMPUTATION
    lo, hi = merged(gpu.ts[comp], gpu.end[comp])
    # each collective kernel's time with no compute beside it
    alone = gpu.dur[comm] - covered_between(gpu.ts[comm], gpu.end[comm], (lo, hi))
    order = np.lexsort((gpu.ev_idx[comm], -alone))[:EVIDENCE_ROWS] if len(comm) else comm
    evidence = ids.of(gpu.ev_idx[comm][order])
    return [
        Finding(
            "unoverlapped_allreduce",
            gpu.rank,
            "Communication not overlapped by compute",
            exposed // steps,
            int((alone > 0).sum()),
            f"{exposed / 1e3:,.0f} µs of communication ({exposed / span:.1%} of the GPU span) "
            f"ran with no compute kernel beside it ({overlap['overlap_pct']}% overlapped; "
            "evidence: the collectives most exposed)",
            evidence,
            listing("(k:Kernel)", evidence, "k.id AS kernel, k.name AS name, k.dur AS dur"),
            "overlap it: start gradient all-reduce during backward (DDP bucket size, FSDP "
            "prefetch), run collectives on their own stream, or shrink what is sent",
            work=((gpu.rank, tuple(gpu.ev_idx[comm].tolist())),),
            work_kind="gpu",
        )
    ]


def _sync_forcing(
    cpu: CpuEvents, gpu: GpuActivity, span: int, steps: int, ids: Ids
) -> list[Finding]:
    calls = np.nonzero(cpu.is_runtime & cpu.name_in(BLOCKING_CALLS))[0]
    ops = np.nonzero(~cpu.is_runtime & cpu.name_in(SYNC_FORCING_OPS))[0]
    if len(calls) == 0 or len(ops) == 0:
        return []
    under = _enclosing(cpu, calls, ops)  # the outermost value-reading op around each call
    hit = calls[under >= 0]
    if len(hit) < steps:
        return []
    blocked = int(cpu.dur[hit].sum())
    drained = _drained(gpu, cpu.end[hit], cpu.intervals(cpu.data_loading()))
    if drained < SYNC_DRAIN_SHARE * span:
        return []
    names, counts = np.unique([cpu.name.at(int(o)) for o in under[under >= 0]],
                              return_counts=True)  # fmt: skip
    named = ", ".join(f"{n} ×{c}" for n, c in sorted(zip(names, counts, strict=True),
                                                      key=lambda nc: -nc[1])[:3])  # fmt: skip
    order = np.lexsort((cpu.ev_idx[hit], -cpu.dur[hit]))[:EVIDENCE_ROWS]
    evidence = ids.of(cpu.ev_idx[hit][order])
    return [
        Finding(
            "sync_forcing_op",
            gpu.rank,
            "Ops that read GPU values on the CPU force synchronizations",
            drained // steps,
            len(hit),
            f"{len(hit):,} blocking calls ({len(hit) / steps:.1f} per step) under {named} held "
            f"the CPU {blocked / 1e3:,.0f} µs; each drained the GPU's queue, which then sat "
            f"idle {drained / 1e3:,.0f} µs in all until the CPU launched again",
            evidence,
            listing(
                "(r:Runtime)",
                evidence,
                "r.id AS runtime, r.name AS name, r.dur AS dur ORDER BY dur DESC, runtime",
            ),
            "keep values on the GPU in the hot loop: no .item()/.cpu()/print of tensors, "
            "nonzero/masked_select with a known size, or read them once per N steps",
            work=((gpu.rank, tuple(cpu.ev_idx[under[under >= 0]].tolist())),),
        )
    ]


def _enclosing(cpu: CpuEvents, calls: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """For each call (row), the outermost of `ops` (rows) on its thread that encloses it
    (-1: none)."""
    out = np.full(len(calls), -1, np.int64)
    for thread in np.unique(cpu.thread[calls]):
        mine = ops[cpu.thread[ops] == thread]
        if len(mine) == 0:
            continue
        mine = mine[np.lexsort((-cpu.end[mine], cpu.ts[mine]))]
        ts, end = cpu.ts[mine], cpu.end[mine]
        reach = np.maximum.accumulate(end)
        outer = np.concatenate(([True], ts[1:] >= reach[:-1]))  # starts a nest of its own
        first = mine[outer]  # the outermost op of each nest, in time order
        nest_end = np.maximum.reduceat(end, np.nonzero(outer)[0])
        rows = np.nonzero(cpu.thread[calls] == thread)[0]
        k = np.searchsorted(cpu.ts[first], cpu.ts[calls[rows]], side="right") - 1
        inside = (k >= 0) & (cpu.end[calls[rows]] <= nest_end[np.maximum(k, 0)])
        out[rows[inside]] = first[k[inside]]
    return out


def _drained(gpu: GpuActivity, ends: np.ndarray, loading: Intervals) -> int:
    """GPU idle time after these instants (to the GPU's next start, where it is idle then),
    less the time the CPU spent loading data in it (input_bound's, not the sync's)."""
    lo, hi = merged(gpu.ts, gpu.end)
    if len(lo) == 0:
        return 0
    k = np.searchsorted(lo, ends, side="right") - 1
    # a call before any GPU work (k = -1) drained nothing: the GPU had not started
    idle = (k >= 0) & ~(hi[np.maximum(k, 0)] > ends) & (k + 1 < len(lo))
    following = lo[np.minimum(k + 1, len(lo) - 1)]
    shares = exclusive_shares([(ends[idle], following[idle]), loading])
    return int(shares.get(1, 0))
