"""A thread blocked on another thread of its rank waits; the other thread's work is the path.

The main thread sits in `## backward ##` (or `run_backward`) while the autograd engine's thread
runs the backward pass; DDP's main thread sits in a gap while a gloo worker runs the all-reduce;
a `DataLoader.__next__` waits on a worker. In HTA's graph the waiting thread's span is its own
work (0.6.x merges the backward thread into the forward one instead; nothing else). Plain
native reads the blocking from the threads' activity: an edge of thread A with no node of A
inside it (an annotation's own span counts: an annotation does no work itself) was blocked on
thread B of the same rank when
- B worked (had a node) through at least `COVERED` of it,
- B's work ended within `RESUME_NS` before A resumed, and B then stayed idle for `IDLE_NS`
  (B handed back; a thread that is always busy hands nothing back).
The edge then loses B's busy time inside it, and two `thread_dependency` edges carry the path
through B: A's last node → B's first node inside the edge, and B's last node → A's resume, each
weighing its own Δt. Only edges of at least `MIN_BLOCKED_NS` are looked at.
"""

from __future__ import annotations

import numpy as np

from ...intervals import covered_between, merged
from .edges import THREAD_DEPENDENCY, Edges
from .frame import Frame
from .invariants import node_time_of
from .stacks import thread_ids

MIN_BLOCKED_NS = 100_000
COLLECTIVE_RANGES = ("gloo:", "nccl:", "rccl:")
# Ops whose own span only waits for a collective to complete.
WAIT_OPS = ("_c10d_functional::wait_tensor", "c10d::wait", "c10d_functional::wait_tensor")
COVERED = 0.5
RESUME_NS = 5_000_000  # as crossrank's: a thread woken by another resumes within this
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
    weight = edges.weight.copy()
    added: list[tuple[int, int, int]] = []
    for j in candidates.tolist():
        a, b = int(t[src[j]]), int(t[dst[j]])
        best, best_cover = None, 0
        for tid, other in busy.items():
            if tid == int(thread[rs[j]]):
                continue
            cover = other.covered(a, b)
            if cover >= COVERED * (b - a) and cover > best_cover and other.hands_back(a, b, unit):
                best, best_cover = other, cover
        if best is None:
            continue
        first, last = best.first_start_in(a, b), best.last_end_before(b)
        # strictly forward: an edge between two nodes of one instant could close a cycle
        if first < 0 or not (int(t[first]) > a and b > int(t[last])):
            continue
        weight[j] = max(0, int(weight[j]) - best_cover)
        added.append((int(src[j]), first, int(t[first]) - a))
        added.append((last, int(dst[j]), b - int(t[last])))
    if not added:
        return Edges(edges.src, edges.dst, edges.kind, weight)
    extra = np.array(added, np.int64)
    return Edges(
        np.concatenate([edges.src, extra[:, 0]]),
        np.concatenate([edges.dst, extra[:, 1]]),
        np.concatenate([edges.kind, np.full(len(extra), THREAD_DEPENDENCY, edges.kind.dtype)]),
        np.concatenate([weight, extra[:, 2]]),
    )


class _Thread:
    """One thread's nodes: when it was busy, where its work starts and ends."""

    def __init__(self, t: np.ndarray, rows: np.ndarray) -> None:
        mine = np.nonzero(rows)[0]
        self.starts = mine[np.argsort(t[2 * mine], kind="stable")]
        self.ends = mine[np.argsort(t[2 * mine + 1], kind="stable")]
        self.t = t
        self.start_t = t[2 * self.starts]
        self.end_t = t[2 * self.ends + 1]
        self.union = merged(t[2 * mine], t[2 * mine + 1])

    def covered(self, a: int, b: int) -> int:
        return int(covered_between(np.array([a]), np.array([b]), self.union)[0])

    def hands_back(self, a: int, b: int, unit: int) -> bool:
        """Its work inside [a, b] ended within RESUME_NS of b, and it then idled IDLE_NS."""
        k = int(np.searchsorted(self.end_t, b, side="right")) - 1
        if k < 0 or self.end_t[k] < a or (b - self.end_t[k]) * unit > RESUME_NS:
            return False
        after = int(np.searchsorted(self.start_t, self.end_t[k], side="right"))
        return after >= len(self.start_t) or (self.start_t[after] - b) * unit >= IDLE_NS

    def first_start_in(self, a: int, b: int) -> int:
        k = int(np.searchsorted(self.start_t, a, side="left"))
        return int(2 * self.starts[k]) if k < len(self.starts) and self.start_t[k] <= b else -1

    def last_end_before(self, b: int) -> int:
        k = int(np.searchsorted(self.end_t, b, side="right")) - 1
        return int(2 * self.ends[k] + 1)
