"""The read side behind the explorer's screens: overview, step windows, timeline, neighbours."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracegraph.examples.synthetic import expected_counts
from tracegraph.ingest.store import GraphStore, write_transaction
from tracegraph.queries.neighbours import EventNotFound, event_detail, event_id_of
from tracegraph.queries.overview import (
    STEP_TABLE,
    busy_in_windows,
    gpu_busy,
    has_table,
    histogram,
    run_overview,
    step_times,
)
from tracegraph.queries.runs import ev_idx_of_id, id_range, list_runs, rank_of_id
from tracegraph.queries.step import step_windows
from tracegraph.queries.timeline import rank_timeline

from ..explorer.dbs import SYNTHETIC


def test_runs_and_id_ranges(synthetic_store: GraphStore) -> None:
    (run,) = list_runs(synthetic_store)
    assert run.name == "syn" and run.ranks == (0, 1)
    lo, hi = id_range(run.run_idx, 1)
    ids = synthetic_store.run("MATCH (k:Kernel) WHERE k.rank = 1 RETURN k.id AS id").table["id"]
    assert pc.min(ids).as_py() >= lo and pc.max(ids).as_py() < hi
    assert rank_of_id(lo + 7) == 1 and ev_idx_of_id(lo + 7) == 7


def test_overview_step_times_and_spread(synthetic_store: GraphStore) -> None:
    (run,) = list_runs(synthetic_store)
    overview = run_overview(synthetic_store, run)
    assert overview.step_times.num_rows == SYNTHETIC.ranks * SYNTHETIC.steps
    for row in overview.steps.to_pylist():
        mine = overview.step_times.filter(pc.equal(overview.step_times["step"], row["step"]))
        durs = mine["dur"].to_pylist()
        assert (row["min_ns"], row["max_ns"]) == (min(durs), max(durs))
        assert row["slowest_rank"] == mine["rank"][durs.index(max(durs))].as_py()
        assert sum(row["histogram"]) == SYNTHETIC.ranks


def test_gpu_busy_counts_overlapping_streams_once(synthetic_store: GraphStore) -> None:
    (run,) = list_runs(synthetic_store)
    times = run_overview(synthetic_store, run).step_times
    busy = gpu_busy(synthetic_store, run, times)
    assert busy.num_rows == times.num_rows
    assert all(0 < s <= 1 for s in busy["share"].to_pylist())


def test_busy_in_windows_unions_and_clips() -> None:
    windows = pa.table({"rank": [0, 0], "step": [0, 1], "ts": [0, 100], "dur": [100, 100]})
    kernels = pa.table(
        {
            "rank": [0, 0, 0, 0, 1],
            "ts": [10, 20, 90, 150, 0],  # 10-30 and 20-40 overlap; 90-130 crosses into step 1
            "dur": [20, 20, 40, 10, 50],
        }
    )
    busy = busy_in_windows(kernels, windows)
    # each step counts the part of the crossing kernel inside it (it was busy then)
    assert busy["busy_ns"].to_pylist() == [30 + 10, 30 + 10]
    assert busy["kernels"].to_pylist() == [3, 1]  # a kernel is the step's where it starts
    assert histogram(np.array([1, 1, 1])) == [3, 0, 0, 0, 0, 0, 0, 0]


def test_step_windows_and_timeline_lanes(synthetic_store: GraphStore) -> None:
    (run,) = list_runs(synthetic_store)
    windows = step_windows(synthetic_store, run, 1)
    assert [w.step for w in windows] == list(range(SYNTHETIC.steps))
    w = windows[0]
    timeline = rank_timeline(synthetic_store, run.run_idx, 1, w.ts, w.end)
    kinds = [lane.kind for lane in timeline.lanes]
    assert kinds.count("cpu") == 2 and kinds.count("gpu") == 2  # main + autograd; streams 7, 21
    for lane in timeline.lanes:
        assert np.all(np.diff(lane.starts) >= 0)
        assert np.all(lane.starts >= w.ts) and np.all(lane.starts < w.end)
    step_lane = next(lane for lane in timeline.lanes if w.id in lane.ids.tolist())
    assert step_lane.at(w.ts + 1) is not None


def test_event_detail_and_lookup(synthetic_store: GraphStore) -> None:
    (run,) = list_runs(synthetic_store)
    launch = synthetic_store.run(
        "MATCH (r:Runtime)-[:LAUNCHES]->(k:Kernel) WHERE r.rank = 0 "
        "RETURN r.id AS r, r.ev_idx AS ev, k.id AS k LIMIT 1"
    ).table.to_pylist()[0]
    assert event_id_of(synthetic_store, run.name, 0, launch["ev"]) == launch["r"]
    detail = event_detail(synthetic_store, launch["r"])
    assert detail.label == "Runtime" and isinstance(detail.args, dict)
    groups = {(r["relation"], r["direction"]) for r in detail.neighbours.to_pylist()}
    assert ("LAUNCHES", "launches") in groups and ("CALLS", "parent") in groups
    with pytest.raises(EventNotFound):
        event_detail(synthetic_store, 12345)
    counts = expected_counts(SYNTHETIC)[0]
    assert counts["kernel"] > 0


def test_the_step_table_written_at_ingest_gives_the_same_overview_as_the_scans(
    synthetic_store: GraphStore, tmp_path: Path
) -> None:
    """Ingest writes `Step`; without it the same answers come from scanning the events."""
    (run,) = list_runs(synthetic_store)
    assert has_table(synthetic_store, STEP_TABLE)
    times = step_times(synthetic_store, run)
    busy = gpu_busy(synthetic_store, run, times)
    db = tmp_path / "without_steps.kuzu"
    shutil.copyfile(synthetic_store.path, db)
    with write_transaction(db) as store:
        store.run(f"DROP TABLE {STEP_TABLE}")
    with GraphStore(db) as store:
        assert not has_table(store, STEP_TABLE)
        assert step_times(store, run).equals(times)
        assert gpu_busy(store, run, times).equals(busy)
        assert step_windows(store, run, 1) == step_windows(synthetic_store, run, 1)
