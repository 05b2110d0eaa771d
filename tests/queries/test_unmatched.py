"""Unmatched collectives (`queries/report/unmatched.py`): a rank that skips a step's all-reduce
(a rank-specific `no_sync()`) or stops its loop early is named, with the step, the ranks
missing, the last collective every rank shared and the collectives that then crossed steps or
never completed; the counts are held by the raw JSON, the real gloo job's truth by its README,
and such instances are no lateness."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.queries.report import Report
from tracegraph.queries.report.collectives import Participants
from tracegraph.queries.report.steps import StepWindow
from tracegraph.queries.report.unmatched import KIND, unmatched

from ..conftest import TRACES

UNMATCHED = TRACES / "cpu_ddp_2r_unmatched"


def _json_counts(files: list[Path]) -> dict[int, Counter[int]]:
    """Per rank (file order), per ProfilerStep number: the collectives it ran, from the raw
    JSON: gloo ranges placed by their start, NCCL kernels by their launching call's."""
    out: dict[int, Counter[int]] = {}
    for rank, path in enumerate(files):
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        steps = [
            (float(e["ts"]), float(e["ts"]) + float(e["dur"]), int(e["name"].split("#")[1]))
            for e in events
            if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
        ]
        launches = {
            e["args"]["correlation"]: float(e["ts"])
            for e in events
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
        }
        counts: Counter[int] = Counter()
        for e in events:
            if e["name"].startswith("gloo:"):
                at = float(e["ts"])
            elif e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"):
                at = launches[e["args"]["correlation"]]
            else:
                continue
            counts.update(n for lo, hi, n in steps if lo <= at < hi)
        out[rank] = counts
    return out


def _finding(report: Report):  # noqa: ANN202
    found = [f for f in report.findings if f.kind == KIND]
    assert len(found) == 1
    assert report.findings[0].kind == KIND  # the job hangs: before any saving
    return found[0]


def test_the_real_gloo_job_that_skipped_an_allreduce(tmp_path: Path) -> None:
    files = sorted(UNMATCHED.glob("rank*.json.gz"))
    if len(files) != 2:
        pytest.skip(f"real traces not at {TRACES}")
    truth = json.loads((UNMATCHED / "meta" / "run_meta.json").read_text())
    skip_rank, skip_step = truth["args"]["skip_rank"], truth["args"]["skip_step"]
    counts = _json_counts(files)
    assert counts[skip_rank][skip_step] == 0 < counts[1 - skip_rank][skip_step]
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run="unmatched")
    report = tracegraph.open(db).report()
    f = _finding(report)
    assert (f.rank, f.ranks, f.step) == (skip_rank, (skip_rank,), skip_step)
    assert f"in ProfilerStep#{skip_step} rank {skip_rank} ran fewer allreduce" in f.detail
    assert f"rank {skip_rank}: 0; the others: {counts[1 - skip_rank][skip_step]} each" in f.detail
    rows = report.tables["unmatched"].to_pylist()
    crossed = [r for r in rows if len(set(json.loads(r["steps"]).values())) > 1]
    hung = [r for r in rows if json.loads(r["missing"])]
    # rank 1's two all-reduces pair with rank 0's of the step before; rank 0's last has none
    assert len(crossed) == 2 and len(hung) == 1
    assert json.loads(hung[0]["missing"]) == [skip_rank]
    for r in crossed:
        steps = json.loads(r["steps"])
        assert steps[str(skip_rank)] == steps[str(1 - skip_rank)] + 1
    # the hung one waited to the trace's end: its gloo range's duration in the JSON
    last = max(
        (e for e in _gloo(files[1 - skip_rank])), key=lambda e: float(e["ts"])
    )  # fmt: skip
    assert hung[0]["waited_ns"] == pytest.approx(float(last["dur"]) * 1e3, abs=1_000)
    assert "no collective every rank shared in the same step before it" in f.detail
    # arrivals from different steps are no lateness: no rank is late, none the straggler
    assert not [s for s in report.tables["spread"].to_pylist() if s["metric"] == "late"]
    assert report.tables["stragglers"].num_rows == 0
    assert [x["kind"] for x in report.to_json()["findings"]][0] == KIND
    assert report.to_json()["unmatched"] and len(report.to_json()["unmatched"]) == len(rows)
    # a summary of the same job tells the same (from the arrivals alone)
    summary = tmp_path / "summary.kuzu"
    tracegraph.open(summary).ingest(*files, run="unmatched", summary=True)
    again = tracegraph.open(summary).report()
    assert _finding(again).detail == f.detail
    assert again.tables["unmatched"].to_pylist() == rows


def _gloo(path: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("gloo:")]


@pytest.mark.parametrize(
    ("shape", "config", "missing", "step"),
    [
        ("no_sync", SyntheticConfig(ranks=4, steps=4, layers=8, no_sync=(1, 1)), 1, 1),
        ("stop early", SyntheticConfig(ranks=4, steps=4, layers=8, stop_early_rank=2), 2, 3),
    ],
)
def test_an_injected_unmatched_collective_is_named(
    shape: str, config: SyntheticConfig, missing: int, step: int, tmp_path: Path
) -> None:
    files = write_per_rank(config, tmp_path / "traces")
    counts = _json_counts(files)
    buckets = config.buckets
    assert counts[missing][step] == 0
    assert all(counts[r][step] == buckets for r in range(config.ranks) if r != missing)
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run=shape.replace(" ", "_"))
    report = tracegraph.open(db).report()
    f = _finding(report)
    assert (f.rank, f.ranks, f.step) == (missing, (missing,), step)
    rows = report.tables["unmatched"].to_pylist()
    crossed = [r for r in rows if len(set(json.loads(r["steps"]).values())) > 1]
    hung = [r for r in rows if json.loads(r["missing"])]
    others = [r for r in range(config.ranks) if r != missing]
    # the others' last step's all-reduces never complete: nobody else comes
    assert len(hung) == buckets
    assert all(json.loads(r["ranks"]) == others for r in hung)
    if shape == "no_sync":
        # every later all-reduce of the skipping rank pairs with the others' of the step before
        assert len(crossed) == buckets * (config.steps - 1 - step)
        assert f"the last collective every rank shared: allreduce #{buckets} " in f.detail
    else:
        assert not crossed
        last = buckets * (config.steps - 1)
        assert f"the last collective every rank shared: allreduce #{last} " in f.detail
    # from the divergence on, the skipping rank is never read as late; a rank of the others'
    # step that stalls (the generator's data-loader stall) still is, where everyone waited for
    # it (the stragglers are the cross-rank path's verdicts: it agrees with the arrivals)
    stragglers = {s["step"]: s["rank"] for s in report.tables["stragglers"].to_pylist()}
    for at, rank in stragglers.items():
        assert at < step or rank == config.stall_rank(at), (at, rank)
    if shape == "no_sync":
        assert stragglers[step + 1] == config.stall_rank(step + 1) != missing
    late = [s for s in report.tables["spread"].to_pylist() if s["metric"] == "late"]
    assert all(s["step"] < step or s["max_rank"] == config.stall_rank(s["step"]) for s in late)
    # the hang (50 ms per collective) is the divergence's, not communication to overlap
    exposed = [x for x in report.findings if x.kind == "unoverlapped_allreduce"]
    assert all((x.saving_ns_per_step or 0) < 1_000_000 for x in exposed)
    assert all(x.cost_ns_per_step < 1_000_000 for x in exposed)


def test_a_matched_job_has_none(tmp_path: Path) -> None:
    files = write_per_rank(SyntheticConfig(ranks=4, steps=3, layers=8), tmp_path / "traces")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run="clean")
    report = tracegraph.open(db).report()
    assert report.tables["unmatched"].num_rows == 0
    assert not [f for f in report.findings if f.kind == KIND]
    assert report.to_json()["unmatched"] == []


def _participants(rows: list[tuple[int, int, int, int]]) -> Participants:
    """(instance, rank, ts, dur) rows, instances in order, an allreduce of group "0" each."""
    rows = sorted(rows)
    n = len(rows)
    return Participants(
        np.array([i for i, _, _, _ in rows], np.int64),
        [("allreduce", "0", k) for k in range(max(i for i, _, _, _ in rows) + 1)],
        np.array([r for _, r, _, _ in rows], np.int64),
        np.array([t for _, _, t, _ in rows], np.int64),
        np.array([t + d for _, _, t, d in rows], np.int64),
        [""] * n,
        np.arange(n, dtype=np.int64),
        np.array([t for _, _, t, _ in rows], np.int64),
    )


def _windows(rank: int, steps: int) -> list[StepWindow]:
    return [
        StepWindow(rank, s, f"ProfilerStep#{s}", s * 100, 100, (s + 1) * 100) for s in range(steps)
    ]


def test_a_rank_without_steps_or_with_fewer_profiled_is_no_divergence() -> None:
    # three matched all-reduces, one per step; rank 1's trace has no ProfilerStep annotations
    p = _participants([(k, r, k * 100 + 10 + r, 5) for k in range(3) for r in (0, 1)])
    found = unmatched(p, {0: _windows(0, 3)}, 3, 0)
    assert found.rows == [] and found.findings == []
    # rank 1's profiled steps begin a step later: its first step is no skip
    p = _participants(
        [(k, r, k * 100 + 10 + r, 5) for k in range(3) for r in (0, 1) if (k, r) != (0, 1)]
    )
    later = {0: _windows(0, 3), 1: _windows(1, 3)[1:]}
    found = unmatched(p, later, 3, 0)
    assert [f.kind for f in found.findings] == [KIND]  # instance 0 misses rank 1 ...
    assert "ran fewer" not in found.findings[0].detail  # ... but no step is counted short
    # two equal 0 ns all-reduces on a rank that skipped none: matched, no row
    p = _participants([(k, r, 10 + r, 0) for k in range(2) for r in (0, 1)])
    assert unmatched(p, {0: _windows(0, 1), 1: _windows(1, 1)}, 1, 0).rows == []
