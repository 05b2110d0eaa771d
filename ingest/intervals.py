"""Interval arithmetic over event times, whole-array: unions, overlaps, exclusive shares.

Every function takes start and end arrays (any order, any overlap) and sorts once; nothing
loops per event in Python. Lengths are in the arrays' unit.
"""

from __future__ import annotations

import numpy as np


def merged(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [ts, end) as disjoint intervals in time order (touching ones joined)."""
    if len(ts) == 0:
        return np.empty(0, ts.dtype), np.empty(0, end.dtype)
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], end[order]
    reach = np.maximum.accumulate(end)
    # a new interval starts where a start lies past everything before it
    starts = np.concatenate(([True], ts[1:] > reach[:-1]))
    return ts[starts], np.maximum.reduceat(end, np.nonzero(starts)[0])


def union_length(ts: np.ndarray, end: np.ndarray) -> int | float:
    """The length of the union of [ts, end)."""
    lo, hi = merged(ts, end)
    return (hi - lo).sum().item() if len(lo) else 0


Intervals = tuple[np.ndarray, np.ndarray]  # (starts, ends)


def covered_between(a: np.ndarray, b: np.ndarray, union: Intervals) -> np.ndarray:
    """For each [a[i], b[i]], how much of it the disjoint, sorted intervals `union` cover."""
    lo, hi = union
    if len(lo) == 0:
        return np.zeros(len(a), np.int64)
    before = np.concatenate(([0], np.cumsum(hi - lo)))  # covered before each interval starts

    def covered_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(lo, t, side="right")  # intervals starting at or before t
        last = np.maximum(k - 1, 0)
        partial = np.clip(np.minimum(t, hi[last]) - lo[last], 0, None)
        return np.where(k > 0, before[last] + partial, 0)

    return np.maximum(covered_until(np.asarray(b)) - covered_until(np.asarray(a)), 0)


def overlap_length(a: Intervals, b: Intervals) -> int | float:
    """The length of (∪a) ∩ (∪b)."""
    shares = exclusive_shares([a, b])
    return shares.get(0b11, 0)


def exclusive_shares(sets: list[Intervals]) -> dict[int, int | float]:
    """Split the union of several interval sets into exclusive shares by which sets cover it:
    bitmask (bit i: set i covers the time) → length. Shares sum to the union of all."""
    times, deltas = [], []
    for bit, (ts, end) in enumerate(sets):
        lo, hi = merged(ts, end)
        times += [lo, hi]
        deltas += [np.full(len(lo), 1 << bit, np.int64), np.full(len(hi), -(1 << bit), np.int64)]
    if not times:
        return {}
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    mask = np.cumsum(d)  # the sets covering [t[i], t[i+1])
    width = np.diff(t)
    live = (mask[:-1] > 0) & (width > 0)
    masks, widths = mask[:-1][live], width[live]
    if np.issubdtype(widths.dtype, np.integer):  # exact in any order: summed by mask at once
        order = np.argsort(masks, kind="stable")
        masks, widths = masks[order], widths[order]
        starts = np.flatnonzero(np.r_[True, masks[1:] != masks[:-1]]) if len(masks) else masks
        sums = np.add.reduceat(widths, starts) if len(masks) else widths
        return dict(zip(masks[starts].tolist(), sums.tolist(), strict=True))
    out: dict[int, int | float] = {}
    for m in np.unique(masks).tolist():  # floats: numpy's pairwise sum of each mask's widths
        out[int(m)] = widths[masks == m].sum().item()
    return out


def subtract(a: Intervals, others: list[Intervals]) -> Intervals:
    """The parts of ∪a that no interval of `others` covers, as disjoint intervals in order."""
    lo, hi = merged(*a)
    if len(lo) == 0 or not others:
        return lo, hi
    o_lo, o_hi = merged(np.concatenate([x[0] for x in others]),
                        np.concatenate([x[1] for x in others]))  # fmt: skip
    times = np.concatenate((lo, hi, o_lo, o_hi))
    ones, twos = np.ones(len(lo), np.int64), np.full(len(o_lo), 2, np.int64)
    delta = np.concatenate((ones, -ones, twos, -twos))  # a: ±1, the others: ±2
    order = np.lexsort((delta, times))
    times, level = times[order], np.cumsum(delta[order])
    keep = (level[:-1] == 1) & (np.diff(times) > 0)  # inside a, outside the others
    starts, ends = times[:-1][keep], times[1:][keep]
    if len(starts) == 0:
        return starts, ends
    return merged(starts, ends)
