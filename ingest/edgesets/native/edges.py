"""Edge lists in insertion order, over start/end nodes of a window's rows.

Node `2 * row` is the start and `2 * row + 1` the end of row `row` of the clipped frame. The
order edges are added in is kept: with equal path lengths it decides which path HTA's
`networkx.dag_longest_path` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OPERATOR_KERNEL, DEPENDENCY, KERNEL_LAUNCH_DELAY, KERNEL_KERNEL_DELAY, SYNC_DEPENDENCY = range(5)
COLLECTIVE_DEPENDENCY = 5  # plain native: across ranks, through a collective (crossrank.py)
THREAD_DEPENDENCY = 6  # plain native: a thread blocked on another of its rank (threads.py)
TYPE_NAMES = (
    "operator_kernel",
    "dependency",
    "kernel_launch_delay",
    "kernel_kernel_delay",
    "sync_dependency",
    "collective_dependency",
    "thread_dependency",
)
ZERO_WEIGHT_TYPES = (DEPENDENCY, SYNC_DEPENDENCY)


def start_node(rows: np.ndarray) -> np.ndarray:
    return 2 * np.asarray(rows, np.int64)


def end_node(rows: np.ndarray) -> np.ndarray:
    return 2 * np.asarray(rows, np.int64) + 1


@dataclass(frozen=True)
class Edges:
    """Edges in the order they were added; `weight` in frame units (HTA's rule, unclamped)."""

    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    weight: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    @staticmethod
    def empty() -> Edges:
        z = np.zeros(0, np.int64)
        return Edges(z, z, np.zeros(0, np.int8), z)

    @staticmethod
    def concat(parts: list[Edges]) -> Edges:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Edges.empty()
        return Edges(
            np.concatenate([p.src for p in parts]),
            np.concatenate([p.dst for p in parts]),
            np.concatenate([p.kind for p in parts]),
            np.concatenate([p.weight for p in parts]),
        )

    def take(self, order: np.ndarray) -> Edges:
        return Edges(self.src[order], self.dst[order], self.kind[order], self.weight[order])


def node_times(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Time of every node id (start and end interleaved)."""
    out = np.empty(2 * len(ts), ts.dtype)
    out[0::2], out[1::2] = ts, end
    return out


def make_edges(
    src: np.ndarray,
    dst: np.ndarray,
    kind: np.ndarray | int,
    times: np.ndarray,
    zero: np.ndarray | bool = False,
) -> Edges:
    """Edges with HTA's weight: dst time - src time, 0 for dependency and sync edges or `zero`."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    kinds = np.broadcast_to(np.asarray(kind, np.int8), src.shape).copy()
    weight = times[dst] - times[src]
    zeroed = np.isin(kinds, ZERO_WEIGHT_TYPES) | np.broadcast_to(np.asarray(zero, bool), src.shape)
    return Edges(src, dst, kinds, np.where(zeroed, 0, weight).astype(np.int64))


def ordered(parts: list[tuple[np.ndarray, np.ndarray, Edges]]) -> Edges:
    """Concatenate edge groups, each with (primary, secondary) keys, in key order (stable)."""
    parts = [p for p in parts if len(p[2])]
    if not parts:
        return Edges.empty()
    k1 = np.concatenate([p[0] for p in parts])
    k2 = np.concatenate([p[1] for p in parts])
    edges = Edges.concat([p[2] for p in parts])
    return edges.take(np.lexsort((k2, k1)))
