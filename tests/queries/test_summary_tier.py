"""The summary tier (`ingest --summary`): a rank's figures and findings equal the full report's
for the same rank on unlike real traces (CPU gloo with faults, sampled NCCL, ROCm, ns
timestamps, python stacks), its collectives and stragglers come from the arrivals alone, no
event is loaded, and a synthetic job's injected late host and slow GPU are named in every step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tracegraph
from tracegraph.examples.synthetic import write_per_rank
from tracegraph.examples.truth_jobs import BASE
from tracegraph.explorer.cli import main
from tracegraph.ingest import schema
from tracegraph.ingest.archive import archive_root
from tracegraph.queries.report import Report
from tracegraph.queries.report.rank_facts import OPERATOR_TABLES, RANK_TABLES
from tracegraph.queries.report.report import ReportError

from ..conftest import dump, needs_traces, trace

GLOO = Path(__file__).resolve().parents[1] / "data" / "gloo_4r"
REAL = {
    "cpu_ddp_2r_faults": trace("cpu_ddp_2r_faults"),  # CPU gloo, python stacks, findings
    "cpu_ddp_2r_memory": trace("cpu_ddp_2r_memory"),  # shapes: casts, large allocations
    "trace_filter": trace("hta/trace_filter"),  # sampled NCCL, 2 ranks
    "amd": trace("hta/amd_trace"),  # ROCm
    "ns_resolution": trace("hta/ns_resolution_trace"),  # ns timestamps
    "h100": trace("tracelens/traces/h100"),  # one rank, CUDA
}


def _both(name: str, folder: Path, tmp: Path, jobs: int = 1) -> tuple[Report, Report, Path]:
    full, summary = tmp / f"{name}-full.kz", tmp / f"{name}-summary.kz"
    tracegraph.open(full).ingest(folder, run=name, jobs=1)
    tracegraph.open(summary).ingest(folder, run=name, jobs=jobs, summary=True)
    return tracegraph.open(full).report(), tracegraph.open(summary).report(), summary


# costed less the rank's waits for a late one: the path's in full, the arrivals' in a summary
WAIT_CORRECTED = "unoverlapped_allreduce"


def _comparable(report: Report) -> list[tuple]:
    """The findings as the summary keeps them: not the path's (straggler), no saving, and the
    figures of those costed less the waits left out (`_transfers`)."""
    return sorted(
        (f.kind, f.rank, f.ranks, f.step, f.events, f.evidence_ids, f.evidence_cypher)
        + (() if f.kind == WAIT_CORRECTED else (f.cost_ns_per_step, f.detail))
        for f in report.findings
        if f.kind != "straggler"
    )


def _transfers(report: Report) -> dict[tuple[int, ...], int]:
    return {f.all_ranks: f.cost_ns_per_step for f in report.findings if f.kind == WAIT_CORRECTED}


@needs_traces
@pytest.mark.parametrize("name", sorted(REAL))
def test_a_summary_ranks_figures_equal_the_full_reports(name: str, tmp_path: Path) -> None:
    full, summary, db = _both(name, REAL[name], tmp_path)
    assert summary.summarised == summary.ranks and not full.summarised
    for table in (*RANK_TABLES, "collectives", "collective_ranks", "spread", "memory", "nodes"):
        if table in OPERATOR_TABLES:  # left to --full-ranks
            assert summary.tables[table].num_rows == 0, table
            continue
        assert summary.tables[table].equals(full.tables[table]), table
    assert summary.tables["op_perf"].num_rows == 0
    assert _comparable(summary) == _comparable(full)
    # the waits the arrivals show are the path's within 10% (trace_filter: 84.6 vs 80.3 ms)
    corrected, by_path = _transfers(summary), _transfers(full)
    assert corrected.keys() == by_path.keys()
    for ranks, cost in corrected.items():
        assert cost == pytest.approx(by_path[ranks], rel=0.10)
    assert all(f.saving_ns_per_step is None for f in summary.findings)
    assert summary.bound_by == {}
    # every collective arrival as the full ingest has it (anchors from the launches' calls)
    arrivals = (
        "MATCH (a:CollectiveArrival) RETURN a.id, a.rank, a.collective, a.ts, a.dur, a.anchor, "
        "a.args ORDER BY a.id"
    )
    full_arrivals = tracegraph.open(tmp_path / f"{name}-full.kz").query(arrivals).to_pylist()
    assert tracegraph.open(db).query(arrivals).to_pylist() == full_arrivals
    # nothing of the events is kept: no node, no rank rows, no copy of the traces
    g = tracegraph.open(db)
    counts = g.query("MATCH (n) RETURN label(n) AS label, count(*) AS n").to_pylist()
    tiers = g.query("MATCH (r:Rank) RETURN DISTINCT r.tier AS tier").to_pylist()
    labels = {r["label"]: r["n"] for r in counts}
    assert not {"Op", "Runtime", "Kernel"} & set(labels)
    assert tiers == [{"tier": "summary"}]
    (run_folder,) = archive_root(db).iterdir()
    assert not list(run_folder.glob("rank-*")) and not list((run_folder / "sources").iterdir())


@needs_traces
def test_the_stragglers_are_the_arrivals_verdict(tmp_path: Path) -> None:
    """Per step, the rank that arrived last at the step's collectives and made the others wait
    longest: on the real 4-rank gloo job whose rank 2 stalls 60 ms on data, rank 2 in every
    step, as the full report's path says."""
    full, summary, _ = _both("gloo", GLOO / "data_stall", tmp_path)
    stragglers = summary.tables["stragglers"].to_pylist()
    assert [s["rank"] for s in stragglers] == [2] * len(stragglers) and len(stragglers) >= 3
    by_path = full.tables["stragglers"].to_pylist()
    assert [(s["step"], s["rank"]) for s in stragglers] == [(s["step"], s["rank"]) for s in by_path]
    for s in stragglers:
        assert s["late_ns"] > 30_000_000  # it stalled 60 ms: well after the others' median


LATE, SLOW = 5, 11
INJECTED = replace(
    BASE, ranks=16, late_rank=LATE, late_us=20_000, slow_kernel_rank=SLOW, slow_kernel_factor=25.0
)


def test_a_summary_names_the_injected_late_host_and_slow_gpu_in_every_step(
    tmp_path: Path,
) -> None:
    files = write_per_rank(INJECTED, tmp_path / "traces")
    db = tmp_path / "fleet.kz"
    tracegraph.open(db).ingest(*files, run="fleet", summary=True, jobs=2)
    report = tracegraph.open(db).report()
    steps = sorted({r["step"] for r in report.tables["steps"].to_pylist()})
    assert len(steps) == INJECTED.steps
    spread = {(r["step"], r["metric"]): r for r in report.tables["spread"].to_pylist()}
    for step in steps:
        late = [int(r) for r in spread[(step, "late")]["outliers"].split()]
        assert late[0] == LATE and set(late) <= {LATE, SLOW}  # a slow GPU arrives late too
        assert spread[(step, "compute")]["outliers"].split() == [str(SLOW)]
    assert [s["rank"] for s in report.tables["stragglers"].to_pylist()] == [LATE] * len(steps)
    # findings repeated across ranks are folded: a few lines, not one per rank
    assert len(report.findings) <= 20
    assert len(pa.Table.from_pylist([f.to_json() for f in report.findings])) == len(
        {(f.kind, f.step) for f in report.findings}
    )


def test_what_needs_events_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = replace(BASE, ranks=2)
    files = write_per_rank(config, tmp_path / "traces")
    db = tmp_path / "two.kz"
    assert main(["ingest", *map(str, files), "--db", str(db), "--summary"]) == 0
    full = tracegraph.open(tmp_path / "full.kz")
    full.ingest(*files)
    loaded = {r["label"]: r["n"] for r in full.query(
        "MATCH (n) RETURN label(n) AS label, count(*) AS n").to_pylist()}  # fmt: skip
    totals = ", ".join(f"{loaded[k]:,} {k}" for k in ("Op", "Runtime", "Kernel"))
    assert f"events ({totals}) not loaded" in capsys.readouterr().out
    with pytest.raises(ReportError, match="summary of ranks 0, 1"):
        tracegraph.open(db).report(step=1)
    assert main(["report", str(db), "--hta-compatible"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--hta-compatible needs every rank's events" in err
    assert main(["report", str(db)]) == 0
    out = capsys.readouterr().out
    assert "summary tier: ranks 0, 1 kept as summaries" in out
    assert main(["info", str(db), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [r["tier"] for r in info["runs"][0]["ranks"]] == ["summary", "summary"]


def _rank_rows(db: Path, ranks: set[int]) -> dict[str, list]:
    """Every node and structural edge of these ranks (the dump, keyed by event id)."""
    out = {}
    for label, got in dump(db).items():
        if label in ("Rank", "Collective", "Step", "CollectiveArrival") or label.startswith("DEP"):
            continue
        if label in ("Op", "Runtime", "Kernel"):
            out[label] = [r for r in got if r["n.rank"] in ranks]
        else:
            out[label] = [e for e in got if schema.key_rank(e[0]) in ranks]
    return out


def test_full_ranks_auto_loads_the_injected_ranks_and_a_baseline_as_a_full_ingest_would(
    tmp_path: Path,
) -> None:
    files = write_per_rank(INJECTED, tmp_path / "traces")
    mixed, full = tmp_path / "mixed.kz", tmp_path / "full.kz"
    result = tracegraph.open(mixed).ingest(*files, run="fleet", summary=True, full_ranks="auto")
    assert result.full is not None
    loaded = set(result.full.ranks)
    assert {LATE, SLOW} < loaded and len(loaded) == 3  # and one typical rank
    tracegraph.open(full).ingest(*files, run="fleet")
    assert _rank_rows(mixed, loaded) == _rank_rows(full, loaded)
    g = tracegraph.open(mixed)
    tiers = g.query("MATCH (r:Rank) WHERE r.tier = 'full' RETURN r.rank AS rank ORDER BY rank")
    assert tiers["rank"].to_pylist() == sorted(loaded)
    # the report reads the loaded ranks' events and the others' summaries: the same figures
    mixed_report, full_report = g.report(), tracegraph.open(full).report()
    events_of = pa.array(sorted(set(mixed_report.ranks) - set(mixed_report.summarised)), pa.int64())
    assert events_of.to_pylist() == sorted(loaded)
    for table in RANK_TABLES:
        want = full_report.tables[table]
        if table in OPERATOR_TABLES:  # the loaded ranks' rows only
            want = want.filter(pc.is_in(want["rank"], value_set=events_of))
        assert mixed_report.tables[table].equals(want), table
    assert mixed_report.summarised == tuple(sorted(set(range(INJECTED.ranks)) - loaded))
    # and the graph of the loaded ranks is there to walk
    built = g.edges("native", all_steps=True)
    assert sorted(r.rank for r in built.ranks) == sorted(loaded)  # type: ignore[union-attr]


def test_full_ranks_later_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = replace(BASE, ranks=3)
    files = write_per_rank(config, tmp_path / "traces")
    db = tmp_path / "three.kz"
    assert main(["ingest", *map(str, files), "--db", str(db), "--summary"]) == 0
    assert main(["path", str(db)]) == 2
    assert "holds summaries of its 3 rank(s), not their events" in capsys.readouterr().err
    before = dump(db)
    files[1].unlink()  # rank 1's trace is gone: nothing of rank 0 is loaded either
    assert main(["ingest", "--db", str(db), "--full-ranks", "0,1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rank1" in err and "no such file" in err
    assert dump(db) == before
    (run_folder,) = archive_root(db).iterdir()
    assert not list(run_folder.glob("rank-*"))
    assert main(["ingest", "--db", str(db), "--full-ranks", "0"]) == 0
    assert "loaded rank 0 of run" in capsys.readouterr().out
    (run,) = tracegraph.open(db).runs().to_pylist()
    assert run["summary_ranks"] == [1, 2] and run["ranks"] == [0, 1, 2] and run["events"] > 0
    assert main(["runs", str(db), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(f",3,{run['events']},2")
    assert main(["ingest", "--db", str(db), "--full-ranks", "0"]) == 2
    assert "no summary rank(s) [0]" in capsys.readouterr().err
    assert main(["path", str(db)]) == 0
    captured = capsys.readouterr()
    assert (
        "the path joins rank 0 through events and ranks 1, 2 through collective arrivals"
        in captured.err
    )


@needs_traces
def test_a_database_from_before_tiers_reports_as_it_did(tmp_path: Path) -> None:
    """No CollectiveArrival table, no Rank.tier (an older tracegraph's database): the report
    reads the participants from the events, every rank has events, the same answer."""
    from tracegraph.ingest.store import GraphStore

    db = tmp_path / "old.kz"
    tracegraph.open(db).ingest(REAL["trace_filter"], run="old")
    before = tracegraph.open(db).report().to_json()
    with GraphStore(db, read_only=False) as store:
        store.run("DROP TABLE CollectiveArrival")
        store.run("ALTER TABLE Rank DROP tier")
    after = tracegraph.open(db).report()
    assert after.to_json() == before and after.summarised == ()
