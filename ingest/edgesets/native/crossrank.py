"""The job's critical path for one step: every rank's graph joined through its collectives.

How collectives block: a collective cannot finish on any rank before its last participant has
arrived, so the early ranks' wait is the late rank's doing. Arrival is the participant's start:
the NCCL/RCCL kernel's start on a GPU rank, the `gloo:*` range's start on a CPU rank.

Clocks: each rank's timestamps come from its own host clock. Ranks on different hosts can
disagree by far more than a collective lasts, so arrivals are compared on clocks aligned from
the collectives' ends (ingest/clocks.py; ranks of one named host are not shifted).

Per collective instance (the `Collective` nodes and their `PART_OF` participants), with L the
last to arrive:
- L's start → every other participant's end (`collective_dependency`), carrying what remains
  after L arrived (`P.end − L.start`); a waiting participant's own span counts only that part.

A wait is a wait wherever it shows (docs/cross-rank.md). A rank blocked on a collective shows it
on its other timelines too: DDP's main thread sits in a gap until the gloo worker's all-reduce
ends, a compute stream idles until the NCCL kernel it waits on ends, an op (`run_backward`, an
autograd node) encloses the wait. Such an edge has no node of its timeline inside it and
resumes within `RESUME_NS` after one of the rank's collectives ends. Its time while any of the
rank's collectives was in flight (arrival to end) is that collective's, not the timeline's: the
edge loses it, and the collective's end → the edge's end (`collective_dependency`) carries what
follows. A leaf op's own span is its work and keeps its weight (ops that only wait, e.g.
`_c10d_functional::wait_tensor`, and annotations, excepted). Waiting then weighs nothing, so
the longest path through the union of the ranks' graphs crosses to the rank everyone waited
for, and the rank and op that bound the step are on it. Every edge of
the joined graph goes forward in (aligned) time, and the path is no longer than the step's span:
checked here, a break fails the build.

The straggler of a step is the rank whose late arrivals caused the most wait on the others; its
lateness at a collective is its arrival minus the median arrival of the other participants, and
it is named only where that reaches `LATE_SHARE` of the step's path somewhere.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...clocks import offsets_from_ends
from ...intervals import covered_between, merged
from .edges import (
    COLLECTIVE_DEPENDENCY,
    KERNEL_KERNEL_DELAY,
    KERNEL_LAUNCH_DELAY,
    OPERATOR_KERNEL,
    TYPE_NAMES,
)
from .frame import NODE_LABEL, Frame
from .graph import WindowGraph
from .invariants import InvariantError, node_time_of
from .segments import (
    STORED_DEPTH,
    Segment,
    heaviest_on,
    hotspot,
    path_owners,
    step_segments,
)
from .step_graph import StepGraph
from .threads import waits_itself

# A rank is the step's straggler when it arrived at least this share of the step's path after
# the others' median arrival somewhere; arrivals closer than that are jitter (and a clean job's
# "latest" rank changes from step to step).
LATE_SHARE = 0.05
# The category of a summary rank's stand-in rows (stand_in.py)
SUMMARY_CATEGORY = "summary"
# A blocked timeline resumes within this of the collective's end: a GPU stream in microseconds,
# a CPU thread woken by the collective's worker thread in about 1 ms on a loaded host (measured:
# 1.0 ms on 4 gloo ranks sharing 2 cores, tests/data/gloo_4r).
RESUME_NS = 5_000_000


@dataclass(frozen=True)
class Instance:
    """One collective instance of the run: a readable label and its participants."""

    label: str  # e.g. "allreduce #3" (name and sequence number or order)
    members: tuple[tuple[int, int], ...]  # (rank, ev_idx)
    group: str = ""  # its process group


def never_completed(instances: dict[int, Instance]) -> set[int]:
    """The instances some rank of their process group never entered (its ranks: those with a
    participant in any of its instances): nobody waits there for the last to enter, everyone
    for one who never comes (`unmatched` in the report), so they are no join."""
    ranks: dict[str, set[int]] = defaultdict(set)
    for inst in instances.values():
        ranks[inst.group].update(r for r, _ in inst.members)
    return {
        cid for cid, inst in instances.items() if {r for r, _ in inst.members} != ranks[inst.group]
    }


@dataclass(frozen=True)
class Participants:
    """Every collective participant of a run as flat arrays (one row each), for lookups by rank
    with whole-array passes; `labels` by collective id."""

    collective: np.ndarray
    rank: np.ndarray
    ev_idx: np.ndarray
    labels: dict[int, str]

    @staticmethod
    def of(instances: dict[int, Instance]) -> Participants:
        rows = [(cid, r, ev) for cid, inst in instances.items() for r, ev in inst.members]
        table = np.array(rows, np.int64).reshape(-1, 3)
        labels = {cid: inst.label for cid, inst in instances.items()}
        return Participants(table[:, 0], table[:, 1], table[:, 2], labels)

    def of_rank(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(collective ids, ev_idx) of one rank's participants."""
        mine = self.rank == rank
        return self.collective[mine], self.ev_idx[mine]


@dataclass(frozen=True)
class PathEdge:
    """One edge of a cross-rank path: endpoints as (rank, ev_idx, is_start), type, weight."""

    src_rank: int
    src_ev_idx: int
    src_start: bool
    dst_rank: int
    dst_ev_idx: int
    dst_start: bool
    kind: int
    weight_ns: int
    src_label: str | None  # graph node label of each end (None: not a node of ours)
    dst_label: str | None


@dataclass(frozen=True)
class Straggler:
    """The rank the others waited for in a step, and by how much."""

    rank: int
    last_at: int  # collectives of the step it arrived last at
    collectives: int  # collectives of the step with two or more participants
    lateness_ns: int  # its largest lateness: arrival − median arrival of the others
    at: str  # the collective where it was that late
    caused_wait_ns: int  # wait it caused: each other rank's (a union over the step), summed
    ev_idx: int = -1  # its participant in that collective


@dataclass(frozen=True)
class CrossRankPath:
    """The job's critical path through one step, and where its time went."""

    step: str
    length_ns: int
    edges: tuple[PathEdge, ...]
    rank_ns: dict[int, int]  # path time spent on each rank
    straggler: Straggler | None
    bound_by_rank: int
    bound_by_op: str
    collective_edges: tuple[PathEdge, ...]  # every collective edge of the step (not only on path)
    wait_ns: dict[int, int] = field(default_factory=dict)  # time each rank waited in collectives
    clock_offset_ns: dict[int, int] = field(default_factory=dict)  # subtracted from its times
    span_ns: int = 0  # the step's span on the aligned clocks: earliest to latest node
    segments: tuple[Segment, ...] = ()  # the path in the units a person acts on, with savings
    hotspot: str = ""  # the innermost range with the most path time on the bound rank
    hotspot_ns: int = 0
    # the joined graph and the path's edges in it (in memory only: segments and what-ifs)
    graph: StepGraph | None = field(default=None, compare=False, repr=False)
    path_edges: np.ndarray | None = field(default=None, compare=False, repr=False)
    summarised: tuple[int, ...] = ()  # ranks joined as summaries: their arrivals only

    @property
    def stragglers(self) -> tuple[int, ...]:
        return (self.straggler.rank,) if self.straggler is not None else ()


@dataclass(frozen=True)
class _Arrival:
    rank: int
    graph: int  # index into the step's graphs
    row: int  # row in that graph's clip
    start: int  # aligned ns
    end: int


def clock_offsets(
    frames: list[Frame], participants: Participants, hosts: dict[int, str | None] | None = None
) -> dict[int, int]:
    """Each rank's clock offset (ns) against the others, from its collectives' end times; one
    offset for the ranks of one named host."""
    ends: dict[int, dict[int, int]] = defaultdict(dict)  # collective → rank → end
    for frame in frames:
        cids, evs = participants.of_rank(frame.rank)
        rows = frame.position_of(evs)
        found = rows >= 0
        end_ns = (frame.end[rows[found]] + frame.origin) * frame.unit_ns
        for cid, end in zip(cids[found].tolist(), end_ns.tolist(), strict=True):
            ends[cid][frame.rank] = end
    return offsets_from_ends(ends, hosts)


def last_arrivals(
    frames: list[Frame], participants: Participants, offsets: dict[int, int]
) -> dict[int, int]:
    """Per collective, the rank that arrived last (aligned clocks; of equals, the lowest
    rank), over every rank's frame: what decides whether a step's part of an instance that
    crosses steps is a join (`_arrivals`)."""
    last: dict[int, tuple[int, int]] = {}
    for frame in frames:
        cids, evs = participants.of_rank(frame.rank)
        rows = frame.position_of(evs)
        found = rows >= 0
        starts = (frame.ts[rows[found]] + frame.origin) * frame.unit_ns - offsets.get(frame.rank, 0)
        for cid, start in zip(cids[found].tolist(), starts.tolist(), strict=True):
            key = (int(start), -frame.rank)
            if cid not in last or key > last[cid]:
                last[cid] = key
    return {cid: -key[1] for cid, key in last.items()}


def cross_rank_path(
    step: str,
    graphs: list[WindowGraph],
    participants: Participants,
    offsets: dict[int, int] | None = None,
    depth: int = STORED_DEPTH,
    last_of: dict[int, int] | None = None,
    hung: set[int] | None = None,
) -> CrossRankPath | None:
    """Join the graphs (one per rank, same step) through the collectives and find the path
    (its segments `depth` levels deep). `last_of` (`last_arrivals`): per collective, the rank
    that arrived last over all steps; without it, no instance that crosses steps is a join.
    `hung` (`never_completed`): instances that are no join."""
    if not graphs:
        return None
    offsets = offsets or {}
    sizes = [2 * g.clip.n for g in graphs]
    base = np.cumsum([0, *sizes])
    times = np.concatenate([_aligned_times(g, offsets.get(g.rank, 0)) for g in graphs])
    s = np.concatenate([g.edges.src + base[i] for i, g in enumerate(graphs)])
    d = np.concatenate([g.edges.dst + base[i] for i, g in enumerate(graphs)])
    k = np.concatenate([g.edges.kind.astype(np.int64) for g in graphs])
    w = np.concatenate([g.path_weight * g.unit_ns for g in graphs]).astype(np.int64)
    cpu = np.concatenate([np.repeat(g.clip.stream < 0, 2) for g in graphs])
    thread = np.concatenate([np.repeat(g.clip.tid, 2) for g in graphs])
    participant = np.zeros(len(times), bool)
    present = _arrivals(graphs, participants, base, times, last_of or {}, hung or set())
    for arrivals in present.values():
        for a in arrivals:
            participant[base[a.graph] + 2 * a.row : base[a.graph] + 2 * a.row + 2] = True
    spans = np.nonzero(d == s + 1)[0]  # a row's own span: start node → end node
    span_of = dict(zip(s[spans].tolist(), spans.tolist(), strict=True))
    extra: list[tuple[int, int, int]] = []
    # waiting intervals [arrival, last arrival]: by waiting rank, and by (late rank, waiting
    # rank); a rank's collectives overlap (DDP's buckets), so its wait is their union
    waited: dict[int, list[tuple[int, int]]] = defaultdict(list)
    waited_for: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    last_at: dict[int, int] = defaultdict(int)
    worst: dict[int, tuple[int, str, int]] = {}
    unweighed = w.copy()  # a stand-in's edges lose its waits from their own weight (below)
    for cid, arrivals in present.items():
        last = max(arrivals, key=lambda a: (a.start, -a.rank))
        others = [a for a in arrivals if a is not last]
        lateness = last.start - int(np.median([a.start for a in others]))
        last_at[last.rank] += 1
        if lateness > worst.get(last.rank, (-1, "", -1))[0]:
            ev = int(graphs[last.graph].clip.ev_idx[last.row])
            worst[last.rank] = (lateness, participants.labels[cid], ev)
        last_node = int(base[last.graph]) + 2 * last.row
        for a in others:
            node = int(base[a.graph]) + 2 * a.row
            wait = max(0, last.start - a.start)
            if wait > 0:  # inside the waiter's step: its span may be cut at the step's end
                waiting = (a.start, min(last.start, max(a.end, a.start)))
                waited[a.rank].append(waiting)
                waited_for[(last.rank, a.rank)].append(waiting)
            if a.end < last.start:
                continue  # ended before the last arrival on aligned clocks: no wait to model
            remaining = a.end - last.start
            j = span_of.get(node)
            if j is not None and k[j] == OPERATOR_KERNEL and wait > 0:
                w[j] = remaining
            extra.append((last_node, node + 1, remaining))
    _stand_ins_wait(graphs, base, s, d, w, unweighed, times, waited)
    waits_only = np.concatenate([np.repeat(waits_itself(g.clip), 2) for g in graphs])
    idle = _idle_edges(s, d, k, cpu, thread, participant, waits_only)
    by_graph: dict[int, list[_Arrival]] = defaultdict(list)
    for arrivals in present.values():
        for a in arrivals:
            by_graph[a.graph].append(a)
    for i in range(len(graphs)):
        own = (int(base[i]), int(base[i + 1]))
        extra += _blocked_on_collectives(s, d, w, times, idle, own, by_graph[i])
    s, d, k, w = _append(s, d, k, w, extra)
    _check(s, d, k, w, times, graphs, base, step)
    joined = StepGraph(step, tuple(graphs), base, s, d, k, w, times)
    path = joined.longest()
    touched = np.concatenate([s, d])
    span = int(times[touched].max() - times[touched].min()) if len(touched) else 0
    if path.length > span:
        raise InvariantError(
            f"{step}: cross-rank path {path.length:,} ns over the step's span {span:,} ns"
        )
    n_extra = len(extra)
    edges = tuple(_edge(graphs, base, s, d, k, w, j) for j in path.edges.tolist())
    coll = tuple(_edge(graphs, base, s, d, k, w, j) for j in range(len(s) - n_extra, len(s)))
    rank_ns: dict[int, int] = defaultdict(int)
    for e in edges:
        rank_ns[e.dst_rank] += e.weight_ns
    bound_rank = max(rank_ns, key=lambda r: (rank_ns[r], -r)) if rank_ns else graphs[0].rank
    owners = path_owners(joined, path.edges)  # what both read, worked out once
    segments = step_segments(joined, path.edges, depth, owners)
    bound_op = heaviest_on(segments, bound_rank)
    hot, hot_ns = hotspot(joined, path.edges, bound_rank, owners)
    straggler = None
    waits = {rank: _union(intervals) for rank, intervals in waited.items()}
    for i, g in enumerate(graphs):  # a wait is inside its rank's step: never longer than it
        own_times = times[int(base[i]) : int(base[i + 1])]
        own_span = int(own_times.max() - own_times.min()) if len(own_times) else 0
        if waits.get(g.rank, 0) > own_span:
            raise InvariantError(
                f"{step}: rank {g.rank} waited {waits[g.rank]:,} ns in collectives, longer than "
                f"its step ({own_span:,} ns)"
            )
    caused: dict[int, int] = defaultdict(int)
    for (late, _), intervals in waited_for.items():
        caused[late] += _union(intervals)
    if caused and max(caused.values()) > 0:
        r = max(caused, key=lambda x: (caused[x], -x))
        if worst[r][0] >= LATE_SHARE * path.length:  # else arrival jitter, no straggler
            lateness, at, ev = worst[r]
            straggler = Straggler(r, last_at[r], len(present), lateness, at, caused[r], ev)
    return CrossRankPath(
        step,
        int(path.length),
        edges,
        dict(rank_ns),
        straggler,
        bound_rank,
        bound_op,
        coll,
        {g.rank: int(waits.get(g.rank, 0)) for g in graphs},
        {g.rank: int(offsets.get(g.rank, 0)) for g in graphs},
        span,
        tuple(segments),
        hot,
        hot_ns,
        joined,
        path.edges,
    )


def stands_in(graph: WindowGraph) -> bool:
    """A summary rank's stand-in (`stand_in.py`): its arrivals, not its events."""
    return graph.clip.cat.values == (SUMMARY_CATEGORY,)


def _stand_ins_wait(
    graphs: list[WindowGraph],
    base: np.ndarray,
    s: np.ndarray,
    d: np.ndarray,
    w: np.ndarray,
    unweighed: np.ndarray,
    times: np.ndarray,
    waited: dict[int, list[tuple[int, int]]],
) -> None:
    """A stand-in's edges (its work between arrivals, its arrivals' spans) weigh their time
    less the time its rank is known to have waited in collectives (in place): a wait weighs
    nothing, as on a rank with events."""
    for i, g in enumerate(graphs):
        if not stands_in(g) or not waited.get(g.rank):
            continue
        spans = np.array(waited[g.rank], np.int64)
        union = merged(spans[:, 0], spans[:, 1])
        j = np.nonzero((s >= base[i]) & (s < base[i + 1]))[0]
        covered = covered_between(times[s[j]], times[d[j]], union)
        w[j] = np.maximum(unweighed[j] - covered, 0)


def _union(spans: list[tuple[int, int]]) -> int:
    lo, hi = merged(np.array([a for a, _ in spans]), np.array([b for _, b in spans]))
    return int((hi - lo).sum())


def _aligned_times(graph: WindowGraph, offset_ns: int) -> np.ndarray:
    """Node times in ns on the aligned clock (the rank's offset taken off)."""
    c = graph.clip
    return (node_time_of(c) + c.origin) * c.unit_ns - offset_ns


def _arrivals(
    graphs: list[WindowGraph],
    participants: Participants,
    base: np.ndarray,
    times: np.ndarray,
    last_of: dict[int, int],
    hung: set[int],
) -> dict[int, list[_Arrival]]:
    """Each instance's participants that are nodes of this step's graphs (two or more). An
    instance that crosses steps (a rank of this step takes part in it from another of its
    steps: after a collective some rank skipped, NCCL pairs each rank's k-th) is a join here
    only where its last arrival (`last_of`) is one of them: else the others waited on a rank's
    other step, the divergence (`unmatched` in the report), not on a late rank of this one.
    Instances in `hung` (`never_completed`) are no join."""
    found: dict[int, list[_Arrival]] = defaultdict(list)
    elsewhere: set[int] = set()
    for i, g in enumerate(graphs):
        cids, evs = participants.of_rank(g.rank)
        rows = g.clip.position_of(evs)
        elsewhere.update(cids[rows < 0].tolist())
        spanned = _rows_with_span(g)
        for cid, row in zip(cids[rows >= 0].tolist(), rows[rows >= 0].tolist(), strict=True):
            if row in spanned:
                node = int(base[i]) + 2 * row
                found[cid].append(_Arrival(g.rank, i, row, int(times[node]), int(times[node + 1])))
    return {
        cid: arrivals
        for cid, arrivals in found.items()
        if len(arrivals) >= 2
        and cid not in hung
        and (cid not in elsewhere or last_of.get(cid) in {a.rank for a in arrivals})
    }


def _rows_with_span(graph: WindowGraph) -> set[int]:
    """Rows whose start → end edge is in the graph (a collective without one is not modelled)."""
    e = graph.edges
    return set((e.src[e.dst == e.src + 1] // 2).tolist())


def _idle_edges(
    s: np.ndarray,
    d: np.ndarray,
    k: np.ndarray,
    cpu: np.ndarray,
    thread: np.ndarray,
    participant: np.ndarray,
    waits_only: np.ndarray,
) -> np.ndarray:
    """Edges that may be a wait: between two boundaries of one CPU thread (not a leaf op's own
    span, unless it only waits or is an annotation, which does no work itself), a launch (a gloo
    range's queue, too) or a GPU stream gap; none from a collective's node or into a collective's
    end (its own span is dealt with apart)."""
    leaf_span = (d == s + 1) & (s % 2 == 0) & ~waits_only[s]
    on_thread = cpu[s] & cpu[d] & (thread[s] == thread[d]) & ~leaf_span
    launch_or_gap = np.isin(k, (KERNEL_KERNEL_DELAY, KERNEL_LAUNCH_DELAY))
    into_end = participant[d] & (d % 2 == 1)
    return (on_thread | launch_or_gap) & ~participant[s] & ~into_end


def _blocked_on_collectives(
    s: np.ndarray,
    d: np.ndarray,
    w: np.ndarray,
    times: np.ndarray,
    idle: np.ndarray,
    nodes: tuple[int, int],
    arrivals: list[_Arrival],
) -> list[tuple[int, int, int]]:
    """One rank's idle edges that resumed after one of its collectives ended (see the module
    docstring): each loses its time while the rank's collectives were in flight (in place), and
    the collective's end → the edge's end edges are returned."""
    if not arrivals:
        return []
    starts = np.array([a.start for a in arrivals], np.int64)
    ends = np.array([a.end for a in arrivals], np.int64)
    end_node = np.array([nodes[0] + 2 * a.row + 1 for a in arrivals], np.int64)
    in_flight = merged(starts, ends)
    order = np.argsort(ends, kind="stable")
    ends, end_node = ends[order], end_node[order]
    j = np.nonzero(idle & (s >= nodes[0]) & (s < nodes[1]))[0]
    ta, tb = times[s[j]], times[d[j]]
    at = np.searchsorted(ends, tb, side="right") - 1  # the last collective end at or before
    ended = ends[np.maximum(at, 0)]
    hit = (at >= 0) & (ended > ta) & (tb - ended <= RESUME_NS)
    j, ta, tb, at, ended = j[hit], ta[hit], tb[hit], at[hit], ended[hit]
    blocked = covered_between(ta, ended, in_flight)
    w[j] = np.maximum(w[j] - blocked, 0)
    return list(zip(end_node[at].tolist(), d[j].tolist(), (tb - ended).tolist(), strict=True))


def _append(
    s: np.ndarray, d: np.ndarray, k: np.ndarray, w: np.ndarray, extra: list[tuple[int, int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if not extra:
        return s, d, k, w
    e = np.array(extra, np.int64).reshape(-1, 3)
    return (
        np.concatenate([s, e[:, 0]]),
        np.concatenate([d, e[:, 1]]),
        np.concatenate([k, np.full(len(e), COLLECTIVE_DEPENDENCY, np.int64)]),
        np.concatenate([w, e[:, 2]]),
    )


def _check(
    s: np.ndarray,
    d: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    times: np.ndarray,
    graphs: list[WindowGraph],
    base: np.ndarray,
    step: str,
) -> None:
    """Every edge forward in aligned time, every weight within [0, Δt]."""
    delta = times[d] - times[s]
    bad = np.nonzero((delta < 0) | (w < 0) | (w > np.maximum(delta, 0)))[0]
    if len(bad):
        e = _edge(graphs, base, s, d, k, w, int(bad[0]))
        raise InvariantError(
            f"{step}: {len(bad)} cross-rank edge(s) break time order, first: "
            f"{TYPE_NAMES[e.kind]} rank {e.src_rank} ev_idx {e.src_ev_idx} "
            f"({'start' if e.src_start else 'end'}) → rank {e.dst_rank} ev_idx {e.dst_ev_idx} "
            f"({'start' if e.dst_start else 'end'}): Δt {int(delta[bad[0]]):,} ns, "
            f"weight {int(w[bad[0]]):,} ns"
        )


def _edge(
    graphs: list[WindowGraph],
    base: np.ndarray,
    s: np.ndarray,
    d: np.ndarray,
    k: np.ndarray,
    w: np.ndarray,
    j: int,
) -> PathEdge:
    def locate(node: int) -> tuple[int, int, bool, str | None]:
        i = int(np.searchsorted(base, node, side="right")) - 1
        local = node - int(base[i])
        clip = graphs[i].clip
        label = NODE_LABEL.get(int(clip.kind[local // 2]))
        return graphs[i].rank, int(clip.ev_idx[local // 2]), local % 2 == 0, label

    a, b = locate(int(s[j])), locate(int(d[j]))
    return PathEdge(a[0], a[1], a[2], b[0], b[1], b[2], int(k[j]), int(w[j]), a[3], b[3])
