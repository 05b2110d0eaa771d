"""Each step's critical path told in segments, with what fixing each would save.

Computed from the run's archive by the native builder in memory (plain native options, every
`ProfilerStep`, or the whole trace where there is none), writing nothing: the same computation
`edges --native --all-steps` stores, so the verdicts and segments are the ones every other view
shows. Across ranks where the step has several (joined through their collectives), else the
rank's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracegraph.ingest.edgesets.native.edge_set import build_each_step
from tracegraph.ingest.edgesets.native.report import path_summary
from tracegraph.ingest.edgesets.native.segments import DEFAULT_DEPTH, Segment, step_segments
from tracegraph.ingest.edgesets.native.step_graph import StepGraph
from tracegraph.ingest.edgesets.native.window import STEP_ANNOTATION
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.store import GraphStore

from .crossrank import StepVerdict


class PathError(TracegraphError):
    """A step or rank the run does not have."""


@dataclass(frozen=True)
class StepStory:
    """One step's path: across ranks (`rank` None) or one rank's, in segments."""

    run: str
    step: str
    rank: int | None
    length_ns: int
    verdict: StepVerdict | None  # across ranks only
    segments: tuple[Segment, ...]

    def to_json(self, depth: int | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "run": self.run,
            "step": self.step,
            "rank": self.rank,
            "length_ns": self.length_ns,
            "segments": [s.to_json(depth) for s in self.segments],
        }
        if self.verdict is not None:
            v = self.verdict
            out["verdict"] = {
                "bound_by_rank": v.bound_by_rank,
                "bound_by_op": v.bound_by_op,
                "straggler": v.straggler,
                "wait_ns": {str(r): ns for r, ns in v.wait_ns.items()},
                "clock_offset_ns": {str(r): ns for r, ns in v.clock_offset_ns.items()},
            }
        return out


def step_stories(
    db: Path,
    *,
    run: str | None = None,
    step: int | None = None,
    rank: int | None = None,
    depth: int = DEFAULT_DEPTH,
    store: GraphStore | None = None,
) -> list[StepStory]:
    """Every step's story (or ProfilerStep#`step`'s), across ranks or of `rank` (read through
    `store` when given: the database `db` already open)."""
    built = build_each_step(db, run=run, store=store)
    name = built.source.run
    ranks = sorted(b.rank for b in built.builds)
    if rank is not None and rank not in ranks:
        raise PathError(f"{db}: run '{name}' has no rank {rank} (ranks: {ranks})")
    wanted = f"{STEP_ANNOTATION}#{step}" if step is not None else None
    out: list[StepStory] = []
    if rank is None and built.paths:
        for p in built.paths:
            if wanted is None or p.step == wanted:
                assert p.graph is not None and p.path_edges is not None
                segments = step_segments(p.graph, p.path_edges, depth)
                verdict = StepVerdict.of(path_summary(p))
                out.append(StepStory(name, p.step, None, p.length_ns, verdict, tuple(segments)))
    else:
        for b in built.builds:
            if rank is not None and b.rank != rank and len(ranks) > 1:
                continue
            for w in b.windows:
                label = w.step or w.window.label()
                if w.graph is None or (wanted is not None and label != wanted):
                    continue
                g = w.graph
                segments = step_segments(StepGraph.of_window(label, g), g.path.edges, depth)
                length = int(g.path.length) * g.unit_ns
                out.append(StepStory(name, label, b.rank, length, None, tuple(segments)))
    if not out and wanted is not None:
        raise PathError(f"{db}: run '{name}' has no {wanted} with a path")
    return out
