"""The invariants every dependency edge set must hold, checked where a window's graph is built.

- every edge goes forward in time: t(dst) ≥ t(src), t = ts for a start node, ts + dur for an end;
- every weight lies in [0, t(dst) − t(src)], so a path is never longer than the time it spans
  and no instant is counted twice;
- the critical path is no longer than the window's span (its first node to its last).

tracegraph's own graphs must hold them: a break is a bug and fails the build, naming the edge.
HTA's graphs (and the emulations, which equal them) can break them; there the break is counted
and reported, never hidden.

Edges between two timelines (CPU → GPU launches, GPU → GPU on a stream, GPU → CPU syncs) can go
back in time only through clock skew between the CPU and the GPU timeline; plain native leaves
those out (`drop_skewed`) and counts them, since a dependency that ends before it starts cannot
bound anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import TracegraphError
from .edges import (
    KERNEL_KERNEL_DELAY,
    KERNEL_LAUNCH_DELAY,
    SYNC_DEPENDENCY,
    TYPE_NAMES,
    Edges,
    node_times,
)
from .frame import Frame

CROSS_TIMELINE = (KERNEL_LAUNCH_DELAY, KERNEL_KERNEL_DELAY, SYNC_DEPENDENCY)


class InvariantError(TracegraphError):
    """A graph tracegraph built breaks an invariant (a bug: the message names the edge)."""


@dataclass(frozen=True)
class Breaks:
    """Invariant breaks counted in one graph (HTA's semantics may break them)."""

    backward_edges: int = 0  # edges with t(dst) < t(src)
    overweight_edges: int = 0  # weight > t(dst) − t(src)
    path_over_span_ns: int = 0  # how much the path exceeds its window's span (0: it does not)
    first: str = ""  # the first break, described

    @property
    def any(self) -> bool:
        return bool(self.backward_edges or self.overweight_edges or self.path_over_span_ns)

    def as_dict(self) -> dict[str, object]:
        return {
            "backward_edges": self.backward_edges,
            "overweight_edges": self.overweight_edges,
            "path_over_span_ns": self.path_over_span_ns,
            "first": self.first,
        }


def node_time_of(clip: Frame, clamp: bool = True) -> np.ndarray:
    """Time of every node (2·row: start, 2·row + 1: end) in frame units. `clamp`: a negative
    duration counts as 0 (tracegraph's rule); HTA's µs rounding can end an event before it
    starts, and its graph is checked with those times."""
    return node_times(clip.ts, clip.ts + (np.maximum(clip.dur, 0) if clamp else clip.dur))


def drop_skewed(edges: Edges, clip: Frame) -> tuple[Edges, dict[str, int]]:
    """Cross-timeline edges that go back in time left out, counted by type."""
    if len(edges) == 0:
        return edges, {}
    t = node_time_of(clip)
    back = (t[edges.dst] < t[edges.src]) & np.isin(edges.kind, CROSS_TIMELINE)
    if not back.any():
        return edges, {}
    kinds, counts = np.unique(edges.kind[back], return_counts=True)
    dropped = {TYPE_NAMES[int(k)]: int(c) for k, c in zip(kinds, counts, strict=True)}
    return edges.take(np.nonzero(~back)[0]), dropped


def find_breaks(
    clip: Frame, edges: Edges, weight: np.ndarray, path_length: int, rank: int, clamp: bool = True
) -> Breaks:
    """Every invariant break of one window graph (weights as the path used them)."""
    if len(edges) == 0:
        return Breaks()
    t = node_time_of(clip, clamp)
    delta = t[edges.dst] - t[edges.src]
    back = delta < 0
    over = (weight > np.maximum(delta, 0)) | (weight < 0)
    touched = np.concatenate([edges.src, edges.dst])
    span = int(t[touched].max() - t[touched].min())
    over_span = max(0, int(path_length) - span)
    first = ""
    bad = np.nonzero(back | over)[0]
    if len(bad):
        first = describe_edge(clip, edges, int(bad[0]), int(weight[bad[0]]), rank, clamp)
    elif over_span:
        first = (
            f"rank {rank}: path {path_length * clip.unit_ns:,} ns over a window spanning "
            f"{span * clip.unit_ns:,} ns"
        )
    return Breaks(int(back.sum()), int((over & ~back).sum()), over_span * clip.unit_ns, first)


def describe_edge(
    clip: Frame, edges: Edges, j: int, weight: int, rank: int, clamp: bool = True
) -> str:
    """One edge as a person reads it: both ends by name and boundary, with their times."""
    t = node_time_of(clip, clamp)

    def end(node: int) -> str:
        row = node // 2
        boundary = "start" if node % 2 == 0 else "end"
        ns = (int(t[node]) + clip.origin) * clip.unit_ns
        return f"{clip.name.at(row)!r} ({boundary}, ev_idx {int(clip.ev_idx[row])}, {ns} ns)"

    src, dst = int(edges.src[j]), int(edges.dst[j])
    delta = (int(t[dst]) - int(t[src])) * clip.unit_ns
    return (
        f"rank {rank}: {TYPE_NAMES[int(edges.kind[j])]} edge {end(src)} → {end(dst)}: "
        f"Δt {delta:,} ns, weight {weight * clip.unit_ns:,} ns"
    )


def enforce(breaks: Breaks) -> None:
    """tracegraph's own graphs hold every invariant; a break is a bug, reported with its edge."""
    if breaks.any:
        raise InvariantError(
            f"invariant broken ({breaks.backward_edges} edges back in time, "
            f"{breaks.overweight_edges} weighing more than their Δt, path over its window by "
            f"{breaks.path_over_span_ns:,} ns): {breaks.first}"
        )
