"""A thread blocked on another thread of its rank waits (ingest/edgesets/native/threads.py), and
a gloo range follows the c10d op that enqueued it (enqueue.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.ingest.edgesets.native.edge_set import build_run
from tracegraph.ingest.edgesets.native.edges import KERNEL_LAUNCH_DELAY, THREAD_DEPENDENCY

from ...conftest import synthetic_db

GLOO = Path(__file__).resolve().parents[2] / "data" / "gloo_4r"
# one rank: the main thread sits in `## backward ##` while the autograd thread runs backward
ONE_RANK = SyntheticConfig(ranks=1, steps=2, layers=8, stall_every=0, slow_gap_every=0)


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_db(ONE_RANK, tmp_path_factory.mktemp("one"), "one")


def test_the_blocked_main_thread_is_not_charged_the_backward(one_rank: Path) -> None:
    (build,) = build_run(one_rank, all_steps=True).builds
    for window in build.windows:
        g = window.graph
        assert g is not None
        c, e = g.clip, g.edges
        backward = int(np.nonzero(c.name.contains("## backward ##"))[0][0])
        autograd = c.tid != c.tid[backward]
        on_path = g.path.edges
        # the path goes through the autograd thread's work, by a handoff edge into it (it may
        # leave by the GPU work that thread launched)
        assert (e.kind[on_path] == THREAD_DEPENDENCY).sum() >= 1
        rows = np.concatenate([e.src[on_path], e.dst[on_path]]) // 2
        assert autograd[rows].sum() > 10
        # and the annotation's own span weighs almost nothing
        own = np.nonzero((e.src == 2 * backward) & (e.dst == 2 * backward + 1))[0]
        assert own.size == 1 and g.path_weight[own[0]] < 0.05 * c.dur[backward]
        # the path is still the step: no time was lost moving it to the other thread
        assert g.path.length >= 0.9 * (c.end.max() - c.ts.min())


def test_every_gloo_range_follows_the_op_that_enqueued_it(tmp_path: Path) -> None:
    db = tmp_path / "stall.kuzu"
    tracegraph.open(db).ingest(GLOO / "data_stall", run="stall")
    for build in build_run(db, all_steps=True).builds:
        for window in build.windows:
            g = window.graph
            assert g is not None
            c, e = g.clip, g.edges
            gloo = np.nonzero(c.name.contains("gloo:all_reduce"))[0]
            launches = e.kind == KERNEL_LAUNCH_DELAY
            into = set((e.dst[launches] // 2).tolist())
            assert set(gloo.tolist()) <= into
            sources = {c.name.at(int(r)) for r in e.src[launches] // 2}
            assert sources == {"c10d::allreduce_"}
