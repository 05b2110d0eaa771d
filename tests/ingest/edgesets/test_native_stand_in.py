"""Summary ranks join the cross-rank path through their arrivals (`stand_in.py`): the straggler,
its lateness, the wait it caused and every rank's wait equal a full ingest's; the rank that
bounds a step too, and on a late rank the path's length within 1%; each edge of a summary rank
goes forward in time on the raw JSON's clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracegraph
from tracegraph.examples.synthetic import write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest.edgesets.native.crossrank import CrossRankPath
from tracegraph.ingest.edgesets.native.edge_set import BuiltRun, build_each_step
from tracegraph.ingest.edgesets.native.stand_in import SUMMARY_WORK, stand_in

from ...conftest import TRACES
from ..oracle import trace_facts
from .test_native_straggler import LATE, LATE_RANK, _late_us


def _full_and_mixed(files: list[Path], tmp: Path, load: list[int]) -> tuple[BuiltRun, BuiltRun]:
    """Each step's path of a full ingest, and of a summary ingest with `load` ranks' events."""
    tracegraph.open(tmp / "full.kuzu").ingest(*files, run="job")
    tracegraph.open(tmp / "mixed.kuzu").ingest(*files, run="job", summary=True, full_ranks=load)
    return build_each_step(tmp / "full.kuzu"), build_each_step(tmp / "mixed.kuzu")


def _same_arrival_verdicts(full: CrossRankPath, mixed: CrossRankPath) -> None:
    assert mixed.step == full.step
    assert mixed.wait_ns == full.wait_ns
    assert mixed.clock_offset_ns == full.clock_offset_ns
    a, b = full.straggler, mixed.straggler
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (b.rank, b.last_at, b.collectives, b.lateness_ns, b.at, b.caused_wait_ns) == (
            a.rank,
            a.last_at,
            a.collectives,
            a.lateness_ns,
            a.at,
            a.caused_wait_ns,
        )
    assert mixed.length_ns <= mixed.span_ns


def _check_against_json(path: CrossRankPath, files: list[Path]) -> None:
    """Every path edge forward in time on the JSON's clocks (a summary rank's step end is its
    last arrival's end where that is later, so an edge into it is held by its start only)."""
    events = {
        r: {e.ev_idx: (e.ts, e.dur or 0) for e in trace_facts(f).events()}
        for r, f in enumerate(files)
    }
    for e in path.edges:
        sa, da = events[e.src_rank][e.src_ev_idx], events[e.dst_rank][e.dst_ev_idx]
        a = (sa[0] if e.src_start else sa[0] + sa[1]) - path.clock_offset_ns[e.src_rank]
        b = (da[0] if e.dst_start else da[0] + da[1]) - path.clock_offset_ns[e.dst_rank]
        into_summary_end = e.dst_rank in path.summarised and e.dst_label is None and not e.dst_start
        if not into_summary_end:
            assert a <= b and 0 <= e.weight_ns <= b - a, e
    assert path.length_ns == sum(e.weight_ns for e in path.edges)


def test_a_late_summary_rank_bounds_each_step_as_its_events_would(tmp_path: Path) -> None:
    files = write_per_rank(LATE, tmp_path / "traces")
    loaded = [r for r in range(LATE.ranks) if r not in (1, LATE_RANK)]
    full, mixed = _full_and_mixed(files, tmp_path, loaded)
    assert [p.step for p in mixed.paths] == [p.step for p in full.paths]
    assert len(mixed.paths) == LATE.steps and not mixed.left_out
    for step, (f, m) in enumerate(zip(full.paths, mixed.paths, strict=True)):
        _same_arrival_verdicts(f, m)
        assert m.summarised == (1, LATE_RANK)
        assert m.straggler is not None and m.straggler.rank == LATE_RANK
        assert m.bound_by_rank == f.bound_by_rank == LATE_RANK
        assert m.length_ns == pytest.approx(f.length_ns, rel=0.01)
        late = [s for s in m.segments if s.rank == LATE_RANK and s.name == SUMMARY_WORK]
        assert late and late[0].ns >= _late_us(step) * 1000  # the sleep is in its opaque work
        _check_against_json(m, files)


def test_path_says_which_ranks_are_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_per_rank(LATE, tmp_path / "traces")
    db = tmp_path / "mixed.kuzu"
    tracegraph.open(db).ingest(*files, run="job", summary=True, full_ranks=[0, 3])
    assert main(["path", str(db), "--depth", "1"]) == 0
    out, err = capsys.readouterr()
    assert "joins ranks 0, 3 through events and ranks 1, 2 through collective arrivals" in err
    assert out.count(f"bound by rank {LATE_RANK} (a summary:") == LATE.steps
    assert out.count(f"--full-ranks {LATE_RANK}") == LATE.steps
    assert f"straggler rank {LATE_RANK}: last at" in out
    # the edge sets keep the loaded ranks' edges only (a summary rank has no events)
    assert main(["edges", str(db), "--native", "--all-steps"]) == 0
    capsys.readouterr()
    query = (
        "MATCH (a)-[d:DEP]->(b) WHERE d.edge_set STARTS WITH 'native' "
        "RETURN DISTINCT a.rank AS r UNION MATCH (a)-[d:DEP]->(b) WHERE d.edge_set STARTS "
        "WITH 'native' RETURN DISTINCT b.rank AS r"
    )
    assert main(["query", str(db), query, "--format", "csv"]) == 0
    assert sorted(capsys.readouterr().out.split()[1:]) == ["0", "3"]


@pytest.mark.parametrize(
    ("folder", "load"),
    [
        ("cpu_ddp_2r", 0),  # rank 1 (a 60 ms data stall every step) a summary
        ("cpu_ddp_2r_faults", 1),  # rank 0 (gc.collect() in every step) a summary
        ("hta/trace_filter", 0),  # NCCL send/recv, overlapped: the estimate is loosest here
        ("hta/trace_filter", 1),
    ],
)
def test_real_jobs_with_a_summary_rank_keep_the_full_paths_verdicts(
    folder: str, load: int, tmp_path: Path
) -> None:
    files = sorted((TRACES / folder).glob("*.json.gz"))
    if len(files) != 2:
        pytest.skip(f"real traces not at {TRACES}")
    full, mixed = _full_and_mixed(files, tmp_path, [load])
    assert len(mixed.paths) == len(full.paths) > 0
    for f, m in zip(full.paths, mixed.paths, strict=True):
        _same_arrival_verdicts(f, m)
        assert m.summarised == (1 - load,)
        assert m.bound_by_rank == f.bound_by_rank, m.step
        _check_against_json(m, files)


def _arrivals(rows: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    n = len(rows)
    return {
        "id": np.arange(10, 10 + n, dtype=np.int64),
        "collective": np.arange(n, dtype=np.int64),
        "ts": np.array([a for a, _ in rows], np.int64),
        "dur": np.array([b for _, b in rows], np.int64),
        "anchor": np.array([a for a, _ in rows], np.int64),
    }


def test_a_stand_in_chains_its_arrivals_forward_in_time() -> None:
    steps = {
        "id": np.array([1, 2], np.int64),
        "name": np.array(["ProfilerStep#0", "ProfilerStep#1"], object),
        "ts": np.array([0, 1_000], np.int64),
        "dur": np.array([1_000, 500], np.int64),
    }
    # step 0: two overlapping arrivals, one of 0 ns, one after both; step 1: one ending after
    # the step's CPU end (a GPU kernel); one arrival placed in no step
    arrivals = _arrivals([(100, 200), (150, 300), (450, 0), (600, 100), (1_400, 300), (5_000, 1)])
    s = stand_in(7, steps, arrivals, {})
    assert sorted(s.graphs) == ["ProfilerStep#0", "ProfilerStep#1"]
    g0, g1 = s.graphs["ProfilerStep#0"], s.graphs["ProfilerStep#1"]
    for g in (g0, g1):
        c, e = g.clip, g.edges
        t = np.empty(2 * c.n, np.int64)
        t[0::2], t[1::2] = c.ts, c.ts + c.dur
        assert (t[e.dst] >= t[e.src]).all() and (e.weight == t[e.dst] - t[e.src]).all()
        assert g.path.length == c.dur[0]  # no wait known: the path is the elapsed time
    # step 0: 0→(100, 150) as both start before any ends; 450 after 150's end (450); 600 after
    # 450's end; 600's end → the step's end
    c0 = g0.clip
    edges = {(int(a), int(b)) for a, b in zip(g0.edges.src, g0.edges.dst, strict=True)}
    row = {int(ts): r for r, ts in enumerate(c0.ts.tolist()) if r}
    assert (0, 2 * row[100]) in edges and (0, 2 * row[150]) in edges
    assert (2 * row[150] + 1, 2 * row[450]) in edges
    assert (2 * row[450] + 1, 2 * row[600]) in edges and (2 * row[600] + 1, 1) in edges
    assert c0.ts[0] + c0.dur[0] == 1_000
    assert g1.clip.ts[0] + g1.clip.dur[0] == 1_700  # lasts to its kernel's end
    assert (s.frame.position_of(np.array([10, 15, 99])) >= 0).tolist() == [True, True, False]


def test_equal_zero_length_arrivals_chain_and_a_rank_without_steps_has_no_graph() -> None:
    steps = {
        "id": np.array([1], np.int64),
        "name": np.array(["ProfilerStep#0"], object),
        "ts": np.array([0], np.int64),
        "dur": np.array([1_000], np.int64),
    }
    s = stand_in(3, steps, _arrivals([(500, 0), (500, 0), (500, 0)]), {})
    g = s.graphs["ProfilerStep#0"]
    assert g.path.length == 1_000  # a DAG (a loop would raise), the elapsed time
    pairs = set(zip(g.edges.src.tolist(), g.edges.dst.tolist(), strict=True))
    assert (2 * 1 + 1, 2 * 2) in pairs and (2 * 2 + 1, 2 * 3) in pairs  # 1 → 2 → 3
    none = {k: v[:0] for k, v in steps.items()}
    assert stand_in(4, none, _arrivals([(500, 10)]), {}).graphs == {}
