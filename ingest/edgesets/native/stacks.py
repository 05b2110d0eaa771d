"""Per-thread call stacks as HTA builds them (`hta/common/call_stack.py`), with whole-array passes.

HTA turns each row of a CPU thread into a start and an end event, sorts them with
`compare_events` (Python's sort with a comparison function), and walks the sorted list with a
stack: a start is a child of the stack top, an end pops the top (whatever it is). The DFS over
that tree drives the critical-path edges. `compare_events` is not a total order among events
that share a timestamp when zero-duration events are involved, so the order Python's sort
produces there depends on the comparisons it happens to make. Threads with such ties are sorted
by Python itself with a key that reproduces every comparison outcome (C-level for all pairs but
the ambiguous ones); the others are sorted by a numpy key giving the same total order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tour:
    """The DFS enter/exit sequence over a thread forest: `row`, `enter`, `thread` per step."""

    row: np.ndarray
    enter: np.ndarray
    thread: np.ndarray


class _Tie:
    """`compare_events` for two events at the same timestamp (the only ambiguous comparisons)."""

    __slots__ = ("idx", "dur", "start")

    def __init__(self, idx: int, dur: int, start: bool) -> None:
        self.idx, self.dur, self.start = idx, dur, start

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __lt__(self, other: _Tie) -> bool:
        if self.idx == other.idx:
            return self.start
        if self.start == other.start:
            if self.dur == other.dur:
                return self.idx < other.idx if self.start else self.idx > other.idx
            return self.dur > other.dur if self.start else self.dur < other.dur
        if self.dur > 0 and other.dur > 0:
            return not self.start
        if self.dur == 0 and other.dur == 0:
            return self.idx < other.idx
        return self.start


def thread_ids(pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thread number of each row in (pid, tid) order (pandas groupby order), and the keys."""
    order = np.lexsort((tid, pid))
    p, t = pid[order], tid[order]
    new = np.ones(len(order), bool)
    new[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])
    thread = np.empty(len(order), np.int64)
    thread[order] = np.cumsum(new) - 1
    return thread, np.stack([p[new], t[new]], axis=1)


def sorted_events(
    thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, idx: np.ndarray, exact_ties: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """HTA's sorted start/end events of every thread: (row, is_start) arrays, thread by thread.

    Rows must be given in HTA's frame order within each thread. Without `exact_ties`, events
    that share a timestamp ambiguously are ordered by the consistent key (zero-length events by
    index, each start before its end), which nests them properly.
    """
    dur = np.maximum(dur, 0)
    n = len(ts)
    rows = np.repeat(np.arange(n), 2)
    start = np.tile(np.array([True, False]), n)
    time = np.where(start, ts[rows], ts[rows] + dur[rows])
    thr = thread[rows]
    # Events listed as HTA lists them: per thread, row order, start then end.
    listed = np.lexsort((np.arange(2 * n), thr))
    rows, start, time, thr = rows[listed], start[listed], time[listed], thr[listed]
    d, i = dur[rows], idx[rows]
    zero = d == 0
    is_a = ~zero & ~start  # ends of positive spans
    is_b = ~zero & start  # starts of positive spans
    block = np.lexsort((time, thr))
    bt, bth = time[block], thr[block]
    new_block = np.ones(len(block), bool)
    new_block[1:] = (bt[1:] != bt[:-1]) | (bth[1:] != bth[:-1])
    block_id = np.empty(len(block), np.int64)
    block_id[block] = np.cumsum(new_block) - 1
    nb = int(block_id.max(initial=-1)) + 1
    z_events = np.bincount(block_id, zero & start, nb)
    a_count = np.bincount(block_id, is_a, nb)
    b_count = np.bincount(block_id, is_b, nb)
    ambiguous = (z_events >= 2) | ((z_events == 1) & (a_count > 0) & (b_count > 0))
    # Consistent blocks: ends of positive spans (shorter first, then higher index), starts of
    # positive spans (longer first, then lower index), zero spans by index, start before end;
    # a zero span precedes the ends when the block has no positive start, else follows starts.
    z_first = (z_events == 1) & (b_count == 0)
    cls = np.where(is_a, 1, np.where(is_b, 2, np.where(z_first[block_id], 0, 3)))
    sub1 = np.where(is_a, d, np.where(is_b, -d, i))
    sub2 = np.where(is_a, -i, np.where(is_b, i, np.where(start, 0, 1)))
    order = np.lexsort((sub2, sub1, cls, time, thr))
    bad_threads = np.unique(thr[ambiguous[block_id]])
    if len(bad_threads) == 0 or not exact_ties:
        return rows[order], start[order]
    out_rows, out_start = [], []
    thread_of_order = thr[order]
    for t in np.unique(thr):
        if t in bad_threads:
            sel = np.nonzero(thr == t)[0]
            perm = _python_sort(
                time[sel],
                cls[sel],
                sub1[sel],
                sub2[sel],
                ambiguous[block_id[sel]],
                i[sel],
                d[sel],
                start[sel],
            )
            sel = sel[perm]
        else:
            sel = order[thread_of_order == t]
        out_rows.append(rows[sel])
        out_start.append(start[sel])
    return np.concatenate(out_rows), np.concatenate(out_start)


def _python_sort(
    time: np.ndarray,
    cls: np.ndarray,
    sub1: np.ndarray,
    sub2: np.ndarray,
    ambiguous: np.ndarray,
    idx: np.ndarray,
    dur: np.ndarray,
    start: np.ndarray,
) -> np.ndarray:
    """Python's sort of one thread's events, with every comparison as `compare_events` gives it."""
    rank = np.empty(len(time), np.int64)
    o = np.lexsort((sub2, sub1, cls, time))
    rank[o] = np.arange(len(time))
    keys: list[tuple] = list(zip(time.tolist(), rank.tolist(), strict=True))
    for j in np.nonzero(ambiguous)[0].tolist():
        keys[j] = (keys[j][0], _Tie(int(idx[j]), int(dur[j]), bool(start[j])))
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64)


def stack_tree(thread: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted events: each start's parent event position (-1 at the root) and its depth.

    An end pops the stack top whatever it is, and nothing when the stack is empty.
    """
    n = len(start)
    step = np.where(start, 1, -1)
    first = np.ones(n, bool)
    first[1:] = thread[1:] != thread[:-1]
    seg_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    csum = np.cumsum(step)
    base = np.where(seg_start > 0, csum[seg_start - 1], 0)
    s = csum - base  # running sum within the thread
    run_min = _segment_min_accumulate(s, first)
    depth_after = s - np.minimum(run_min, 0)
    depth_before = np.where(first, 0, np.concatenate([[0], depth_after[:-1]]))
    parent = np.full(n, -1, np.int64)
    starts = np.nonzero(start)[0]
    need = starts[depth_before[starts] > 0]
    # Top of stack = the last start, in the same thread, pushed to the level we are at.
    lvl = depth_after[starts]
    key = np.lexsort((starts, lvl, thread[starts]))
    k_thr, k_lvl, k_pos = thread[starts][key], lvl[key], starts[key]
    q_thr, q_lvl = thread[need], depth_before[need]
    lo = _search3(k_thr, k_lvl, k_pos, q_thr, q_lvl, need)
    parent[need] = k_pos[lo]
    return parent, depth_after


def _segment_min_accumulate(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running minimum restarting at each `first` (values offset per segment to stay ordered)."""
    seg = np.cumsum(first) - 1
    span = int(np.abs(values).max(initial=0)) * 2 + 2
    shifted = values - seg * span
    return np.minimum.accumulate(shifted) + seg * span


def _search3(
    k_thr: np.ndarray,
    k_lvl: np.ndarray,
    k_pos: np.ndarray,
    q_thr: np.ndarray,
    q_lvl: np.ndarray,
    q_pos: np.ndarray,
) -> np.ndarray:
    """Index of the last key (thr, lvl, pos) with the query's thr and lvl and pos < query pos."""
    scale_p = int(max(k_pos.max(initial=0), q_pos.max(initial=0))) + 1
    scale_l = int(max(k_lvl.max(initial=0), q_lvl.max(initial=0))) + 1
    kk = (k_thr * scale_l + k_lvl) * scale_p + k_pos
    qq = (q_thr * scale_l + q_lvl) * scale_p + q_pos
    return np.searchsorted(kk, qq) - 1


def euler_tour(rows: np.ndarray, start: np.ndarray, thread: np.ndarray, depth: np.ndarray) -> Tour:
    """DFS enter/exit order of the stack forest (children in start order)."""
    starts = np.nonzero(start)[0]
    n = len(starts)
    pre = np.arange(n)  # preorder = start order (children are appended in start order)
    dep = depth[starts]
    thr = thread[starts]
    # Last preorder index of each subtree: next start in the thread at depth <= own, minus one.
    last = np.full(n, n - 1, np.int64)
    thread_end = np.zeros(n, np.int64)
    new_thr = np.ones(n, bool)
    new_thr[1:] = thr[1:] != thr[:-1]
    bounds = np.append(np.nonzero(new_thr)[0], n)
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        thread_end[a:b] = b - 1
    for level in np.unique(dep):
        at_level = np.nonzero(dep == level)[0]
        shallow = np.nonzero(dep <= level)[0]
        nxt = np.searchsorted(shallow, at_level, side="right")
        candidate = np.where(nxt < len(shallow), shallow[np.minimum(nxt, len(shallow) - 1)], n)
        last[at_level] = np.minimum(candidate - 1, thread_end[at_level])
    enter_key = np.stack([pre, np.zeros(n, np.int64), np.zeros(n, np.int64)])
    exit_key = np.stack([last, np.ones(n, np.int64), -dep])
    keys = np.concatenate([enter_key, exit_key], axis=1)
    order = np.lexsort((keys[2], keys[1], keys[0]))
    ev = np.concatenate([starts, starts])[order]
    return Tour(
        rows[ev],
        np.concatenate([np.ones(n, bool), np.zeros(n, bool)])[order],
        thr[np.concatenate([pre, pre])[order]],
    )
