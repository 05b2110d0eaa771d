"""The Step screen's read side (`queries/step.py`): a cross-rank edge set gives each step's path
across ranks, every rank's edges, the length its verdict states."""

from __future__ import annotations

from pathlib import Path

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.screens.step import preferred_edge_set
from tracegraph.ingest.schema import EV_BITS, MAX_RANK
from tracegraph.queries.crossrank import step_verdicts
from tracegraph.queries.runs import list_runs
from tracegraph.queries.step import critical_path, edge_set_names, step_windows


def test_a_cross_rank_set_shows_each_steps_path_across_ranks(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=4, steps=3, layers=4, late_rank=2, late_us=4_000)
    write_per_rank(config, tmp_path / "t")
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(tmp_path / "t", run="job")
    g.edges("native", run="job", all_steps=True)
    with g.reading() as store:
        (run,) = list_runs(store)
        names = edge_set_names(store, "job")
        assert names == ["native", "native:cross-rank"] and preferred_edge_set(names) == "native"
        verdicts = {v.step: v for v in step_verdicts(store, "job")}
        for window in step_windows(store, run, 0):
            path = critical_path(store, window, "native:cross-rank")
            verdict = verdicts[window.name]
            assert path.edges.num_rows > 0 and path.length_ns == verdict.length_ns
            order = path.edges["path_order"].to_pylist()
            assert order == sorted(order) and len(set(order)) == len(order)
            ranks = {(i >> EV_BITS) & MAX_RANK for i in path.edges["src_id"].to_pylist()}
            assert verdict.bound_by_rank in ranks  # the path runs through the rank it names
            own = critical_path(store, window, "native")  # a rank's own path: its edges only
            assert {(i >> EV_BITS) & MAX_RANK for i in own.edges["src_id"].to_pylist()} == {0}


def test_the_step_screen_opens_on_the_native_set() -> None:
    assert preferred_edge_set(["hta-0.5.0", "native", "native:cross-rank"]) == "native"
    assert preferred_edge_set(["hta-0.5.0", "native:hta-0.5.0"]) == "native:hta-0.5.0"
    assert preferred_edge_set(["hta-0.5.0", "traceinsight-0.6.1"]) == "hta-0.5.0"
    assert preferred_edge_set(["native:cross-rank"]) == "native:cross-rank"
    assert preferred_edge_set([]) is None


def test_the_short_verdict_says_the_straggler_first(tmp_path: Path) -> None:
    """The TUI's verdict (two lines at 80 columns): the straggler, its lateness and the wait it
    caused, from the same stored verdict the long form reads."""
    from tracegraph.queries.crossrank import describe_short

    write_per_rank(SyntheticConfig(ranks=3, steps=2, layers=2, late_rank=1, late_us=5_000),
                   tmp_path / "t")  # fmt: skip
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(tmp_path / "t", run="job")
    g.edges("native", run="job", all_steps=True)
    with g.reading() as store:
        verdicts = step_verdicts(store, "job")
    assert verdicts
    for v in verdicts:
        text = describe_short(v)
        s = v.straggler
        assert s is not None and s["rank"] == 1
        late = f"straggler rank 1: +{int(s['lateness_ns']) / 1e6:,.2f} ms late"
        assert text.startswith(f"{v.step}: {late}") and len(text) < 160
        assert f"{int(s['caused_wait_ns']) / 1e6:,.2f} ms of the others' wait" in text
        assert f"bound by rank {v.bound_by_rank}" in text
