"""Two runs' call trees matched by structure (`queries/report/structure.py`, `report --compare`):
the alignment is a longest common subsequence; a slower GPU shows on exactly the ops whose
kernels it slowed; kernels renamed as on another vendor still match op by op; and on HTA's
trace-diff pair (rank 3 of an A100 job against rank 1 of a V100 job, the second with
torch.compile) every call of the compared steps is counted once and the kernel time under
them equals a plain-Python reading of the raw JSON."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.explorer.cli import main
from tracegraph.queries.report import structure
from tracegraph.queries.report.structure import aligned

from ..conftest import TRACES
from ..synthetic_traces import synthetic_rank_files
from .test_launchers import GPU, RUNTIME, _events, _ns, json_launch_owners

TREE = {"cpu_op", "user_annotation", "Operator"}
BASE = SyntheticConfig(ranks=2, steps=3, layers=4, python_stacks=True, annotate=True)


def _lcs_length(xs: list[str], ys: list[str]) -> int:
    table = [[0] * (len(ys) + 1) for _ in range(len(xs) + 1)]
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            table[i + 1][j + 1] = (
                table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
            )
    return table[-1][-1]


def _is_common_subsequence(pairs: list[tuple[int, int]], xs: list[str], ys: list[str]) -> bool:
    increasing = all(p[0] < q[0] and p[1] < q[1] for p, q in zip(pairs, pairs[1:], strict=False))
    return increasing and all(xs[i] == ys[j] for i, j in pairs)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcd"), max_size=14), st.lists(st.sampled_from("abcd"), max_size=14)
)
def test_siblings_align_by_a_longest_common_subsequence(xs: list[str], ys: list[str]) -> None:
    pairs = aligned(xs, ys)
    assert _is_common_subsequence(pairs, xs, ys)
    assert len(pairs) == _lcs_length(xs, ys)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=30), st.lists(st.sampled_from("abc"), max_size=30))
def test_siblings_too_many_for_the_table_split_and_stay_longest(
    xs: list[str], ys: list[str]
) -> None:
    """Past MAX_LCS_CELLS the lists are split (Hirschberg): the same length, in linear space."""
    old = structure.MAX_LCS_CELLS
    structure.MAX_LCS_CELLS = 4  # every list of more than 2 x 2 is split
    try:
        pairs = aligned(xs, ys)
    finally:
        structure.MAX_LCS_CELLS = old
    assert _is_common_subsequence(pairs, xs, ys) and len(pairs) == _lcs_length(xs, ys)


def _two_runs(tmp_path: Path, a: tuple[Path, ...], b: tuple[Path, ...]) -> tracegraph.Graph:
    graph = tracegraph.open(tmp_path / "two.db")
    graph.ingest(*a, run="a")
    graph.ingest(*b, run="b")
    return graph


def test_a_slower_gpu_shows_on_the_ops_whose_kernels_it_slowed(tmp_path: Path) -> None:
    """Run b is run a with rank 0's GEMMs 4x slower: every call has its counterpart, and the
    change in kernel time lands on the GEMM launchers, each exactly 3x its kernels' time in a."""
    slow = dataclasses.replace(BASE, slow_kernel_rank=0, slow_kernel_factor=4.0)
    graph = _two_runs(
        tmp_path,
        synthetic_rank_files("structure-a", BASE),
        synthetic_rank_files("structure-b", slow),
    )
    comparison = graph.compare("b", run="a", rank=0, rows=10**6)
    summary = comparison.structure_summary
    assert summary["only_a"] == summary["only_b"] == 0
    assert summary["matched"] == summary["a_nodes"] == summary["b_nodes"] > 100
    gemm = {"aten::mm", "aten::addmm"}
    changed = 0
    for row in comparison.structure.to_pylist():
        assert row["status"] == "both" and row["a_calls"] == row["b_calls"]
        leaf = row["path"].rsplit(" > ", 1)[-1]
        if leaf in gemm and row["a_gpu_us"]:
            assert row["delta_self_gpu_us"] == pytest.approx(3 * row["a_gpu_us"], abs=1e-3)
            changed += 1
        elif "all_reduce" not in row["path"]:  # the others' all-reduce waits less, not more
            assert row["delta_self_gpu_us"] == pytest.approx(0, abs=1e-3), row["path"]
    assert changed >= 2
    top = comparison.structure.to_pylist()[0]
    assert top["path"].rsplit(" > ", 1)[-1] in gemm  # the largest change is a GEMM's


def test_kernels_named_as_on_another_vendor_match_op_by_op(tmp_path: Path) -> None:
    """Run b is run a with every kernel renamed: by name no kernel has a counterpart, by
    structure every call has one with the same kernel time."""
    files = synthetic_rank_files("structure-a", BASE)
    renamed = []
    for path in files:
        doc = json.loads(path.read_text())
        for event in doc["traceEvents"]:
            if event.get("cat") in GPU:
                event["name"] = "hip_" + event["name"][::-1]
        out = tmp_path / path.name
        out.write_text(json.dumps(doc))
        renamed.append(out)
    graph = _two_runs(tmp_path, files, tuple(renamed))
    comparison = graph.compare("b", run="a", rank=1, rows=10**6)
    kernels = comparison.kernels.to_pylist()
    assert kernels and all(r["a_count"] == 0 or r["b_count"] == 0 for r in kernels)
    summary = comparison.structure_summary
    assert summary["matched"] == summary["a_nodes"] == summary["b_nodes"]
    assert summary["a_gpu_us"] == summary["b_gpu_us"] > 0
    for row in comparison.structure.to_pylist():
        assert row["a_gpu_us"] == row["b_gpu_us"] and row["a_cpu_us"] == row["b_cpu_us"]
        assert row["delta_self_gpu_us"] == 0


def json_step_calls(path: Path) -> tuple[int, int]:
    """The calls (CPU ops and annotations) of the trace's steps and the kernel time (ns) they
    launched, from the raw JSON: a call is its parent's step, else the step whose window (its
    ProfilerStep's start to the next one's) holds its start."""
    events = _events(path)
    complete = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e]
    steps = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for _, e in complete
        if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
    )
    windows = [(s, steps[k + 1][0] if k + 1 < len(steps) else e) for k, (s, e) in enumerate(steps)]

    def window_of(ts: int) -> int:
        return next((k for k, (s, e) in enumerate(windows) if s <= ts < e), -1)

    threads: dict[Any, list[tuple[int, int, int]]] = defaultdict(list)
    for i, e in complete:
        if e.get("cat") in TREE:
            start = _ns(e["ts"])
            threads[(e.get("pid"), e.get("tid"))].append((start, start + _ns(e["dur"]), i))
    home: dict[int, int] = {}
    holder: dict[tuple[Any, int], int] = {}  # (thread, call index) -> innermost op
    calls_of: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for i, e in complete:
        if e.get("cat") in RUNTIME:
            calls_of[(e.get("pid"), e.get("tid"))].append((_ns(e["ts"]), i))
    for thread, ops in threads.items():
        stack: list[tuple[int, int, int]] = []
        ops.sort(key=lambda o: (o[0], -o[1], o[2]))
        calls = sorted(calls_of.get(thread, []))
        c = 0
        for start, end, i in ops:
            while c < len(calls) and calls[c][0] < start:  # calls before this op starts
                while stack and stack[-1][1] < calls[c][0]:
                    stack.pop()
                if stack:
                    holder[(thread, calls[c][1])] = stack[-1][2]
                c += 1
            while stack and stack[-1][1] < end:
                stack.pop()
            parent = stack[-1][2] if stack else None
            home[i] = home[parent] if parent is not None and home[parent] >= 0 else window_of(start)
            stack.append((start, end, i))
        for at, k in calls[c:]:
            while stack and stack[-1][1] < at:
                stack.pop()
            if stack:
                holder[(thread, k)] = stack[-1][2]
    owner = json_launch_owners(complete)
    kernel_ns = 0
    for _, e in complete:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in GPU or corr not in owner:
            continue
        call = events[owner[corr][2]]
        op = holder.get(((call.get("pid"), call.get("tid")), owner[corr][2]))
        if op is not None and home[op] >= 0:
            kernel_ns += _ns(e["dur"])
    return sum(1 for h in home.values() if h >= 0), kernel_ns


def test_real_runs_count_every_call_once_as_the_raw_json_has_them(tmp_path: Path) -> None:
    control = TRACES / "hta/trace_diff/control/control.json.gz"
    test = TRACES / "hta/trace_diff/test/test.json.gz"
    if not (control.is_file() and test.is_file()):
        pytest.skip("../shared/traces/hta/trace_diff is absent")
    graph = _two_runs(tmp_path, (control,), (test,))
    comparison = graph.compare("b", run="a", rows=10**6)
    summary = comparison.structure_summary
    rows = comparison.structure.to_pylist()
    for side, path in (("a", control), ("b", test)):
        calls, kernel_ns = json_step_calls(path)
        assert summary[f"{side}_nodes"] == calls
        assert summary[f"{side}_gpu_us"] == pytest.approx(kernel_ns / 1e3, abs=1e-6)
        counted = sum(r[f"{side}_calls"] for r in rows if r["depth"] >= 0)
        assert counted == calls  # every call in one row, once
    assert summary["matched"] + summary["only_a"] == summary["a_nodes"]
    assert summary["matched"] + summary["only_b"] == summary["b_nodes"]
    for row in rows:
        if row["status"] == "both":
            assert row["a_calls"] == row["b_calls"]
        else:
            assert row["a_calls" if row["status"] == "only_b" else "b_calls"] == 0
    # what changed: torch.compile in b, so its compiled graphs have no counterpart in a
    assert any("CompiledFunction" in r["path"] and r["status"] == "only_b" for r in rows)
    # compared with itself, a run matches whole
    graph.ingest(control, run="a2")
    itself = graph.compare("a2", run="a", rows=10**6)
    assert itself.structure_summary["matched"] == summary["a_nodes"]
    assert all(
        r["delta_self_gpu_us"] == r["delta_self_cpu_us"] == 0 for r in itself.structure.to_pylist()
    )


def test_the_cli_says_what_was_matched(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    slow = dataclasses.replace(BASE, slow_kernel_rank=0, slow_kernel_factor=4.0)
    graph = _two_runs(
        tmp_path,
        synthetic_rank_files("structure-a", BASE),
        synthetic_rank_files("structure-b", slow),
    )
    assert main(["report", str(graph.path), "--run", "a", "--compare", "b", "--rank", "0"]) == 0
    text = capsys.readouterr().out
    assert "call trees matched op by op (rank 0 of A, rank 0 of B; 3 step(s) in order)" in text
    assert "0 only in A, 0 only in B" in text
    csv_args = ["--format", "csv", "--table", "structure"]
    assert main(["report", str(graph.path), "--run", "a", "--compare", "b", *csv_args]) == 0
    assert capsys.readouterr().out.startswith('"path","depth","status","a_calls","b_calls"')
    assert main(["report", str(graph.path), "--run", "a", "--compare", "b", "--rank", "7"]) == 2
    assert "has no loaded rank 7" in capsys.readouterr().err


def test_summary_runs_compare_without_their_call_trees(tmp_path: Path) -> None:
    """A run kept as summaries has no events: the steps still compare, the call trees say why
    they do not (the comparison is not refused)."""
    graph = tracegraph.open(tmp_path / "two.db")
    files = synthetic_rank_files("structure-a", BASE)
    graph.ingest(*files, run="a", summary=True)
    graph.ingest(*files, run="b", summary=True)
    comparison = graph.compare("b", run="a")
    assert comparison.steps.num_rows == BASE.steps and comparison.structure.num_rows == 0
    assert "holds summaries only" in str(comparison.structure_summary["not_compared"])
