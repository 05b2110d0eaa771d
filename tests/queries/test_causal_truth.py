"""The causal story held by jobs whose truth is injected: one synthetic job per way a rank makes
the others wait (examples/truth_jobs.py), and real 4-rank gloo captures with a known late rank
(tests/data/gloo_4r, truth in each truth.json).

For each step: the verdict names the injected rank and what its time went to, its lateness is
the simulation's own (its collective arrivals, not the trace) within 5%, and the report's first
finding is that cause, saving within 10% of the delay injected, measured as the raw JSON's step
time against the same job without the injection.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.examples.truth_jobs import JOBS, TruthJob, lateness_ns
from tracegraph.ingest.edgesets.native.segments import flatten
from tracegraph.queries.report.findings import Finding

GLOO = Path(__file__).resolve().parents[1] / "data" / "gloo_4r"


def _step_ns(folder: Path) -> dict[int, int]:
    """Per ProfilerStep: the longest rank's step time, from the raw JSON."""
    out: dict[int, int] = {}
    for path in sorted(folder.glob("*.json*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            events = json.load(fh)["traceEvents"]
        for e in events:
            name = str(e.get("name", ""))
            if e.get("ph") == "X" and name.startswith("ProfilerStep#"):
                step = int(name.split("#")[1])
                out[step] = max(out.get(step, 0), round(float(e["dur"]) * 1000))
    return out


def _without_injection(config: SyntheticConfig) -> SyntheticConfig:
    return replace(config, late_rank=None, late_us=0, gc_rank=None, gc_us=0,
                   slow_kernel_rank=None)  # fmt: skip


@pytest.fixture(scope="module")
def truth_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, float]]:
    """Each job's database, and its injected delay per step (ns): its steps' time in the raw
    JSON less that of the same job without the injection."""
    base = tmp_path_factory.mktemp("truth")
    out = {}
    for name, job in JOBS.items():
        traces = write_per_rank(job.config, base / name)
        clean = write_per_rank(_without_injection(job.config), base / f"{name}-clean")
        injected, plain = _step_ns(traces[0].parent), _step_ns(clean[0].parent)
        delay = sum(injected[s] - plain[s] for s in injected) / len(injected)
        db = base / f"{name}.kuzu"
        tracegraph.open(db).ingest(*traces, run=name)
        out[name] = (db, delay)
    return out


@pytest.mark.parametrize("name", [n for n, j in JOBS.items() if j.rank is not None])
def test_each_step_names_the_injected_rank_its_cause_and_lateness(
    name: str, truth_dbs: dict[str, tuple[Path, float]]
) -> None:
    job = JOBS[name]
    db, _ = truth_dbs[name]
    truth = lateness_ns(job.config)
    stories = tracegraph.open(db).step_paths(depth=3)
    assert [s.step for s in stories] == [f"ProfilerStep#{i}" for i in range(job.config.steps)]
    for story in stories:
        v = story.verdict
        assert v is not None and v.straggler is not None, story.step
        step = int(story.step.split("#")[1])
        late_rank, late_ns = truth[step]
        assert v.straggler["rank"] == late_rank == job.rank
        assert v.straggler["lateness_ns"] == pytest.approx(late_ns, rel=0.05)
        assert v.bound_by_rank == job.rank
        assert _names(job, v.bound_by_op, v.hotspot, story.segments), (v.bound_by_op, v.hotspot)


def _names(job: TruthJob, op: str, hotspot: str, segments: tuple) -> bool:
    """The cause is named: the bound segment's or the hotspot's name, or a part of the bound
    segment."""
    wanted = job.cause.lower()
    if wanted in op.lower() or wanted in hotspot.lower():
        return True
    bound = [s for s in segments if s.name == op]
    return any(wanted in p.name.lower() for s in bound for p in flatten(s.children))


@pytest.mark.parametrize("name", [n for n, j in JOBS.items() if j.rank is not None])
def test_the_first_finding_is_the_cause_and_saves_the_injected_delay(
    name: str, truth_dbs: dict[str, tuple[Path, float]]
) -> None:
    job = JOBS[name]
    db, delay = truth_dbs[name]
    report = tracegraph.open(db).report()
    first = report.findings[0]
    assert job.rank in first.all_ranks, _summary(report.findings)
    assert first.kind in ("straggler", "gc_stall", "input_bound"), _summary(report.findings)
    assert first.saving_ns_per_step == pytest.approx(delay, rel=0.10), _summary(report.findings)
    # a waiting rank's "exposed communication" is the late rank's doing: it saves nothing
    for f in report.findings:
        if f.kind == "unoverlapped_allreduce" and job.rank not in f.all_ranks:
            assert (f.saving_ns_per_step or 0) < 0.02 * delay


def _summary(findings: tuple[Finding, ...]) -> str:
    return "; ".join(f"{f.kind} {f.all_ranks} saves {f.saving_ns_per_step}" for f in findings)


def test_a_clean_job_names_no_straggler(truth_dbs: dict[str, tuple[Path, float]]) -> None:
    db, _ = truth_dbs["clean"]
    stories = tracegraph.open(db).step_paths()
    assert stories and all(s.verdict is not None and s.verdict.straggler is None for s in stories)
    assert not [f for f in tracegraph.open(db).report().findings if f.kind == "straggler"]


# ---- real captures: 4 gloo ranks, one made late -------------------------------------------------
REAL = ["data_stall", "gc_python", "main_thread_gloo"]


@pytest.fixture(scope="module")
def gloo_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("gloo")
    out = {}
    for name in [*REAL, "clean"]:
        db = base / f"{name}.kuzu"
        tracegraph.open(db).ingest(GLOO / name, run=name)
        out[name] = db
    return out


@pytest.mark.parametrize("name", REAL)
def test_a_real_late_rank_is_the_straggler_the_bound_and_the_first_finding(
    name: str, gloo_dbs: dict[str, Path]
) -> None:
    truth = json.loads((GLOO / name / "truth.json").read_text())
    late = truth["injected_rank"]
    stories = tracegraph.open(gloo_dbs[name]).step_paths()
    assert len(stories) == truth["steps_profiled"]
    for story in stories:
        v = story.verdict
        assert v is not None and v.straggler is not None and v.straggler["rank"] == late
        # the wait it caused is most of the step's: the step is bound on it, not on a waiter
        assert v.bound_by_rank == late, (story.step, v.bound_by_rank, v.bound_by_op)
        if name != "main_thread_gloo":  # there, 16 collectives a step: ranks take turns
            # waiting is no work: what the late rank did before arriving carries the path
            assert sum(s.ns for s in story.segments if s.rank == late) > 0.5 * story.length_ns
    first = tracegraph.open(gloo_dbs[name]).report().findings[0]
    assert first.kind == "straggler" and first.rank == late
    # fixing it saves at least most of the injected delay (the rank's own time on top of it)
    injected_ns = truth["injected_delay_ms"] * 1e6
    assert first.saving_ns_per_step is not None
    assert first.saving_ns_per_step >= 0.6 * min(injected_ns, 0.9 * _median_step(stories))


def _median_step(stories: list) -> float:
    lengths = sorted(s.length_ns for s in stories)
    return float(lengths[len(lengths) // 2])


def test_one_host_is_one_clock(gloo_dbs: dict[str, Path]) -> None:
    """The four ranks' traces name one host: their clocks are not shifted (the issue's 1.9 ms
    offsets on one host read lateness 4-7 % low)."""
    for story in tracegraph.open(gloo_dbs["data_stall"]).step_paths():
        assert story.verdict is not None
        assert set(story.verdict.clock_offset_ns.values()) == {0}


def test_time_with_nothing_recorded_is_named_by_the_op_before_it(
    truth_dbs: dict[str, tuple[Path, float]], tmp_path: Path
) -> None:
    """gc_untraced: rank 1 pauses 15 ms with no python frame to name it. The straggler finding
    says so and points at the op the pause followed, found in the raw JSON as the op whose end
    opens a gap of over 14 ms in the rank's CPU ops."""
    job = JOBS["gc_untraced"]
    db, _ = truth_dbs["gc_untraced"]
    trace = write_per_rank(job.config, tmp_path / "t")[1]
    events = json.loads(_read(trace), parse_float=Decimal)["traceEvents"]
    ops = sorted(
        ((int(Decimal(e["ts"]) * 1000), int(Decimal(e["dur"]) * 1000), e["name"])
         for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime")),
    )  # fmt: skip
    before: list[tuple[str, int]] = []
    last_end, last = -1, None
    for ts, dur, name in ops:
        if last is not None and ts - last_end > 14_000_000:
            before.append((last[1], last[0]))
        if ts + dur > last_end:
            last_end, last = ts + dur, (ts, name)
    assert len(before) == job.config.steps
    g = tracegraph.open(db)
    (straggler,) = [f for f in g.report().findings if f.kind == "straggler"]
    assert straggler.rank == 1 and "no op recorded after" in straggler.detail
    shown = g.query(straggler.evidence_cypher).to_pylist()
    assert sorted((r["name"], r["ts"]) for r in shown) == sorted(before)


def _read(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return fh.read()
