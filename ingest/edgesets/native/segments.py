"""A critical path collapsed into the units a person acts on.

Every path edge belongs to a rank and to the chain of ranges that enclose its time on its
timeline, outermost first: annotations (`record_function` ranges, but not the step's own
`ProfilerStep#N`), `nn.Module` frames and ops (`cpu_op`, runtime calls), then, for GPU time, the
kernel. A GPU edge's chain is its launching call's, plus the kernel. Consecutive path edges of
one rank with the same outermost range make a top-level segment; its parts are its edges grouped
the same way by the next range down, and so on. Time with no range of its own is named by what
it was: `communication` (a collective's time after its last participant arrived, crossing
ranks), `GPU idle`, or, on a CPU thread, the innermost python frame over it (a
`<built-in function collect>`), else `(no op)`.

Segments at every level sum exactly to their parent (the top level: to the path). No level has
more than `MAX_LINES` segments: past that, runs of consecutive small ones fold into one line
whose parts they are; and at any level, two or more consecutive segments each under
`SMALL_SHARE` of the path fold the same way (the dispatch gaps between ops are no lines of
their own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ...python_frames import readable
from .edges import KERNEL_KERNEL_DELAY, KERNEL_LAUNCH_DELAY
from .frame import KIND_KERNEL, KIND_SYNC
from .graph import WindowGraph
from .invariants import node_time_of
from .savings import Savings
from .step_graph import StepGraph
from .window import STEP_ANNOTATION

MAX_LINES = 15
DEFAULT_DEPTH = 3
STORED_DEPTH = 2  # what an edge set keeps of each path (`tracegraph path` computes any depth)
SAVING_SHARE = 0.01  # segments of at least this share of the path get their saving computed
SMALL_SHARE = 0.01  # consecutive segments each under this share of the path fold into one line
MODULE_FRAME = "nn.Module: "
COMMUNICATION, GPU_IDLE, NO_OP = "communication", "GPU idle", "(no op)"


@dataclass(frozen=True)
class Segment:
    """Consecutive path time of one rank under one range (or of one kind, where no range)."""

    rank: int
    name: str
    kind: str  # "range" | "communication" | "idle" | "other" | "folded"
    ns: int
    first: int  # its first path edge (position on the path)
    last: int  # one past its last path edge
    ev_idx: int | None = None  # the range's event (None: no range)
    thread: int | None = None  # the range's thread (tid), for a range
    saving_ns: int | None = None  # the step time saved with this work taking no time
    children: tuple[Segment, ...] = field(default_factory=tuple)
    # its work, as (graph index, row) ranges of the step graph (in memory only)
    rows: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False)

    def to_json(self, depth: int | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "rank": self.rank,
            "name": self.name,
            "kind": self.kind,
            "ns": self.ns,
            "path_edges": [self.first, self.last],
            "ev_idx": self.ev_idx,
            "saving_ns": self.saving_ns,
        }
        if self.children and (depth is None or depth > 1):
            below = None if depth is None else depth - 1
            out["children"] = [c.to_json(below) for c in self.children]
        return out

    @staticmethod
    def of_json(data: dict[str, object]) -> Segment:
        bounds: Sequence[int] = data.get("path_edges") or (0, 0)  # type: ignore[assignment]
        first, last = bounds
        return Segment(
            int(data["rank"]),  # type: ignore[call-overload]
            str(data["name"]),
            str(data["kind"]),
            int(data["ns"]),  # type: ignore[call-overload]
            int(first),
            int(last),
            data.get("ev_idx"),  # type: ignore[arg-type]
            None,
            data.get("saving_ns"),  # type: ignore[arg-type]
            tuple(Segment.of_json(c) for c in data.get("children") or ()),  # type: ignore[attr-defined]
        )


@dataclass(frozen=True)
class Owner:
    """What one path edge's time belongs to."""

    rank: int
    chain: tuple[tuple[int, int], ...]  # (graph index, row) outermost first
    label: str  # what the time was where the chain ends (or where there is none)
    label_row: tuple[int, int] | None = None  # the python frame the label names


def path_segments(
    graph: StepGraph,
    path: np.ndarray,
    depth: int = DEFAULT_DEPTH,
    owners: list[Owner] | None = None,
) -> list[Segment]:
    """The path's edges (indices into `graph`, in path order) as segments, `depth` levels
    (`owners`: the path's `path_owners`, where the caller has them)."""
    owners = owners if owners is not None else path_owners(graph, path)
    segments = _group(graph, owners, graph.weight[path], 0, len(path), 0, depth)
    return _fold_small(segments, int(graph.weight[path].sum() * SMALL_SHARE))


def _group(
    graph: StepGraph,
    owners: list[Owner],
    weight: np.ndarray,
    lo: int,
    hi: int,
    level: int,
    depth: int,
) -> list[Segment]:
    out: list[Segment] = []
    i = lo
    while i < hi:
        key = _key(owners[i], level)
        j = i + 1
        while j < hi and _key(owners[j], level) == key:
            j += 1
        out.append(_segment(graph, owners, weight, i, j, level, depth))
        i = j
    return _fold(_coalesce(out) if level == 0 else out)


def _key(owner: Owner, level: int) -> tuple[object, ...]:
    if level < len(owner.chain):
        return (owner.rank, "range", owner.chain[level])
    return (owner.rank, "label", owner.label)


def _segment(
    graph: StepGraph,
    owners: list[Owner],
    weight: np.ndarray,
    i: int,
    j: int,
    level: int,
    depth: int,
) -> Segment:
    owner = owners[i]
    ns = int(weight[i:j].sum())
    children: tuple[Segment, ...] = ()
    if level + 1 < depth and j - i > 1:
        parts = _group(graph, owners, weight, i, j, level + 1, depth)
        if len(parts) > 1:
            children = tuple(parts)
    if level < len(owner.chain):
        g, row = owner.chain[level]
        clip = graph.graphs[g].clip
        return Segment(
            owner.rank,
            clip.name.at(row),
            "range",
            ns,
            i,
            j,
            int(clip.ev_idx[row]),
            int(clip.tid[row]),
            children=children,
            rows=((g, row),),
        )
    kind = {COMMUNICATION: "communication", GPU_IDLE: "idle", NO_OP: "idle"}.get(
        owner.label, "other"
    )
    frames = tuple(dict.fromkeys(o.label_row for o in owners[i:j] if o.label_row is not None))
    ev_idx = int(graph.graphs[frames[0][0]].clip.ev_idx[frames[0][1]]) if frames else None
    return Segment(owner.rank, owner.label, kind, ns, i, j, ev_idx, children=children, rows=frames)


def family(name: str) -> str:
    """What ranges of one kind share: `autograd::engine::evaluate_function: AddmmBackward0` →
    `autograd::engine::evaluate_function`, `aten::mm` → `aten`, `Optimizer.step#SGD.step` →
    `Optimizer.step`."""
    if ": " in name:
        return name.split(": ", 1)[0]
    if "::" in name:
        return name.rsplit("::", 1)[0]
    return name.split("#", 1)[0].strip() or name  # `## forward ##`: a family of its own


def _coalesce(segments: list[Segment]) -> list[Segment]:
    """Top-level ranges of one rank and family in a row (the autograd nodes of a backward pass
    with no annotation around it, the small ops of a loss), with the gaps between them, as one
    segment whose parts they are."""
    out: list[Segment] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        if first.kind != "range":
            out.append(first)
            i += 1
            continue
        group, j, last_range = [first], i + 1, i
        while j < len(segments) and segments[j].rank == first.rank:
            if segments[j].kind == "range":
                if family(segments[j].name) != family(first.name):
                    break
                last_range = j
            elif segments[j].kind not in ("idle", "other"):
                break
            group.append(segments[j])
            j += 1
        members = group[: last_range - i + 1]  # gaps after the last range stay outside
        ranges = [m for m in members if m.kind == "range"]
        if len(ranges) < 2:
            out.append(first)
            i += 1
            continue
        names = {m.name for m in ranges}
        name = ranges[0].name if len(names) == 1 else family(first.name) + "…"
        out.append(_over(members, first.rank, f"{name} ×{len(ranges)}", "range"))
        i = last_range + 1
    return out


def _fold_small(segments: Sequence[Segment], small_ns: int) -> list[Segment]:
    """At every level, runs of two or more consecutive segments each under `small_ns` (the
    dispatch gaps between ops, a handful of tiny ops) as one folded line; a level that is all
    small stays as it is (it is already a folded line's, or a small segment's, parts)."""
    small = [s.ns < small_ns for s in segments]
    out: list[Segment] = []
    i = 0
    while i < len(segments):
        j = i + 1
        if small[i]:
            while j < len(segments) and small[j]:
                j += 1
        if j - i >= 2 and j - i < len(segments):
            run = [_folded(list(segments[i:j]))]
        else:
            run = list(segments[i:j])
        out.extend(
            replace(s, children=tuple(_fold_small(s.children, small_ns))) if s.children else s
            for s in run
        )
        i = j
    return out


def _fold(segments: list[Segment]) -> list[Segment]:
    """At most MAX_LINES: the largest kept, runs of consecutive smaller ones folded (where none
    stands out, consecutive chunks)."""
    if len(segments) <= MAX_LINES:
        return segments
    sizes = sorted((s.ns for s in segments), reverse=True)
    for kept in range(MAX_LINES - 1, 0, -1):
        big = [s.ns >= sizes[kept - 1] for s in segments]
        if sum(big) > kept:
            continue  # ties at the floor: keep fewer
        if _lines(big) <= MAX_LINES:  # counted first: each folded line builds its own parts
            return _fold_runs(segments, big)
    size = -(-len(segments) // MAX_LINES)
    return [_folded(segments[i : i + size]) for i in range(0, len(segments), size)]


def _lines(big: list[bool]) -> int:
    """The lines `_fold_runs` gives: each kept segment, and one per run of the others."""
    return sum(big) + sum(1 for i, keep in enumerate(big) if not keep and (i == 0 or big[i - 1]))


def _fold_runs(segments: list[Segment], big: list[bool]) -> list[Segment]:
    out: list[Segment] = []
    run: list[Segment] = []
    for s, keep in zip(segments, big, strict=True):
        if keep:
            if run:
                out.append(_folded(run))
            out.append(s)
            run = []
        else:
            run.append(s)
    if run:
        out.append(_folded(run))
    return out


def _folded(run: list[Segment]) -> Segment:
    """One line for consecutive segments (shorter than what they came from: folding ends)."""
    if len(run) == 1:
        return run[0]
    ranks = sorted({s.rank for s in run})
    return _over(run, ranks[0] if len(ranks) == 1 else -1, f"{len(run)} smaller segments", "folded")


def _over(members: list[Segment], rank: int, name: str, kind: str) -> Segment:
    """One segment whose parts are these consecutive ones (at most MAX_LINES of them)."""
    return Segment(
        rank,
        name,
        kind,
        sum(m.ns for m in members),
        members[0].first,
        members[-1].last,
        children=tuple(_fold(members)),
        rows=tuple(r for m in members for r in m.rows),
    )


def path_owners(graph: StepGraph, path: np.ndarray) -> list[Owner]:
    """What each path edge's time belongs to (its rank, enclosing ranges and label).

    Worked out a rank graph at a time, over arrays: a path has up to ~10^5 edges a step, and
    equal owners (the same innermost range and frame) are one object."""
    src, dst = graph.src[path], graph.dst[path]
    gs, gd = graph.graph_of(src), graph.graph_of(dst)
    kind = graph.kind[path]
    out: list[Owner | None] = [None] * len(path)
    crossing = np.nonzero(gs != gd)[0]
    for i, b in zip(crossing.tolist(), gd[crossing].tolist(), strict=True):
        # a collective's time after its last participant arrived
        out[i] = Owner(graph.graphs[b].rank, (), COMMUNICATION)
    for b in np.unique(gd[gs == gd]).tolist():
        at = np.nonzero((gd == b) & (gs == b))[0]
        n = _Nesting(graph.graphs[b], b)
        base = int(graph.base[b])
        _rank_owners(n, graph.graphs[b].rank, at, src[at] - base, dst[at] - base, kind[at], out)
    return out  # type: ignore[return-value]


def _rank_owners(
    n: _Nesting,
    rank: int,
    at: np.ndarray,
    ls: np.ndarray,
    ld: np.ndarray,
    kind: np.ndarray,
    out: list[Owner | None],
) -> None:
    """The owners of one rank graph's path edges (positions `at`, nodes ls → ld)."""
    rs, rd = ls // 2, ld // 2
    both_gpu = n.gpu[rs] & n.gpu[rd]
    own_span = both_gpu & (ld == ls + 1) & (ls % 2 == 0)  # a GPU row's own span: its work
    launch = ~both_gpu & ((kind == KERNEL_LAUNCH_DELAY) | n.gpu[rd])  # the launching call's
    sync = ~both_gpu & ~launch & n.gpu[rs]  # GPU → CPU: the CPU call that waited
    cpu = ~both_gpu & ~launch & ~sync
    # another thread resumed (a collective's completion): its time from where it resumed
    resumed = cpu & (n.tid[rs] != n.tid[rd])
    # the row and node span whose enclosing ranges own the time
    row = np.where(launch | (cpu & ~resumed), rs, rd)
    lo = np.where(launch | (cpu & ~resumed), ls, ld)
    hi = np.where(cpu & ~resumed, ld, lo)

    gpu_rows = np.nonzero(both_gpu)[0]
    launchers = n.launch_chains(rd[gpu_rows])
    idle = kind[gpu_rows] == KERNEL_KERNEL_DELAY
    for j, chain, own, is_idle in zip(
        gpu_rows.tolist(), launchers, own_span[gpu_rows].tolist(), idle.tolist(), strict=True
    ):
        r = int(rd[j])
        if own:
            out[int(at[j])] = Owner(rank, chain + ((n.index, r),), n.clip.name.at(r))
        else:
            out[int(at[j])] = Owner(rank, chain, GPU_IDLE if is_idle else "GPU")

    ranged = np.nonzero(~both_gpu)[0]
    inner = n.innermost(row[ranged], lo[ranged], hi[ranged])
    within = np.full(len(ranged), -1, np.int64)
    on_cpu = cpu[ranged]
    within[on_cpu] = n.python_within(row[ranged][on_cpu], lo[ranged][on_cpu], hi[ranged][on_cpu])
    what = np.where(launch[ranged], 1, np.where(sync[ranged], 2, 0))
    made: dict[tuple[int, int, int], Owner] = {}
    for j, x, frame, w in zip(
        at[ranged].tolist(), inner.tolist(), within.tolist(), what.tolist(), strict=True
    ):
        key = (w, x, frame)
        owner = made.get(key)
        if owner is None:
            owner = made[key] = n.owner(rank, x, frame, w)
        out[j] = owner


class _Nesting:
    """One rank graph's CPU ranges, thread by thread, for "which ranges enclose this time"."""

    def __init__(self, graph: WindowGraph, index: int) -> None:
        c = graph.clip
        self.clip, self.index = c, index
        self.gpu = (c.kind == KIND_KERNEL) | (c.kind == KIND_SYNC) | (c.stream >= 0)
        self.tid = c.tid
        self.node_time = node_time_of(c)
        self.ts, self.end = self.node_time[0::2], self.node_time[1::2]
        cpu = np.nonzero(~self.gpu)[0]
        order = cpu[np.lexsort((-(self.end[cpu] - self.ts[cpu]), self.ts[cpu], c.tid[cpu]))]
        self.parent = np.full(c.n, -1, np.int64)
        stack: list[int] = []
        thread = None
        ts_l, end_l, tid_l = self.ts.tolist(), self.end.tolist(), c.tid.tolist()
        for r in order.tolist():
            if tid_l[r] != thread:
                stack, thread = [], tid_l[r]
            while stack and not (ts_l[stack[-1]] <= ts_l[r] and end_l[stack[-1]] >= end_l[r]):
                stack.pop()
            self.parent[r] = stack[-1] if stack else -1
            stack.append(r)
        self.by_thread = {int(t): order[c.tid[order] == t] for t in np.unique(c.tid[cpu])}
        self.ts_by_thread = {t: self.ts[rows] for t, rows in self.by_thread.items()}
        self.python = c.cat_in(("python_function",))
        frames = np.nonzero(self.python & ~c.name.contains(MODULE_FRAME))[0]
        frames = frames[np.lexsort((frames, self.ts[frames]))]
        self.python_by_thread = {
            int(t): frames[c.tid[frames] == t] for t in np.unique(c.tid[frames])
        }
        self.python_ts = {t: self.ts[rows] for t, rows in self.python_by_thread.items()}
        self.meaningful = ~c.name.contains(STEP_ANNOTATION + "#") & (
            ~self.python | c.name.contains(MODULE_FRAME)
        )
        # Python lists and caches for the walks up a range's parents (numpy's scalar indexing
        # costs ~10x a list's)
        self._parent = self.parent.tolist()
        self._meaningful, self._python = self.meaningful.tolist(), self.python.tolist()
        self._chains: dict[int, tuple[tuple[int, int], ...]] = {-1: ()}
        self._frames: dict[int, int] = {-1: -1}
        self._labels: dict[int, str] = {}

    def innermost(self, rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per row, the innermost range of its thread that contains the nodes' times [a, b],
        -1 if none: from the last range to start by a, up its parents to the first that lasts
        to b (a parent contains its children, so every one above it contains [a, b] too)."""
        x = np.full(len(rows), -1, np.int64)
        ta, tb = self.node_time[a], self.node_time[b]
        threads = self.tid[rows]
        for thread in np.unique(threads).tolist():
            on = np.nonzero(threads == thread)[0]
            ranges = self.by_thread.get(thread)
            if ranges is None:
                continue
            last = np.searchsorted(self.ts_by_thread[thread], ta[on], side="right") - 1
            x[on] = np.where(last >= 0, ranges[np.maximum(last, 0)], -1)
        while True:
            short = np.nonzero(x >= 0)[0]
            short = short[self.end[x[short]] < tb[short]]
            if not len(short):
                return x
            x[short] = self.parent[x[short]]

    def python_within(self, rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per row, the python frame inside the nodes' times [a, b] on its thread that covers
        most of it (a `gc.collect()` between two ops), -1 if none."""
        best = np.full(len(rows), -1, np.int64)
        ta, tb = self.node_time[a], self.node_time[b]
        threads = self.tid[rows]
        for thread in np.unique(threads).tolist():
            frames = self.python_by_thread.get(thread)
            if frames is None:
                continue
            on = np.nonzero((threads == thread) & (b > a))[0]
            starts = self.python_ts[thread]
            first = np.searchsorted(starts, ta[on], side="left")
            stop = np.searchsorted(starts, tb[on], side="left")
            some = np.nonzero(stop > first)[0]  # few: most spans hold no frame
            for j, i0, i1 in zip(
                on[some].tolist(), first[some].tolist(), stop[some].tolist(), strict=True
            ):
                overlap = np.minimum(self.end[frames[i0:i1]], tb[j]) - starts[i0:i1]
                k = int(np.argmax(overlap))  # the first of equals, as before
                if overlap[k] > 0:
                    best[j] = frames[i0 + k]
        return best

    def _chain(self, x: int) -> tuple[tuple[int, int], ...]:
        """The meaningful ranges of x and its parents, outermost first (each row's once)."""
        if x not in self._chains:
            up = [x]  # x and the parents above it not yet known, then filled top down
            while self._parent[up[-1]] not in self._chains:
                up.append(self._parent[up[-1]])
            for y in reversed(up):
                above = self._chains[self._parent[y]]
                self._chains[y] = above + ((self.index, y),) if self._meaningful[y] else above
        return self._chains[x]

    def _frame(self, x: int) -> int:
        """The innermost python frame (not a module's) of x and its parents, -1 if none."""
        if x not in self._frames:
            up = [x]
            while self._parent[up[-1]] not in self._frames:
                up.append(self._parent[up[-1]])
            for y in reversed(up):
                own = self._python[y] and not self._meaningful[y]
                self._frames[y] = y if own else self._frames[self._parent[y]]
        return self._frames[x]

    def owner(self, rank: int, x: int, within: int, what: int) -> Owner:
        """The owner of time whose innermost range is x (-1: none): a launch's (`what` 1), a
        sync's (2), else time on a CPU thread, named by the python frame `within` it (-1:
        none) or, failing that, over it."""
        chain = self._chain(x)
        if what:
            return Owner(rank, chain, "launch" if what == 1 else "sync")
        frame = within if within >= 0 else self._frame(x)
        if frame < 0:
            return Owner(rank, chain, NO_OP)
        return Owner(rank, chain, self._label(frame), (self.index, frame))

    def _label(self, frame: int) -> str:
        if frame not in self._labels:
            self._labels[frame] = readable(self.clip.name.at(frame))
        return self._labels[frame]

    def launch_chains(self, gpu_rows: np.ndarray) -> list[tuple[tuple[int, int], ...]]:
        """Per GPU row, the chain of the call that launched it, the call included."""
        c = self.clip
        launcher = c.position_of(c.index_correlation[gpu_rows])
        known = launcher >= 0
        known[known] = ~self.gpu[launcher[known]]
        x = np.full(len(gpu_rows), -1, np.int64)
        calls = launcher[known]
        x[known] = self.innermost(calls, 2 * calls, 2 * calls + 1)
        return [
            self._chain(v) if k else () for v, k in zip(x.tolist(), known.tolist(), strict=True)
        ]


def step_segments(
    graph: StepGraph,
    path: np.ndarray,
    depth: int = STORED_DEPTH,
    owners: list[Owner] | None = None,
) -> list[Segment]:
    """The path's segments to `depth` levels, each of at least SAVING_SHARE of the path with
    its saving."""
    segments = path_segments(graph, path, depth, owners)
    total = int(graph.weight[path].sum())
    if total <= 0:
        return segments
    savings = Savings(graph, path)
    return with_savings(segments, savings, path, max(1, int(total * SAVING_SHARE)), depth)


def hotspot(
    graph: StepGraph, path: np.ndarray, rank: int, owners: list[Owner] | None = None
) -> tuple[str, int]:
    """The innermost range (a kernel, an op, a python frame) with the most path time on `rank`
    summed over the whole path, and that time: where a segment's time mostly went."""
    owners = owners if owners is not None else path_owners(graph, path)
    weight = graph.weight[path].tolist()
    by_name: dict[str, int] = {}
    for owner, w in zip(owners, weight, strict=True):
        if owner.rank != rank or owner.label in (COMMUNICATION, GPU_IDLE):
            continue
        if owner.label not in (NO_OP, "launch", "sync", "GPU") or not owner.chain:
            name = owner.label
        else:
            g, row = owner.chain[-1]
            name = readable(graph.graphs[g].clip.name.at(row))
        by_name[name] = by_name.get(name, 0) + int(w)
    if not by_name:
        return "", 0
    name = max(by_name, key=lambda n: (by_name[n], n))
    return name, by_name[name]


def heaviest_on(segments: Sequence[Segment], rank: int) -> str:
    """The name of the top-level segment with the most path time on `rank` ("" if none)."""
    mine = [s for s in segments if s.rank == rank]
    return max(mine, key=lambda s: s.ns).name if mine else ""


def with_savings(
    segments: Sequence[Segment],
    savings: Savings,
    path: np.ndarray,
    floor_ns: int,
    depth: int = STORED_DEPTH,
) -> list[Segment]:
    """Segments (and parts, `depth` levels of them) of at least `floor_ns` with what taking
    their work away saves: its ranges' work where it has ranges, else its own path edges
    (communication, idle). Deeper parts (a folded line's) are left without."""
    out = []
    for seg in segments:
        children = seg.children
        if depth > 1:
            children = tuple(with_savings(seg.children, savings, path, floor_ns, depth - 1))
        saving = None
        if seg.ns >= floor_ns:
            if seg.rows:
                saving = savings.of_ranges(seg.rows)
            else:
                saving = savings.of_edges(path[seg.first : seg.last])
        out.append(replace(seg, saving_ns=saving, children=children))
    return out


def flatten(segments: Sequence[Segment]) -> list[Segment]:
    """Every segment, parents before their parts."""
    out: list[Segment] = []
    for s in segments:
        out.append(s)
        out += flatten(s.children)
    return out
