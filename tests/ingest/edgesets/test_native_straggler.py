"""The cross-rank path names the rank the others waited for, with its lateness, and holds the
invariants against the raw JSON: on a synthetic job with an injected late rank (python stacks and
nested ranges on) and on the real CPU DDP jobs, whose faults are known."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest.edgesets.native.edge_set import NativeEdgeSetResult, build_native_edge_set
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ...conftest import TRACES
from ..oracle import trace_facts

LATE_RANK, LATE_US = 2, 40_000
LATE = SyntheticConfig(
    ranks=4,
    steps=4,
    layers=8,
    straggler_factor=1.0,
    late_rank=LATE_RANK,
    late_us=LATE_US,
    python_stacks=True,
    annotate=True,
)


def _late_us(step: int) -> int:
    """The injected lateness of a step: the sleep, plus the data-loader stall where the
    generator stalls the late rank too."""
    return LATE_US + (LATE.stall_us if LATE.stall_rank(step) == LATE_RANK else 0)


@pytest.fixture(scope="module")
def late_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("late")
    files = write_per_rank(LATE, folder / "traces")
    db = folder / "late.kuzu"
    ingest(files, db, IngestOptions(run="late"))
    return db, files


def _check_paths_against_json(result: NativeEdgeSetResult, files: dict[int, Path]) -> None:
    """Every cross-rank path edge forward in time on the aligned clocks, weights within their
    Δt, the path no longer than its step's span: times from the JSON text, not the builder."""
    times = {
        rank: {e.ev_idx: (e.ts, e.dur or 0) for e in trace_facts(path).events()}
        for rank, path in files.items()
    }
    assert result.cross_rank
    for path in result.cross_rank:

        def t(rank: int, ev: int, start: bool, path=path) -> int:
            ts, dur = times[rank][ev]
            return (ts if start else ts + dur) - path.clock_offset_ns[rank]

        first = last = None
        for e in path.edges:
            a = t(e.src_rank, e.src_ev_idx, e.src_start)
            b = t(e.dst_rank, e.dst_ev_idx, e.dst_start)
            assert a <= b and 0 <= e.weight_ns <= b - a, e
            first = a if first is None else min(first, a)
            last = b if last is None else max(last, b)
        assert first is not None and last is not None
        assert path.length_ns == sum(e.weight_ns for e in path.edges)
        assert path.length_ns <= last - first <= path.span_ns


def test_the_late_rank_is_named_in_every_step_with_its_lateness(
    late_job: tuple[Path, list[Path]],
) -> None:
    db, files = late_job
    result = build_native_edge_set(db, all_steps=True)
    assert [p.step for p in result.cross_rank] == [f"ProfilerStep#{i}" for i in range(LATE.steps)]
    for step, path in enumerate(result.cross_rank):
        s = path.straggler
        assert s is not None and s.rank == LATE_RANK
        assert s.lateness_ns == pytest.approx(_late_us(step) * 1000, rel=0.05)
        assert s.last_at == s.collectives == LATE.buckets
        # every other rank waited about the lateness at the first collective of the step
        assert s.caused_wait_ns >= (LATE.ranks - 1) * 0.95 * LATE_US * 1000
        assert path.bound_by_rank == LATE_RANK
        # its heaviest top-level segment is the data loader; inside it, the sleep
        assert path.bound_by_op == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        assert path.hotspot == "sleep"  # the python frame, readable
        assert path.wait_ns[LATE_RANK] < min(w for r, w in path.wait_ns.items() if r != LATE_RANK)
        assert all(abs(o) < 1_000_000 for o in path.clock_offset_ns.values())  # one clock
    _check_paths_against_json(result, dict(enumerate(files)))


def test_edges_all_steps_prints_each_step_and_its_straggler(
    late_job: tuple[Path, list[Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = late_job
    assert main(["edges", str(db), "--native", "--all-steps"]) == 0
    out = capsys.readouterr().out
    for rank in range(LATE.ranks):
        for step in range(LATE.steps):  # one line per rank and step, never a sum
            assert re.search(rf"rank {rank} ProfilerStep#{step}: path [\d,]+ µs in a", out)
    verdicts = re.findall(
        r"ProfilerStep#(\d+): across ranks .* straggler rank (\d+): last at (\d+) of (\d+) "
        r"collectives, ([\d,]+) µs after",
        out,
    )
    assert [int(v[0]) for v in verdicts] == list(range(LATE.steps))
    for step, rank, _, _, late in verdicts:
        assert int(rank) == LATE_RANK
        assert int(late.replace(",", "")) == pytest.approx(_late_us(int(step)), rel=0.05)


@pytest.mark.parametrize(
    ("folder", "straggler"),
    [
        ("cpu_ddp_2r", 1),  # rank 1: a 60 ms data stall every step
        ("cpu_ddp_2r_faults", 0),  # rank 0: gc.collect() in every step; rank 1 waits
    ],
)
def test_real_cpu_ddp_jobs_name_the_rank_that_stalls(
    folder: str, straggler: int, tmp_path: Path
) -> None:
    files = sorted((TRACES / folder).glob("rank*.json.gz"))
    if len(files) != 2:
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "run.kuzu"
    ingest(files, db, IngestOptions(run=folder))
    result = build_native_edge_set(db, all_steps=True)
    for path in result.cross_rank:
        assert path.straggler is not None and path.straggler.rank == straggler, path.step
        assert path.bound_by_rank == straggler
        other = 1 - straggler
        assert path.wait_ns[other] > path.wait_ns[straggler]
    _check_paths_against_json(result, dict(enumerate(files)))


def test_nccl_job_paths_hold_the_invariants(tmp_path: Path) -> None:
    files = sorted((TRACES / "hta/trace_filter").glob("*.json.gz"))
    if len(files) != 2:
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "run.kuzu"
    ingest(files, db, IngestOptions(run="nccl"))
    result = build_native_edge_set(db, all_steps=True)
    assert len(result.cross_rank) == 2
    _check_paths_against_json(result, dict(enumerate(files)))


def test_a_rank_on_another_clock_is_aligned_by_its_collectives(tmp_path: Path) -> None:
    """Rank 0's host clock runs 5 s ahead (its every timestamp shifted): the offset is found
    from the collectives' ends, and the late rank and its lateness are the same as before."""
    files = write_per_rank(LATE, tmp_path / "traces")
    skew_us = 5_000_000
    text = files[0].read_text()
    files[0].write_text(re.sub(r'"ts": (\d+)\.', lambda m: f'"ts": {int(m[1]) + skew_us}.', text))
    db = tmp_path / "skewed.kuzu"
    ingest(files, db, IngestOptions(run="skewed"))
    result = build_native_edge_set(db, all_steps=True)
    for step, path in enumerate(result.cross_rank):
        offsets = path.clock_offset_ns
        assert offsets[0] - offsets[1] == pytest.approx(skew_us * 1000, abs=1_000_000)
        s = path.straggler
        assert s is not None and s.rank == LATE_RANK
        assert s.lateness_ns == pytest.approx(_late_us(step) * 1000, rel=0.05)
        assert path.bound_by_rank == LATE_RANK
    _check_paths_against_json(result, dict(enumerate(files)))
