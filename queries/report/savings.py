"""Findings ranked by what fixing them saves, and the straggler as a finding of its own.

Each step's graph (every rank joined through the collectives, as `tracegraph path` shows it, or
a rank's own where the step has no other rank) is built once from the run's archive. A
finding's saving is the step time gone with its work taking no time there (ingest/edgesets/
native/savings.py), averaged over the steps of its ranks. Waiting weighs nothing in those graphs,
so a rank's time spent waiting for a late rank saves nothing when "fixed" on the waiting rank:
the late rank's work does, and the straggler finding carries it. Findings of one kind on several
ranks fold into one naming the ranks, its saving that of fixing it on all of them at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tracegraph.ingest import schema
from tracegraph.ingest.edgesets.native.crossrank import CrossRankPath
from tracegraph.ingest.edgesets.native.edge_set import BuiltRun
from tracegraph.ingest.edgesets.native.savings import Savings
from tracegraph.ingest.edgesets.native.segments import NO_OP, Segment, flatten
from tracegraph.ingest.edgesets.native.step_graph import StepGraph
from tracegraph.ingest.edgesets.native.window import STEP_ANNOTATION
from tracegraph.ingest.python_frames import readable

from .findings import Finding, listing
from .ranks import ranks_phrase


@dataclass(frozen=True)
class _Step:
    """One step's graph and the rank graphs in it."""

    number: int | None
    graph: StepGraph
    savings: Savings
    index: dict[int, int]  # rank → graph index


def step_graphs(built: BuiltRun, step: int | None = None) -> list[_Step]:
    """Every step's graph (only ProfilerStep#`step`'s with `step`)."""
    out: list[_Step] = []
    joined = {p.step for p in built.paths}
    for p in built.paths:
        number = _number(p.step)
        if p.graph is not None and (step is None or number == step):
            index = {g.rank: i for i, g in enumerate(p.graph.graphs)}
            out.append(_Step(number, p.graph, Savings(p.graph, p.path_edges), index))
    for b in built.builds:
        for w in b.windows:
            label = w.step or w.window.label()
            number = _number(label)
            if w.graph is None or label in joined or (step is not None and number != step):
                continue
            graph = StepGraph.of_window(label, w.graph)
            out.append(_Step(number, graph, Savings(graph, w.graph.path.edges), {b.rank: 0}))
    return out


def _number(label: str) -> int | None:
    text = label.removeprefix(f"{STEP_ANNOTATION}#")
    return int(text) if text.isdigit() else None


def with_savings(findings: Sequence[Finding], steps: list[_Step]) -> list[Finding]:
    """Each finding with its saving per step (None where its work is not modelled)."""
    return [
        replace(f, saving_ns_per_step=_saving(f, steps)) if f.work or f.times else f
        for f in findings
    ]


def _saving(finding: Finding, steps: list[_Step]) -> int | None:
    if not finding.work and not finding.times:
        return None
    ranks = set(finding.all_ranks)
    mine = [s for s in steps if ranks & set(s.index)]
    if not mine:
        return None
    on_gpu = finding.work_kind in ("gpu", "gpu_idle")
    total = 0
    for s in mine:
        # one array for every rank's work (a folded finding names up to all of them)
        cut = np.zeros(len(s.graph.weight), np.int64)
        gpu_parts: list[tuple[int, np.ndarray]] = []
        for rank, events in finding.work:
            if rank not in s.index:
                continue
            g = s.index[rank]
            rows = s.graph.graphs[g].clip.position_of(np.asarray(events, np.int64))
            rows = rows[rows >= 0]
            if not len(rows):
                continue
            if on_gpu:
                gpu_parts.append((g, rows))
            else:
                s.savings.cut_ranges(g, rows, out=cut)
        if gpu_parts:
            idle_only = finding.work_kind == "gpu_idle"
            cut = np.maximum(cut, s.savings.cut_gpu(gpu_parts, idle_only=idle_only))
        for rank, spans in finding.times:
            if rank in s.index and spans:
                lo, hi = np.array(spans, np.int64).T
                s.savings.cut_times(s.index[rank], lo, hi, out=cut)
        total += s.savings.of_cut(cut)
    return total // len(mine)


def path_waits(paths: Sequence[CrossRankPath]) -> dict[int, int]:
    """Per rank, its time waiting in its collectives for a late rank per step: the cross-rank
    verdicts' waits (a union per step), averaged over the steps."""
    ranks = {r for p in paths for r in p.wait_ns}
    return {r: sum(p.wait_ns.get(r, 0) for p in paths) // len(paths) for r in ranks}


def arrival_waits(instances: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Per rank, its time waiting for the last arrival per step, from the collectives' rows
    alone (no path: the summary tier): its longest wait at any of a step's collectives (they
    overlap), averaged over the steps that have collectives."""
    longest: dict[tuple[int, int], int] = {}
    for row in instances:
        if row["step"] is None:
            continue
        for rank, wait in json.loads(row["waits_ns"]).items():
            key = (int(row["step"]), int(rank))
            longest[key] = max(longest.get(key, 0), int(wait))
    steps = len({s for s, _ in longest})
    out: dict[int, int] = {}
    for (_, rank), wait in longest.items():
        out[rank] = out.get(rank, 0) + wait
    return {r: w // steps for r, w in out.items()}


def transfer_only(
    findings: Sequence[Finding],
    waits: Mapping[int, int],
    unmatched: Mapping[int, int] | None = None,
) -> list[Finding]:
    """`unoverlapped_allreduce` costed as transfer: a rank's time waiting in its collectives
    for a late rank (`waits`: per rank, per step; `path_waits` or `arrival_waits`) is the late
    rank's, and its wait in collectives some rank never entered (`unmatched`: per rank, per
    step) the divergence's, not exposed communication of its own."""
    unmatched = unmatched or {}
    if not waits and not unmatched:
        return list(findings)
    out = []
    for f in findings:
        if f.kind != "unoverlapped_allreduce":
            out.append(f)
            continue
        late, diverged = waits.get(f.rank, 0), unmatched.get(f.rank, 0)
        cost = max(0, f.cost_ns_per_step - late - diverged)
        waited = min(late + diverged, f.cost_ns_per_step)
        why = "for a late rank (its straggler finding's)"
        if diverged:
            why = (
                f"for other ranks ({min(diverged, waited) / 1e3:,.0f} µs in collectives some "
                "rank never entered: the unmatched_collective finding's)"
            )
        out.append(
            replace(
                f,
                cost_ns_per_step=cost,
                detail=f"{f.detail}; of it {waited / 1e3:,.0f} µs per step was waiting {why}, "
                f"{cost / 1e3:,.0f} µs transfer",
            )
        )
    return out


# kinds that break the job rather than slow it (a collective some ranks never enter hangs it):
# before any saving
FIRST_KINDS = ("unmatched_collective",)


def ranked(findings: Sequence[Finding]) -> list[Finding]:
    """Those that break the job first, then most saving (findings without a modelled saving
    after, by cost)."""
    return sorted(
        findings,
        key=lambda f: (
            f.kind not in FIRST_KINDS,
            f.saving_ns_per_step is None,
            -(f.saving_ns_per_step or 0),
            -f.cost_ns_per_step,
            f.rank,
            f.kind,
            f.step or -1,
        ),
    )


def folded(findings: Sequence[Finding]) -> list[Finding]:
    """Findings of one kind (and step) on several ranks as one, naming the ranks and told by
    the rank where it costs most; its work is all of theirs (so its saving, `with_savings`, is
    that of fixing it on all of them), its cost the ranks' mean."""
    groups: dict[tuple[str, int | None, int], list[Finding]] = {}
    for i, f in enumerate(findings):
        alone = i if f.kind == "straggler" else -1  # each late rank's story is its own
        groups.setdefault((f.kind, f.step, alone), []).append(f)
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        group.sort(key=lambda f: (-f.cost_ns_per_step, f.rank))
        first = group[0]
        ranks = tuple(sorted(f.rank for f in group))
        joint = replace(
            first,
            ranks=ranks,
            cost_ns_per_step=sum(f.cost_ns_per_step for f in group) // len(group),
            events=sum(f.events for f in group),
            detail=f"on {ranks_phrase(ranks)}; on rank {first.rank}: {first.detail}",
            work=tuple(w for f in group for w in f.work),
            times=tuple(t for f in group for t in f.times),
        )
        out.append(joint)
    return out


# ---- the straggler ------------------------------------------------------------------------------
def straggler_findings(
    paths: Sequence[CrossRankPath], steps: list[_Step], run_idx: int
) -> list[Finding]:
    """A rank that arrived late at the collectives, made the others wait, and bound the steps:
    one finding per such rank, naming its steps and where its path time went (its top-level
    segment with the largest saving, and the innermost range with the most time), with the
    saving of that rank taking no time at all in its late steps: the others, no longer
    waiting, then bound them (so it is what the late rank costs the job, nothing more)."""
    graph_of = {id(s.graph): s for s in steps}
    by_rank: dict[int, list[CrossRankPath]] = {}
    for p in paths:
        if p.straggler is not None:
            by_rank.setdefault(p.straggler.rank, []).append(p)
    out = []
    for rank, late in sorted(by_rank.items()):
        causes = [_cause(p, rank) for p in late]
        named = list(dict.fromkeys(_named(p, c) for p, c in zip(late, causes, strict=True) if c))
        hot = list(dict.fromkeys(p.hotspot for p in late if p.hotspot and p.bound_by_rank == rank))
        saved = 0
        for p in late:
            s = graph_of.get(id(p.graph))
            if s is not None and rank in s.index:
                saved += s.savings.of_cut(s.savings.cut_rank(s.index[rank]))
        worst = max(late, key=lambda p: p.straggler.lateness_ns if p.straggler else 0)
        st = worst.straggler
        assert st is not None
        events = list(
            dict.fromkeys(
                schema.event_key(run_idx, rank, ev)
                for p, c in zip(late, causes, strict=True)
                if c is not None and (ev := _event_of(p, c)) is not None
            )
        )[:5]
        steps_named = ", ".join(p.step.removeprefix(f"{STEP_ANNOTATION}#") for p in late)
        where = ", ".join(named) or "its own work"
        if hot and hot[0] not in named and hot[0] != NO_OP:
            where += f" (mostly {hot[0]})"
        untraced = bool(named) and all(c is None or c.name == NO_OP for c in causes)
        fix = (
            f"find what rank {rank} runs where the profiler recorded nothing (with_stack=True "
            "shows python frames; a GC pass: gc.freeze() after setup or gc.disable() with "
            "collection between steps)"
            if untraced
            else f"make rank {rank}'s {named[0] if named else 'work'} faster or move it off the "
            "step"
        )
        out.append(
            Finding(
                "straggler",
                rank,
                f"Rank {rank} arrives late at the collectives and the others wait",
                sum(p.straggler.caused_wait_ns for p in late if p.straggler) // len(paths),
                len(late),
                f"in {len(late)} of {len(paths)} steps ({steps_named}) rank {rank} arrived "
                f"last, up to {st.lateness_ns / 1e3:,.0f} µs after the others' median arrival "
                f"(at {st.at}); before arriving its path time went to {where}",
                tuple(events),
                listing(
                    "(o:Op:Runtime:Kernel)",
                    tuple(events),
                    "o.id AS event, o.rank AS rank, o.name AS name, o.ts AS ts, o.dur AS dur",
                ),  # fmt: skip
                f"{fix} (the other ranks only wait: speeding them up saves nothing)",
                saving_ns_per_step=saved // len(paths),
            )
        )
    return out


def _named(path: CrossRankPath, seg: Segment) -> str:
    """A segment as the finding names it; time with no op, by the op it came after."""
    if seg.name != NO_OP:
        return readable(seg.name)
    before = _before(path, seg)
    after = "" if before is None else f" after {readable(before[1])}"
    return f"time with no op recorded{after} (GC, the GIL or untraced host work)"


def _event_of(path: CrossRankPath, seg: Segment) -> int | None:
    """The segment's range's event; for time with no op, the event it came after."""
    if seg.ev_idx is not None:
        return seg.ev_idx
    before = _before(path, seg) if seg.name == NO_OP else None
    return None if before is None else before[0]


def _before(path: CrossRankPath, seg: Segment) -> tuple[int, str] | None:
    """(ev_idx, name) of the event whose start or end the segment's first path edge leaves."""
    if path.graph is None or path.path_edges is None or seg.last <= seg.first:
        return None
    g = path.graph
    node = int(g.src[path.path_edges[seg.first]])
    i = int(g.graph_of(np.array([node]))[0])
    clip = g.graphs[i].clip
    row = (node - int(g.base[i])) // 2
    return int(clip.ev_idx[row]), str(clip.name.at(row))


def _cause(path: CrossRankPath, rank: int) -> Segment | None:
    """The top-level segment of the late rank with the largest saving."""
    mine = [s for s in path.segments if s.rank == rank and s.saving_ns is not None]
    mine = mine or [s for s in flatten(path.segments) if s.rank == rank]
    return max(mine, key=lambda s: (s.saving_ns or 0, s.ns)) if mine else None
