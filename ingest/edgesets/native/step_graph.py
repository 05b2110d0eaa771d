"""One step's dependency graph as the path, its segments and the what-ifs read it.

A step's graph is every rank's window graph of the step, joined through their collectives
(`crossrank`), or one rank's window graph where the step has no other rank. Node `base[i] +
2·row` is the start and `+ 1` the end of row `row` of graph i's clip; times are ns on the
aligned clocks; `weight` is what the longest path uses (a collective's wait already taken off).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...critical_path import LongestPath, PathLengths, longest_path
from .graph import WindowGraph
from .invariants import node_time_of


@dataclass(frozen=True)
class StepGraph:
    """The graph of one step (see the module docstring)."""

    step: str
    graphs: tuple[WindowGraph, ...]
    base: np.ndarray  # first node id of each graph, then the node count
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    weight: np.ndarray  # ns
    times: np.ndarray  # ns per node, aligned clocks

    @staticmethod
    def of_window(step: str, graph: WindowGraph) -> StepGraph:
        """A single rank's window graph, in ns."""
        c = graph.clip
        return StepGraph(
            step,
            (graph,),
            np.array([0, 2 * c.n], np.int64),
            graph.edges.src.astype(np.int64),
            graph.edges.dst.astype(np.int64),
            graph.edges.kind.astype(np.int64),
            (graph.path_weight * graph.unit_ns).astype(np.int64),
            (node_time_of(c) + c.origin) * c.unit_ns,
        )

    @property
    def n_nodes(self) -> int:
        return int(self.base[-1])

    def graph_of(self, nodes: np.ndarray) -> np.ndarray:
        """Index of the rank graph each node belongs to."""
        return np.searchsorted(self.base, np.asarray(nodes), side="right") - 1

    def longest(self) -> LongestPath:
        return longest_path(self.src, self.dst, self.weight, self.n_nodes)

    def lengths(self) -> PathLengths:
        """The same graph's path length under other weights (what-ifs)."""
        return PathLengths(self.src, self.dst, self.n_nodes)
