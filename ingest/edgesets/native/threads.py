"""A thread blocked on another thread of its rank waits; the other thread's work is the path.

The main thread sits in `## backward ##` (or `run_backward`) while the autograd engine's thread
runs the backward pass; DDP's main thread sits in a gap while a gloo worker runs the all-reduce;
a `DataLoader.__next__` waits on a worker. In HTA's graph the waiting thread's span is its own
work (0.6.x merges the backward thread into the forward one instead; nothing else). Plain
native reads the blocking from the threads' activity: an edge of thread A with no node of A
inside it (an annotation's own span counts: an annotation does no work itself) was blocked on
thread B of the same rank when
- B worked through at least `COVERED` of it: from its first node inside the edge to the node
  that released A (B's own gaps there are B's to explain: it may wait in turn, on the GPU or a
  collective),
- B's work ended within `RESUME_NS` (or `RESUME_SHARE` of the edge, for a long wait) before A
  resumed, or a collective in flight when B's work ended did, and B then stayed idle for
  `IDLE_NS` (B handed back; a thread that is always busy hands nothing back).
The edge then loses that span of B's, and two `thread_dependency` edges carry the path
through B: A's last node → B's first node inside the edge, and B's last node → A's resume, each
weighing its own Δt. Only edges of at least `MIN_BLOCKED_NS` are looked at.
"""

from __future__ import annotations

import numpy as np

from .edges import THREAD_DEPENDENCY, Edges
from .frame import Frame
from .invariants import node_time_of
from .stacks import thread_ids

MIN_BLOCKED_NS = 100_000
COLLECTIVE_RANGES = ("gloo:", "nccl:", "rccl:")
# Ops whose own span only waits for a collective to complete.
WAIT_OPS = ("_c10d_functional::wait_tensor", "c10d::wait", "c10d_functional::wait_tensor")
COVERED = 0.5
RESUME_NS = 5_000_000  # as crossrank's: a thread woken by another resumes within this,
RESUME_SHARE = 0.05  # or within this share of the time it waited (hooks, Python after it)
IDLE_NS = 1_000_000


def waits_itself(clip: Frame) -> np.ndarray:
    """Rows whose own span is no work of theirs: annotations (but a collective's range, which
    is the collective), and ops that only wait for a collective."""
    annotation = clip.cat_in(("user_annotation",))
    collective = np.isin(
        clip.name.codes,
        [i for i, v in enumerate(clip.name.values) if v and v.startswith(COLLECTIVE_RANGES)],
    )
    return (annotation & ~collective) | clip.name_in(WAIT_OPS)


def thread_handoffs(clip: Frame, has_node: np.ndarray, edges: Edges) -> Edges:
    """`edges` with blocked edges' weights cut and the handoff edges appended."""
    cpu = (clip.stream < 0) & has_node
    thread, _ = thread_ids(clip.pid, clip.tid)  # (pid, tid): a DataLoader worker's own pid
    threads = np.unique(thread[cpu])
    if len(threads) < 2 or len(edges) == 0:
        return edges
    t = node_time_of(clip)
    unit = clip.unit_ns
    src, dst = edges.src, edges.dst
    rs, rd = src // 2, dst // 2
    own_span = (dst == src + 1) & (src % 2 == 0) & ~waits_itself(clip)[rs]
    long = (t[dst] - t[src]) * unit >= MIN_BLOCKED_NS
    candidates = np.nonzero(
        cpu[rs] & cpu[rd] & (thread[rs] == thread[rd]) & ~own_span & long & (edges.weight > 0)
    )[0]
    if len(candidates) == 0:
        return edges
    busy = {int(b): _Thread(t, cpu & (thread == b)) for b in threads}
    collectives = _Collectives(clip, has_node, t)
    weight = edges.weight.copy()
    added: list[tuple[int, int, int]] = []
    for j in candidates.tolist():
        a, b = int(t[src[j]]), int(t[dst[j]])
        best, best_cover, handoff = None, 0, (-1, -1)
        for tid, other in busy.items():
            if tid == int(thread[rs[j]]):
                continue
            first = other.first_start_in(a, b)
            release = other.release(a, b, unit, collectives)
            if first < 0 or release < 0:
                continue
            cover = int(t[release]) - int(t[first])  # B worked (or waited in turn) all along
            if cover >= COVERED * (b - a) and cover > best_cover:
                best, best_cover, handoff = other, cover, (first, release)
        first, release = handoff
        # strictly forward: an edge between two nodes of one instant could close a cycle
        if best is None or not (int(t[first]) > a and b > int(t[release])):
            continue
        weight[j] = max(0, int(weight[j]) - best_cover)
        added.append((int(src[j]), first, int(t[first]) - a))
        added.append((release, int(dst[j]), b - int(t[release])))
    if not added:
        return Edges(edges.src, edges.dst, edges.kind, weight)
    extra = np.array(added, np.int64)
    return Edges(
        np.concatenate([edges.src, extra[:, 0]]),
        np.concatenate([edges.dst, extra[:, 1]]),
        np.concatenate([edges.kind, np.full(len(extra), THREAD_DEPENDENCY, edges.kind.dtype)]),
        np.concatenate([weight, extra[:, 2]]),
    )


class _Collectives:
    """The rank's collectives (NCCL/RCCL kernels, gloo ranges) with nodes: a thread that handed
    back while one it started was in flight is released by that collective's end."""

    def __init__(self, clip: Frame, has_node: np.ndarray, t: np.ndarray) -> None:
        names = [i for i, v in enumerate(clip.name.values) if v and v.lower().startswith(
            ("nccl", "rccl", "gloo:"))]  # fmt: skip
        rows = np.nonzero(np.isin(clip.name.codes, names) & has_node)[0]
        self.rows = rows[np.argsort(t[2 * rows + 1], kind="stable")]
        self.start = t[2 * self.rows]
        self.end = t[2 * self.rows + 1]

    def last_in_flight(self, at: int, until: int) -> int:
        """The end node of the collective in flight at `at` that ends last, by `until` (-1)."""
        hi = int(np.searchsorted(self.end, until, side="right"))
        live = np.nonzero((self.start[:hi] <= at) & (self.end[:hi] > at))[0]
        return int(2 * self.rows[live[-1]] + 1) if len(live) else -1


class _Thread:
    """One thread's nodes: when it was busy, where its work starts and ends."""

    def __init__(self, t: np.ndarray, rows: np.ndarray) -> None:
        mine = np.nonzero(rows)[0]
        self.starts = mine[np.argsort(t[2 * mine], kind="stable")]
        self.ends = mine[np.argsort(t[2 * mine + 1], kind="stable")]
        self.t = t
        self.start_t = t[2 * self.starts]
        self.end_t = t[2 * self.ends + 1]

    def release(self, a: int, b: int, unit: int, collectives: _Collectives) -> int:
        """The node that released the waiting thread at `b` (-1: none): this thread's last end
        in [a, b], once it then idled IDLE_NS, if within RESUME_NS of b; else the end of a
        collective in flight at that last end, within RESUME_NS of b."""
        k = int(np.searchsorted(self.end_t, b, side="right")) - 1
        if k < 0 or self.end_t[k] < a:
            return -1
        after = int(np.searchsorted(self.start_t, self.end_t[k], side="right"))
        if after < len(self.start_t) and (self.start_t[after] - b) * unit < IDLE_NS:
            return -1  # it went on working: it handed nothing back
        last_end = int(2 * self.ends[k] + 1)
        lag = max(RESUME_NS, RESUME_SHARE * (b - a) * unit)
        if (b - self.end_t[k]) * unit <= lag:
            return last_end
        carried = collectives.last_in_flight(int(self.end_t[k]), b)
        if carried >= 0 and (b - int(self.t[carried])) * unit <= lag:
            return carried
        return -1

    def first_start_in(self, a: int, b: int) -> int:
        k = int(np.searchsorted(self.start_t, a, side="left"))
        return int(2 * self.starts[k]) if k < len(self.starts) and self.start_t[k] <= b else -1
