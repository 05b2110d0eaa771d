"""`report`: its HTA-compatible figures equal HTA 0.5.0's own analyses of the same traces, and its
exact figures equal those computed again from the raw JSON (report_oracle.py), on real traces:
multi-rank NCCL, ns timestamps, ROCm, Triton, inference, many steps, CPU-only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracegraph
from tracegraph.explorer.cli import main

from ..conftest import TRACES, needs_traces
from . import report_oracle
from .hta_oracle import hta_oracle

SETS = {  # run → folder of one trace file per rank
    "trace_filter": "hta/trace_filter",
    "ns_resolution": "hta/ns_resolution_trace",
    "negative_queue": "hta/negative_queue_length_values_check",
    "nccl_data": "hta/nccl_parser_config",
    "alexnet": "hta/critical_path/alexnet",
    "mi300": "tracelens/traces/mi300",
    "b200": "tracelens/traces/b200",
    "sglang": "tracelens/traces/inference/sglang_decode/capture_traces",
}
ORACLE = Path(__file__).with_name("hta_report_oracle.py")


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tracegraph.Graph:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    g = tracegraph.open(tmp_path_factory.mktemp("report") / "runs.kuzu")
    for run, folder in SETS.items():
        g.ingest(TRACES / folder, run=run)
    g.ingest(TRACES / "cpu_ddp_2r", run="cpu_only")
    g.ingest(TRACES / "cpu_ddp_2r_faults", run="faults")
    return g


@pytest.fixture(scope="module")
def hta_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """HTA 0.5.0's analyses of every set, from its own environment."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    work = tmp_path_factory.mktemp("hta-report")
    jobs = [{"key": run, "trace_dir": str(TRACES / folder)} for run, folder in SETS.items()]
    (work / "jobs.json").write_text(json.dumps(jobs))
    out = work / "out.json"
    return hta_oracle("hta-0.5.0", ORACLE, out, work / "jobs.json", out)


@needs_traces
@pytest.mark.parametrize("run", list(SETS))
def test_hta_compatible_figures_are_htas_own(graph, hta_answers, run: str) -> None:
    hta = hta_answers[run]
    report = graph.report(run, hta_compatible=True, top=10)
    assert list(report.ranks) == hta["ranks"]

    ours = {r["rank"]: r for r in report.temporal.to_pylist()}
    for row in hta["temporal"]:
        mine = ours[row["rank"]]
        assert mine["kernel_time_ns"] == row["kernel_time(us)"] * 1000
        assert mine["idle_ns"] == row["idle_time(us)"] * 1000
        assert mine["compute_ns"] == row["compute_time(us)"] * 1000
        assert mine["non_compute_ns"] == row["non_compute_time(us)"] * 1000
        assert (mine["idle_pct"], mine["compute_pct"], mine["non_compute_pct"]) == (
            row["idle_time_pctg"], row["compute_time_pctg"], row["non_compute_time_pctg"]
        )  # fmt: skip

    overlap = {r["rank"]: r["overlap_pct"] for r in report.overlap.to_pylist()}
    assert overlap == {r["rank"]: r["comp_comm_overlap_pctg"] for r in hta["overlap"]}

    shares: dict[str, int] = {}  # HTA sums the shares over the ranks
    for r in report.kernel_types.to_pylist():
        shares[r["kernel_type"]] = shares.get(r["kernel_type"], 0) + r["total_ns"]
    assert shares == {r["kernel_type"]: r["sum"] * 1000 for r in hta["kernel_types"]}

    kernels = {(r["rank"], r["kernel_type"], r["name"]): r for r in report.top_kernels.to_pylist()}
    expected = {(r["rank"], r["kernel_type"], r["name"]): r for r in hta["all_kernels"]}
    _same_statistics(kernels, expected)

    idle = [
        (r["rank"], r["stream"], r["idle_category"], round(r["idle_ns"] / 1000, 2), r["ratio"])
        for r in report.idle.to_pylist()
    ]
    assert idle == [
        (r["rank"], r["stream"], r["idle_category"], r["idle_time"], r["idle_time_ratio"])
        for r in hta["idle"]
    ]

    annotations = {(r["rank"], r["name"]): r for r in report.tables["gpu_annotations"].to_pylist()}
    expected = {(r["rank"], r["name"]): r for r in hta["gpu_annotations"]}
    assert expected or run not in ("ns_resolution", "nccl_data", "mi300", "b200")  # they have some
    _same_statistics(annotations, expected)

    launches = {r["rank"]: r for r in report.launches.to_pylist()}
    for rank, pairs in hta["launches"].items():
        mine = launches[int(rank)]
        assert mine["launches"] == len(pairs)
        if pairs:
            delay = np.array([p["launch_delay"] for p in pairs]) * 1000
            call = np.array([p["cpu_duration"] for p in pairs]) * 1000
            assert mine["delay_mean_ns"] == pytest.approx(delay.mean(), rel=1e-12)
            assert (mine["delay_max_ns"], mine["call_p50_ns"]) == (delay.max(), np.median(call))


def _same_statistics(ours: dict[Any, dict], htas: dict[Any, dict]) -> None:
    """Our rows (ns) against HTA's (µs) of the same keys: total, min, max exactly, mean and
    standard deviation to float rounding."""
    assert ours.keys() == htas.keys()
    for key, row in htas.items():
        mine = ours[key]
        assert (mine["total_ns"], mine["min_ns"], mine["max_ns"]) == (
            row["sum (us)"] * 1000, row["min (us)"] * 1000, row["max (us)"] * 1000
        ), key  # fmt: skip
        assert mine["mean_ns"] == pytest.approx(row["mean (us)"] * 1000, rel=1e-12), key
        assert mine["std_ns"] == pytest.approx(row["stddev"] * 1000, rel=1e-9, abs=1e-6), key


@needs_traces
@pytest.mark.parametrize("run", list(SETS))
def test_exact_figures_equal_the_raw_json(graph, run: str) -> None:
    report = graph.report(run, top=10**6)  # every kernel named
    files = sorted(p for p in (TRACES / SETS[run]).iterdir() if p.name.endswith((".json", ".gz")))
    ranks = report.ranks
    assert len(files) == len(ranks)
    temporal = {r["rank"]: r for r in report.temporal.to_pylist()}
    overlap = {r["rank"]: r for r in report.overlap.to_pylist()}
    for rank, path in zip(ranks, files, strict=True):  # files sort in rank order here
        want = report_oracle.figures(path)
        got = temporal[rank]
        figures = ("kernel_time_ns", "idle_ns", "compute_ns", "non_compute_ns")
        assert tuple(got[f] for f in figures) == (
            want["span"], want["idle"], want["compute"], want["non_compute"]
        ), path  # fmt: skip
        assert (
            got["idle_host_wait_ns"] + got["idle_kernel_wait_ns"] + got["idle_other_ns"]
            == (got["idle_ns"])
        )
        assert (overlap[rank]["communication_ns"], overlap[rank]["overlapped_ns"]) == (
            want["communication"], want["overlapped"]
        )  # fmt: skip
        kernels = {
            (r["kernel_type"], r["name"]): (r["count"], r["total_ns"])
            for r in report.top_kernels.to_pylist()
            if r["rank"] == rank
        }
        assert kernels == want["kernels"]
        annotations = {
            r["name"]: (r["count"], r["total_ns"], r["min_ns"], r["max_ns"])
            for r in report.tables["gpu_annotations"].to_pylist()
            if r["rank"] == rank
        }
        assert annotations == want["gpu_annotations"], path


@needs_traces
def test_cpu_ddp_2r_rank_1_is_input_bound_and_the_straggler(graph) -> None:
    """The shared CPU DDP job: rank 1's data loader stalls ~60 ms each step (its `dataloader`
    range), so rank 1 arrives last at every step's all-reduce. HTA raises IndexError on CPU-only
    traces; the report gives zero GPU time, and the CPU-side findings."""
    report = graph.report("cpu_only")
    assert [r["kernel_time_ns"] for r in report.temporal.to_pylist()] == [0, 0]
    assert report.top_kernels.num_rows == 0
    kinds = {(f.kind, f.rank, f.step) for f in report.findings}
    assert kinds == {("input_bound", 1, None), ("straggler", 1, None)}  # one per late rank
    (late,) = [f for f in report.findings if f.kind == "straggler"]
    assert "in 3 of 3 steps (2, 3, 4) rank 1 arrived last" in late.detail
    (loading,) = [f for f in report.findings if f.kind == "input_bound"]
    # the raw JSON's "dataloader" ranges of rank 1, summed, per step
    raw = _ranges(TRACES / "cpu_ddp_2r" / "rank1.step5.pt.trace.json.gz", "dataloader")
    assert loading.cost_ns_per_step == sum(raw) // 3 and loading.events == 3
    for f in report.findings:
        if f.kind == "straggler":
            assert f.cost_ns_per_step > 30_000_000  # each other rank waited over 30 ms
    data = report.to_json()
    assert [s["straggler"]["rank"] for s in data["steps"]] == [1, 1, 1]
    assert set(data["steps"][0]["durations_us"]) == {"0", "1"}


def _optimizer_ops_per_step(path: Path) -> float:
    """Top-level aten ops inside the Optimizer.step ranges, per range, from the raw JSON."""
    import gzip

    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name")).startswith("Optimizer.step#")
    ]
    aten = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
            and e.get("cat") == "cpu_op" and str(e.get("name")).startswith("aten::")
            and any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in spans)]  # fmt: skip
    top = [x for x in aten if not any(o != x and o[0] <= x[0] and x[1] <= o[1] for o in aten)]
    return len(top) / len(spans)


def _ranges(path: Path, name: str) -> list[int]:
    """Durations (ns) of the complete events with this name, from the raw JSON."""
    import gzip
    from decimal import Decimal

    events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    return [int(Decimal(e["dur"]) * 1000) for e in events
            if e.get("ph") == "X" and e.get("name") == name]  # fmt: skip


@needs_traces
def test_the_labelled_faults_job_is_found_on_the_right_ranks(graph) -> None:
    """cpu_ddp_2r_faults (meta/run_meta.json): rank 0 runs gc.collect() over 150k cyclic
    objects inside every step, so rank 1 waits for it at the all-reduce; rank 1 casts to
    float64 and back around every Linear; both run 200 tiny elementwise ops per forward."""
    meta = json.loads((TRACES / "cpu_ddp_2r_faults" / "meta" / "run_meta.json").read_text())
    gc_rank, cast_rank = meta["args"]["gc_rank"], meta["args"]["cast_rank"]
    report = graph.report("faults")
    found = {(f.kind, r) for f in report.findings for r in f.all_ranks}
    assert found == {("gc_stall", gc_rank), ("straggler", gc_rank), ("implicit_casts", cast_rank),
                     ("small_op_storm", 0), ("small_op_storm", 1),
                     ("optimizer_dominance", 0), ("optimizer_dominance", 1)}  # fmt: skip
    # SGD on CPU tensors runs foreach=False: one op per parameter, as the raw JSON shows
    (optimizer,) = [f for f in report.findings if f.kind == "optimizer_dominance"]
    per_step = _optimizer_ops_per_step(
        TRACES / "cpu_ddp_2r_faults" / f"rank{optimizer.rank}.step6.pt.trace.json.gz"
    )
    assert f"running {per_step:,.0f} small ops per step" in optimizer.detail and per_step >= 24
    (gc,) = [f for f in report.findings if f.kind == "gc_stall"]
    assert "gc.collect" in gc.detail
    shown = graph.query(gc.evidence_cypher)["name"].to_pylist()
    assert "<built-in function collect>" in shown
    (straggler,) = [f for f in report.findings if f.kind == "straggler"]
    assert "in 4 of 4 steps (2, 3, 4, 5)" in straggler.detail  # every profiled step
    (casts,) = [f for f in report.findings if f.kind == "implicit_casts"]
    assert casts.events / 4 >= meta["args"]["layers"]  # a cast at each Linear, per step


@needs_traces
def test_findings_name_what_the_tables_show(graph) -> None:
    """trace_filter's ranks idle most of their span waiting on launches and run NCCL mostly
    exposed: both rules fire on both ranks, their cost is the table's figure per step, and
    their evidence query returns the events they name."""
    report = graph.report("trace_filter")
    # a rule firing on both ranks is one finding naming them, costing their mean
    rules = {f.kind: f for f in report.findings}
    assert rules["host_bound_gpu"].all_ranks == rules["unoverlapped_allreduce"].all_ranks == (0, 1)
    steps = {0: 2, 1: 2}
    idle = [r["idle_host_wait_ns"] // steps[r["rank"]] for r in report.temporal.to_pylist()]
    assert rules["host_bound_gpu"].cost_ns_per_step == sum(idle) // 2
    # exposed communication less the rank's waits for a late rank (the steps' verdicts)
    verdicts = [s.verdict for s in graph.step_paths(run="trace_filter") if s.verdict]
    waited = {r: sum(v.wait_ns[r] for v in verdicts) // len(verdicts) for r in (0, 1)}
    exposed = [
        max(0, (r["communication_ns"] - r["overlapped_ns"]) // steps[r["rank"]] - waited[r["rank"]])
        for r in report.overlap.to_pylist()
    ]
    assert (
        len(verdicts) == 2 and rules["unoverlapped_allreduce"].cost_ns_per_step == sum(exposed) // 2
    )
    savings = [f.saving_ns_per_step for f in report.findings if f.saving_ns_per_step is not None]
    assert savings == sorted(savings, reverse=True)  # most saving first
    for finding in report.findings:
        shown = graph.query(finding.evidence_cypher).column(0).to_pylist()
        assert sorted(shown) == sorted(finding.evidence_ids) and shown


@needs_traces
def test_the_cli_prints_findings_first_and_json_whole(graph, capsys) -> None:
    assert main(["report", str(graph.path), "--run", "trace_filter"]) == 0
    text = capsys.readouterr().out
    assert text.index("steps (ms:") < text.index("findings") < text.index("ranks at a glance")
    assert "GPU idle waiting for the CPU" in text and "temporal breakdown" not in text
    assert "every table (rows): " in text and "temporal (2)" in text
    assert main(["report", str(graph.path), "--run", "trace_filter", "--all"]) == 0
    text = capsys.readouterr().out
    assert text.index("findings") < text.index("temporal breakdown")
    assert main(["report", str(graph.path), "--run", "trace_filter", "--table", "temporal"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("\ntemporal breakdown") and "findings" not in text
    assert main(["report", str(graph.path), "--run", "ns_resolution", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "exact" and [r["rank"] for r in data["ranks"]] == [0]
    assert data["ranks"][0]["temporal"]["kernel_us"] == 480_029.179  # ns timestamps kept exact
    assert data["ranks"][0]["comm_comp_overlap_pct"] is None  # no communication
    assert [s["step"] for s in data["steps"]] == [101, 102, 103, 104, 105]
    assert main(["report", str(graph.path), "--run", "mi300", "--rank", "7"]) == 2
    assert "has no rank(s) [7]" in capsys.readouterr().err


@needs_traces
def test_a_step_is_the_gpu_work_its_calls_launched(graph, hta_answers) -> None:
    """trace_filter holds ProfilerStep#551 and #552; HTA analyses all but the last step, so its
    figures (whole µs in this trace) are step 551's: a check of which work a step owns."""
    steps = graph.report("trace_filter").steps.to_pylist()
    assert [(r["rank"], r["step"]) for r in steps] == [(0, 551), (0, 552), (1, 551), (1, 552)]
    first = graph.report("trace_filter", step=551)
    assert first.step == 551 and [r["step"] for r in first.steps.to_pylist()] == [551, 551]
    for row in hta_answers["trace_filter"]["temporal"]:
        (mine,) = [r for r in first.temporal.to_pylist() if r["rank"] == row["rank"]]
        assert (mine["kernel_time_ns"], mine["idle_ns"], mine["compute_ns"]) == (
            row["kernel_time(us)"] * 1000, row["idle_time(us)"] * 1000,
            row["compute_time(us)"] * 1000,
        )  # fmt: skip
        (step_row,) = [r for r in steps if (r["rank"], r["step"]) == (row["rank"], 551)]
        assert step_row["kernel_time_ns"] == mine["kernel_time_ns"]
    idle = {r["rank"]: r["idle_host_wait_ns"] for r in first.temporal.to_pylist()}
    for f in first.findings:  # one step: its cost is the whole figure (its ranks' mean)
        if f.kind == "host_bound_gpu":
            assert f.cost_ns_per_step == sum(idle[r] for r in f.all_ranks) // len(f.all_ranks)
    with pytest.raises(tracegraph.TracegraphError, match=r"no ProfilerStep#7 \(its steps: 551"):
        graph.report("trace_filter", step=7)
    with pytest.raises(tracegraph.TracegraphError, match="whole trace"):
        graph.report("trace_filter", step=551, hta_compatible=True)


@needs_traces
def test_sync_forcing_ops_are_found_as_the_raw_json_nests_them(graph) -> None:
    """negative_queue's `.to()` copies call cudaStreamSynchronize 75 times over 5 steps."""
    from tracegraph.queries.report.findings import BLOCKING_CALLS, SYNC_FORCING_OPS

    (path,) = (TRACES / SETS["negative_queue"]).iterdir()
    count, _, ends = report_oracle.calls_under(path, set(SYNC_FORCING_OPS), set(BLOCKING_CALLS))
    assert count == 75
    drained = report_oracle.gpu_idle_after(path, ends)
    report = graph.report("negative_queue")
    (finding,) = [f for f in report.findings if f.kind == "sync_forcing_op"]
    steps = len(report.steps)
    assert finding.events == count and steps == 5
    assert finding.cost_ns_per_step == drained // steps > 0
    shown = graph.query(finding.evidence_cypher)
    assert tuple(shown["runtime"].to_pylist()) == finding.evidence_ids
    assert set(shown["name"].to_pylist()) == {"cudaStreamSynchronize"}


@needs_traces
def test_compare_puts_two_runs_side_by_side_as_the_raw_json_has_them(graph, capsys) -> None:
    """cpu_ddp_2r against the faults job: step times matched by order (medians across ranks),
    and ops per rank and step, each equal to what the raw JSON gives."""
    import gzip
    from decimal import Decimal

    def events(folder: str) -> list[list[dict]]:
        files = sorted((TRACES / folder).glob("*.json.gz"))
        return [json.loads(gzip.decompress(f.read_bytes()), parse_float=Decimal)["traceEvents"]
                for f in files]  # fmt: skip

    def steps_ms(ranks: list[list[dict]]) -> list[float]:
        per_rank = [sorted((e["ts"], int(Decimal(e["dur"]) * 1000)) for e in r
                           if e.get("name", "").startswith("ProfilerStep#"))
                    for r in ranks]  # fmt: skip
        count = max(len(p) for p in per_rank)
        return [round(sorted(p[i][1] for p in per_rank if i < len(p))[len(per_rank) // 2] / 1e6,
                      3) for i in range(count)]  # fmt: skip

    def per_rank_step(ranks: list[list[dict]], name: str) -> float:
        calls = sum(1 for r in ranks for e in r if e.get("cat") == "cpu_op" and e["name"] == name)
        steps = sum(
            sum(1 for e in r if e.get("name", "").startswith("ProfilerStep#")) for r in ranks
        )
        return round(calls / steps, 2)

    a, b = events("cpu_ddp_2r"), events("cpu_ddp_2r_faults")
    comparison = graph.compare("faults", run="cpu_only", rows=10**6)
    steps = comparison.steps.to_pylist()
    want_a, want_b = steps_ms(a), steps_ms(b)
    assert [s["a_ms"] for s in steps] == want_a + [None] * (len(want_b) - len(want_a))
    assert [s["b_ms"] for s in steps] == want_b
    ops = {r["name"]: r for r in comparison.ops.to_pylist()}
    for name in ("aten::to", "aten::mm", "aten::add_"):
        assert (ops[name]["a_count"], ops[name]["b_count"]) == (
            per_rank_step(a, name), per_rank_step(b, name)
        )  # fmt: skip
    deltas = [abs(r["delta_us"]) for r in comparison.ops.to_pylist()]
    assert deltas == sorted(deltas, reverse=True)
    assert main(["report", str(graph.path), "--run", "cpu_only", "--compare", "faults"]) == 0
    assert "deltas are B − A" in capsys.readouterr().out
    assert main(["report", str(graph.path), "--compare", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_every_injected_fault_is_found_on_its_rank_and_a_clean_job_has_none(
    tmp_path: Path,
) -> None:
    """Synthetic jobs (no ../shared needed): a compute-bound clean job gets no findings; each
    catalog fault the generator injects, as its trace file labels it, is found on that rank."""
    from tracegraph.examples.synthetic import INJECTABLE_FAULTS, SyntheticConfig, write_per_rank

    clean = dict(ranks=2, steps=4, layers=4, straggler_factor=1.0, slow_gap_every=0,
                 stall_every=0, item_sync=False, gpu_scale=20, python_stacks=True)  # fmt: skip
    g = tracegraph.open(tmp_path / "jobs.kuzu")
    write_per_rank(SyntheticConfig(**clean), tmp_path / "clean")
    g.ingest(tmp_path / "clean", run="clean")
    assert g.report("clean").findings == ()
    for kind in INJECTABLE_FAULTS:
        files = write_per_rank(
            SyntheticConfig(**clean, faults=(kind,), fault_rank=1), tmp_path / kind
        )
        labels = [json.loads(f.read_text()).get("tracegraphFaults", []) for f in files]
        assert labels == [[], [{"kind": kind, "rank": 1, "steps": "all"}]]
        g.ingest(tmp_path / kind, run=kind)
        found = {(f.kind, r) for f in g.report(kind).findings for r in f.all_ranks}
        assert (kind, 1) in found, (kind, found)
        assert (kind, 0) not in found or kind == "schedule_distortion", (kind, found)


@needs_traces
@pytest.mark.parametrize("run", ["ns_resolution", "mi300", "trace_filter"])
def test_memory_copies_by_kind_are_the_raw_jsons(graph, run: str) -> None:
    """Count, time and bytes of each kind of copy equal a sum over the raw JSON's events."""
    import gzip
    from decimal import Decimal

    report = graph.report(run)
    files = sorted(p for p in (TRACES / SETS[run]).iterdir() if p.name.endswith(".gz"))
    for rank, path in zip(report.ranks, files, strict=True):
        events = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
        want: dict[str, list[int]] = {}
        for e in events:
            if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset"):
                name = e["name"]
                kind = "Memset" if name.startswith("Memset") else name[:11]
                entry = want.setdefault(kind, [0, 0, 0])
                entry[0] += 1
                entry[1] += int(Decimal(e["dur"]) * 1000)
                entry[2] += int(e.get("args", {}).get("bytes", 0))
        got = {r["kind"]: [r["count"], r["total_ns"], r["bytes"] or 0]
               for r in report.memory.to_pylist() if r["rank"] == rank}  # fmt: skip
        assert got == want and got, (run, rank)
