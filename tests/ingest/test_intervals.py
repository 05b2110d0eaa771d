"""ingest/intervals.py: interval sweeps against counting covered nanoseconds one by one."""

from __future__ import annotations

import numpy as np

from tracegraph.ingest.intervals import (
    covered_between,
    exclusive_shares,
    merged,
    subtract,
    union_length,
)


def test_interval_sweeps_equal_a_brute_force_count() -> None:
    """Union and exclusive shares against counting covered nanoseconds one by one."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        sets = []
        for _ in range(3):
            ts = rng.integers(0, 200, rng.integers(0, 12))
            sets.append((ts, ts + rng.integers(0, 40, len(ts))))
        grid = np.zeros((3, 260), bool)
        for i, (ts, end) in enumerate(sets):
            for a, b in zip(ts, end, strict=True):
                grid[i, a:b] = True
        masks = grid[0] * 1 + grid[1] * 2 + grid[2] * 4
        want = {m: int((masks == m).sum()) for m in range(1, 8) if (masks == m).any()}
        assert exclusive_shares(sets) == want
        ts, end = sets[0]
        assert union_length(ts, end) == int(grid[0].sum())
        lo, hi = subtract(sets[0], sets[1:])
        alone = grid[0] & ~grid[1] & ~grid[2]
        assert int((hi - lo).sum()) == int(alone.sum())
        lo, hi = merged(ts, end)
        assert (lo[1:] > hi[:-1]).all()  # disjoint, not touching


def test_covered_between_equals_a_brute_force_count() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        ts = rng.integers(0, 200, rng.integers(0, 12))
        end = ts + rng.integers(0, 40, len(ts))
        grid = np.zeros(300, bool)
        for a, b in zip(ts, end, strict=True):
            grid[a:b] = True
        a = rng.integers(-20, 260, 30)
        b = a + rng.integers(0, 80, 30)
        got = covered_between(a, b, merged(ts, end))
        want = [int(grid[max(x, 0) : max(y, 0)].sum()) for x, y in zip(a, b, strict=True)]
        assert got.tolist() == want
