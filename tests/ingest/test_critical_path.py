"""The longest-path DP: lengths, paths and networkx's tie-breaking, on small and random DAGs."""

from __future__ import annotations

import numpy as np
import pytest

from tracegraph.ingest.critical_path import CycleError, longest_path

nx = pytest.importorskip("networkx")


def _networkx_path(src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> list[int]:
    g = nx.DiGraph()
    for u, v, w in zip(src.tolist(), dst.tolist(), weight.tolist(), strict=True):
        g.add_edge(u, v, weight=w)
    return nx.dag_longest_path(g, weight="weight")


def _random_dag(rng: np.random.Generator, zero_heavy: bool) -> tuple[np.ndarray, ...]:
    n = int(rng.integers(2, 40))
    m = int(rng.integers(1, 90))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    lo, hi = np.minimum(a, b)[keep].tolist(), np.maximum(a, b)[keep].tolist()
    pairs = sorted(set(zip(lo, hi, strict=True)))
    relabel = rng.permutation(n)  # node ids in no topological order
    src = relabel[np.array([p[0] for p in pairs], np.int64)]
    dst = relabel[np.array([p[1] for p in pairs], np.int64)]
    order = rng.permutation(len(src))  # edges added in no particular order
    high = 2 if zero_heavy else 10  # many equal path lengths: ties everywhere
    return src[order], dst[order], rng.integers(0, high, len(src))


@pytest.mark.parametrize("zero_heavy", [False, True])
def test_same_path_as_networkx_on_random_dags(zero_heavy: bool) -> None:
    rng = np.random.default_rng(7 if zero_heavy else 3)
    for _ in range(400):
        src, dst, weight = _random_dag(rng, zero_heavy)
        if len(src) == 0:
            continue
        path = longest_path(src, dst, weight)
        assert path.nodes.tolist() == _networkx_path(src, dst, weight)
        assert path.length == int(weight[path.edges].sum())


def test_chain_lengths_and_path_edges() -> None:
    src, dst, weight = np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([5, 5, 7])
    path = longest_path(src, dst, weight)
    assert path.length == 10
    assert path.edges.tolist() == [0, 1]
    assert path.distance.tolist() == [0, 5, 10]


def test_first_added_edge_wins_a_tie() -> None:
    # two equally long ways into node 3: the edge added first is the one on the path
    src, dst, weight = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]), np.array([1, 1, 1, 1])
    assert longest_path(src, dst, weight).nodes.tolist() == [0, 1, 3]
    order = np.array([1, 0, 3, 2])
    assert longest_path(src[order], dst[order], weight[order]).nodes.tolist() == [0, 2, 3]


def test_negative_weights_restart_the_path_as_networkx_does() -> None:
    src, dst, weight = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([4, -9, 2])
    path = longest_path(src, dst, weight)
    assert path.nodes.tolist() == _networkx_path(src, dst, weight)


def test_cycle_is_an_error() -> None:
    with pytest.raises(CycleError):
        longest_path(np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([1, 1, 1]))


def test_long_chain_is_fast_enough() -> None:
    n = 200_000
    src, dst = np.arange(n - 1), np.arange(1, n)
    path = longest_path(src, dst, np.ones(n - 1, np.int64))
    assert path.length == n - 1 and len(path.edges) == n - 1
