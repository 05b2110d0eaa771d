"""Frequent kernel sequences (`queries/report/kernel_sequences.py`): each call's kernels in start
order and how often each sequence repeats. Held by HTA's own `get_frequent_cuda_kernel_sequences`
(traceinsight 0.6.1, from its environment) on the one shared multi-rank trace its call stack
reads (HTA's sampled 128-rank job; HTA stops with "Unexpected case" on most others), with HTA's
starting rule; and by a plain-Python reading of the raw JSON with tracegraph's own (the
outermost calls) on H100, B200, MI300 and HTA's traces."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import tracegraph
from tracegraph.explorer.cli import main
from tracegraph.ingest.edgesets.records import run_source
from tracegraph.queries.report.kernel_sequences import sequence_rows
from tracegraph.queries.report.report import archived_rank_sources

from ..conftest import TRACES
from .hta_oracle import hta_oracle
from .test_launchers import GPU, _events, _ns, json_launch_owners

ORACLE = Path(__file__).with_name("hta_sequences_oracle.py")
# operators whose calls HTA and tracegraph start from alike (for others HTA's call-stack depth,
# which counts its own way, picks a different shallowest set)
HTA_OPS = ["aten::linear", "autograd::engine", "Optimizer"]
RAW_TRACES = {
    "h100": "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "b200": "tracelens/traces/b200/eager_trace.json.gz",
    "mi300": "tracelens/traces/mi300/resnet_act_checkpoint.json.gz",
    "trace_filter": "hta/trace_filter/sampled_rank-0.json.gz",
    "alexnet": "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "ns_resolution": "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "resnet_2021": "kineto/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz",
}
CPU_RANGES = {"cpu_op", "user_annotation", "python_function", "Operator"}


def _rank_rows(db: Path, run: str) -> dict[int, Any]:
    with tracegraph.open(db).reading() as store:
        source = run_source(store, run)
        return {
            frame.rank: frame.rows
            for frame in archived_rank_sources(store.path, store, source, sorted(source.files))
        }


def test_sequences_equal_htas_own(tmp_path: Path) -> None:
    folder = TRACES / "hta/trace_filter"
    if not folder.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    out = tmp_path / "hta.json"
    hta = hta_oracle("traceinsight-0.6.1", ORACLE, out, folder, out, *HTA_OPS)
    tracegraph.open(tmp_path / "tf.db").ingest(folder, run="tf")
    compared = 0
    for rank, rows in _rank_rows(tmp_path / "tf.db", "tf").items():
        for op in HTA_OPS:
            ours = sequence_rows(rank, rows, None, None, op, min_kernels=1, shallowest=True)
            mine = {
                f"{r['op']}|{r['sequence']}": [r["count"], r["kernel_ns"] / 1e3, r["cpu_ns"] / 1e3]
                for r in ours
            }
            theirs = {p: [c, g, u] for p, c, g, u in hta[f"{rank}|{op}"]}
            assert mine.keys() == theirs.keys(), (rank, op)
            for pattern, (count, gpu_us, cpu_us) in theirs.items():
                assert mine[pattern][0] == count, (rank, op, pattern)
                # HTA reads this trace's whole µs; tracegraph the same values in ns
                assert mine[pattern][1:] == pytest.approx([gpu_us, cpu_us], abs=1e-6)
            compared += len(theirs)
    assert compared > 250


def json_sequences(path: Path, min_kernels: int = 2) -> Counter:
    """(op, kernel names in start order) → calls, from the raw JSON: each kernel's launching
    call, the outermost CPU op (cpu_op) on its thread holding it."""
    events = _events(path)
    complete = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e]
    ops: dict[Any, list[tuple[int, int, int]]] = defaultdict(list)
    for i, e in complete:
        old_format_op = e.get("cat") == "Operator" and "::" in e.get("name", "")
        if e.get("cat") == "cpu_op" or old_format_op:
            start = _ns(e["ts"])
            ops[(e.get("pid"), e.get("tid"))].append((start, start + _ns(e["dur"]), i))
    outermost: dict[Any, list[tuple[int, int, int]]] = {}
    for thread, spans in ops.items():
        spans.sort(key=lambda s: (s[0], -s[1], s[2]))
        kept: list[tuple[int, int, int]] = []
        for span in spans:  # not inside the outermost one before it
            if not kept or span[1] > kept[-1][1]:
                kept.append(span)
        outermost[thread] = kept
    owner = json_launch_owners(complete)
    kernels: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for i, e in complete:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in GPU or corr not in owner:
            continue
        call = events[owner[corr][2]]
        at = _ns(call["ts"])
        holding = [s for s in outermost.get((call.get("pid"), call.get("tid")), [])
                   if s[0] <= at <= s[1]]  # fmt: skip
        if holding:
            kernels[holding[0][2]].append((_ns(e["ts"]), i, e.get("name", "")))
    out: Counter = Counter()
    for op, launched in kernels.items():
        if len(launched) >= min_kernels:
            names = tuple(name for _, _, name in sorted(launched))
            out[(events[op].get("name", ""), names)] += 1
    return out


@pytest.mark.parametrize("name", list(RAW_TRACES))
def test_sequences_equal_the_raw_json(name: str, tmp_path: Path) -> None:
    path = TRACES / RAW_TRACES[name]
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    tracegraph.open(tmp_path / "one.db").ingest(path, run="one")
    (rows,) = _rank_rows(tmp_path / "one.db", "one").values()
    ours = sequence_rows(0, rows, None, None)
    expected = json_sequences(path)
    assert {(r["op"], tuple(r["sequence"].split("|"))): r["count"] for r in ours} == expected
    assert [r["count"] for r in ours] == sorted((r["count"] for r in ours), reverse=True)
    assert not any(r["op"].startswith("ProfilerStep#") for r in ours)  # a step is no op
    for row in ours:
        assert row["kernels"] == len(row["sequence"].split("|")) >= 2


def test_the_report_names_the_op_asked_for(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = TRACES / RAW_TRACES["trace_filter"]
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    db = tmp_path / "one.db"
    tracegraph.open(db).ingest(path, run="one")
    asked = ["report", str(db), "--sequence-op", "aten::linear", "--format", "json"]
    assert main(asked) == 0
    sequences = json.loads(capsys.readouterr().out)["ranks"][0]["kernel_sequences"]
    assert sequences and {s["op"] for s in sequences} == {"aten::linear"}
    assert all(s["kernel_us"] > 0 and s["count"] >= 1 for s in sequences)
    assert main(["report", str(db), "--format", "csv", "--table", "kernel_sequences"]) == 0
    assert capsys.readouterr().out.startswith('"rank","op","sequence","kernels","count"')
