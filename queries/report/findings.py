"""Findings: rules over a run's report and graph that name a known fault, what it costs per
step, the events that show it (and the Cypher that lists them), and which way the fix lies.

Each rule has a threshold, documented with it; a rank is named only where the rule fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest import schema
from tracegraph.ingest.store import GraphStore

if TYPE_CHECKING:
    from .report import Report

HOST_WAIT_SHARE = 0.10  # GPU idle waiting for launches, as a share of the GPU span
EXPOSED_COMM_SHARE = 0.10  # communication not under compute, as a share of the GPU span
SYNC_SHARE = 0.01  # CPU time blocked in syncs forced by ops that read GPU values
EVIDENCE_ROWS = 5
# ops that read a GPU value on the CPU, and the runtime calls that then block (CUDA and HIP)
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

    rule: str
    rank: int
    title: str
    cost_ns_per_step: int
    detail: str
    evidence_ids: tuple[int, ...]
    evidence_cypher: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "evidence_ids": list(self.evidence_ids)}


def findings(store: GraphStore, run: str, run_idx: int, report: Report) -> list[Finding]:
    """Every rule on every rank of the report, most costly first (costs per step: over the
    rank's steps, or the one step reported)."""
    steps = _steps_per_rank(store, run) if report.step is None else {}
    found: list[Finding] = []
    spans = dict(zip(*(report.temporal[c].to_pylist() for c in ("rank", "kernel_time_ns")),
                     strict=True))  # fmt: skip
    for rank in report.ranks:
        span = spans.get(rank) or 0
        if span <= 0:
            continue
        per_step = max(steps.get(rank, 1), 1)
        found += _host_wait(store, run_idx, rank, span, per_step, report.temporal)
        found += _exposed_communication(store, run_idx, rank, span, per_step, report.overlap)
        found += _sync_forcing(store, run_idx, rank, span, per_step)
    return sorted(found, key=lambda f: (-f.cost_ns_per_step, f.rank, f.rule))


def _steps_per_rank(store: GraphStore, run: str) -> dict[int, int]:
    table = store.run(
        "MATCH (s:Step) WHERE s.run = $run AND s.step >= 0 RETURN s.rank AS rank, count(*) AS n",
        {"run": run},
    ).table
    return dict(zip(table["rank"].to_pylist(), table["n"].to_pylist(), strict=True))


def _range(run_idx: int, rank: int) -> tuple[int, int]:
    return schema.key_range(run_idx, rank)


def _host_wait(
    store: GraphStore, run_idx: int, rank: int, span: int, steps: int, temporal: pa.Table
) -> list[Finding]:
    mine = temporal.filter(pc.equal(temporal["rank"], rank))["idle_host_wait_ns"].to_pylist()
    waited = int(mine[0] or 0) if mine else 0
    if waited < HOST_WAIT_SHARE * span:
        return []
    lo, hi = _range(run_idx, rank)
    cypher = (
        f"MATCH (a:Kernel)-[n:NEXT_ON_STREAM]->(b:Kernel)<-[:LAUNCHES]-(r:Runtime) "
        f"WHERE b.id >= {lo} AND b.id < {hi} AND r.ts > a.ts + a.dur "
        "RETURN b.id AS kernel, b.name AS name, r.name AS launch, n.gap_ns AS gap_ns, "
        f"r.ts - (a.ts + a.dur) AS launched_late_ns ORDER BY gap_ns DESC LIMIT {EVIDENCE_ROWS}"
    )
    ids = tuple(int(i) for i in store.run(cypher).table["kernel"].to_pylist())
    return [
        Finding(
            "host-bound-gpu",
            rank,
            "GPU idle waiting for the CPU to launch work",
            waited // steps,
            f"the GPU sat idle {waited / 1e3:,.0f} µs ({waited / span:.1%} of its span) waiting "
            "for work whose launch call started only after it had gone idle",
            ids,
            cypher,
            "feed the GPU faster: fewer, larger kernels (torch.compile, fused ops), CUDA graphs "
            "for launch-bound loops, and host work (data prep, Python, syncs) off the step's "
            "critical path",
        )
    ]


def _exposed_communication(
    store: GraphStore, run_idx: int, rank: int, span: int, steps: int, overlap: pa.Table
) -> list[Finding]:
    row = overlap.filter(pc.equal(overlap["rank"], rank)).to_pylist()
    if not row:
        return []
    exposed = int(row[0]["communication_ns"]) - int(row[0]["overlapped_ns"])
    if exposed < EXPOSED_COMM_SHARE * span:
        return []
    lo, hi = _range(run_idx, rank)
    cypher = (
        f"MATCH (k:Kernel) WHERE k.id >= {lo} AND k.id < {hi} AND k.name STARTS WITH 'nccl' "
        f"RETURN k.id AS kernel, k.name AS name, k.dur AS dur ORDER BY dur DESC "
        f"LIMIT {EVIDENCE_ROWS}"
    )
    ids = tuple(int(i) for i in store.run(cypher).table["kernel"].to_pylist())
    return [
        Finding(
            "exposed-communication",
            rank,
            "Communication not overlapped by compute",
            exposed // steps,
            f"{exposed / 1e3:,.0f} µs of communication ({exposed / span:.1%} of the GPU span) "
            f"ran with no compute kernel beside it ({row[0]['overlap_pct']}% overlapped)",
            ids,
            cypher,
            "overlap it: start gradient all-reduce during backward (DDP bucket size, FSDP "
            "prefetch), run collectives on their own stream, or shrink what is sent",
        )
    ]


def _sync_forcing(
    store: GraphStore, run_idx: int, rank: int, span: int, steps: int
) -> list[Finding]:
    lo, hi = _range(run_idx, rank)
    ops = ", ".join(f"'{o}'" for o in SYNC_FORCING_OPS)
    calls = ", ".join(f"'{c}'" for c in BLOCKING_CALLS)
    cypher = (
        f"MATCH (o:Op)-[:CALLS*1..8]->(r:Runtime) WHERE r.id >= {lo} AND r.id < {hi} "
        f"AND r.name IN [{calls}] AND o.name IN [{ops}] "
        "WITH r, min(o.name) AS op "
        "RETURN r.id AS call, op, r.name AS name, r.dur AS dur ORDER BY dur DESC"
    )
    table = store.run(cypher).table
    blocked = int(pc.sum(table["dur"]).as_py() or 0)
    if table.num_rows == 0 or blocked < SYNC_SHARE * span:
        return []
    by_op = table.group_by("op").aggregate([("dur", "sum"), ("dur", "count")])
    worst = by_op.sort_by([("dur_sum", "descending")]).to_pylist()
    named = ", ".join(f"{w['op']} ×{w['dur_count']}" for w in worst[:3])
    return [
        Finding(
            "sync-forcing-op",
            rank,
            "Ops that read GPU values on the CPU force synchronizations",
            blocked // steps,
            f"{table.num_rows:,} blocking calls under {named} held the CPU "
            f"{blocked / 1e3:,.0f} µs ({blocked / span:.1%} of the GPU span)",
            tuple(int(i) for i in table["call"].to_pylist()[:EVIDENCE_ROWS]),
            cypher,
            "keep values on the GPU in the hot loop: no .item()/.cpu()/print of tensors, "
            "nonzero/masked_select with a known size, or read them once per N steps",
        )
    ]
