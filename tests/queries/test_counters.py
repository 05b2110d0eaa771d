"""`counters`: CUPTI range-profiler counters joined to the operators that launched each kernel,
equal to HTA's own `get_cupti_counter_data_with_operators` (traceinsight 0.6.1 and HTA 0.5.0).

No shared trace was captured in CUPTI's profiler mode, so the job is a synthetic one rewritten as
that mode writes it: every kernel a `cuda_profiler_range` event (same name, thread and times)
whose args are its counters, and no kernel activity; copies and sets stay as they were. Each
range's counters are a function of its position, so a range paired with the wrong launch, or
counters of the wrong range, show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_merged, write_per_rank
from tracegraph.queries.report.counters import CATEGORY, STACK_SEPARATOR, counter_rows

from .hta_oracle import hta_oracle

ORACLE = Path(__file__).with_name("hta_counters_oracle.py")
JOB = SyntheticConfig(ranks=2, steps=2, layers=2, straggler_factor=1.0, stall_every=0,
                      slow_gap_every=0)  # fmt: skip
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
DRAM = "dram__bytes_read.sum"


def counter_mode(path: Path, drop_one: bool = False) -> dict[int, dict[str, float]]:
    """Rewrite the trace at `path` as CUPTI's range profiler writes it; the counters written,
    by the range's ev_idx. `drop_one`: the last range is lost (its launch stays), as when a
    range is not recorded."""
    trace = json.loads(path.read_text())
    events, written = [], {}
    kernels = [i for i, e in enumerate(trace["traceEvents"]) if e.get("cat") == "kernel"]
    lost = kernels[-1] if drop_one else None
    for i, event in enumerate(trace["traceEvents"]):
        if i == lost:
            continue
        if event.get("cat") == "kernel":
            counters = {FFMA: float(1000 * len(events) + 3), DRAM: float(7 * len(events))}
            event = {key: event[key] for key in ("ph", "name", "pid", "tid", "ts", "dur")}
            event |= {"cat": CATEGORY, "args": counters}
            written[len(events)] = counters
        events.append(event)
    trace["traceEvents"] = events
    path.write_text(json.dumps(trace))
    return written


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, dict], tracegraph.Graph]:
    """The job in counter mode (rank 1 with one range lost), ingested; its counters by rank
    and ev_idx."""
    base = tmp_path_factory.mktemp("counters")
    files = write_per_rank(JOB, base / "traces")
    written = {0: counter_mode(files[0]), 1: counter_mode(files[1], drop_one=True)}
    graph = tracegraph.open(base / "r.kuzu")
    graph.ingest(base / "traces", run="cupti")
    return base / "traces", written, graph


def test_every_counter_of_every_range_is_reported(job) -> None:  # noqa: ANN001
    _, written, graph = job
    report = graph.report("cupti")
    rows = report.tables["counters"].to_pylist()
    for rank in (0, 1):
        mine = [r for r in rows if r["rank"] == rank]
        got = {(r["ev_idx"], r["counter"]): r["value"] for r in mine}
        assert got == {(i, c): v for i, cs in written[rank].items() for c, v in cs.items()}
    # rank 1 lost a range: no launch is paired, as HTA pairs none (it drops the rank)
    assert all(r["launch_ev_idx"] is None and r["op_stack"] is None for r in rows if r["rank"] == 1)
    assert all(r["launch_ev_idx"] is not None for r in rows if r["rank"] == 0)
    # the JSON contract: per rank, the same rows in µs
    first = report.to_json()["ranks"][0]["counters"]
    assert len(first) == sum(1 for r in rows if r["rank"] == 0)
    assert first[0] == {k: v for k, v in rows[0].items() if k != "rank"}


@pytest.mark.parametrize("edge_set", ["traceinsight-0.6.1", "hta-0.5.0"])
def test_counters_equal_htas_own(job, edge_set: str, tmp_path: Path) -> None:  # noqa: ANN001
    folder, _, graph = job
    out = tmp_path / "hta.json"
    hta = hta_oracle(edge_set, ORACLE, out, folder, out, 0, 1)
    assert "1" not in hta  # its counts differ: HTA gives nothing for rank 1
    rows = [r for r in graph.report("cupti").tables["counters"].to_pylist() if r["rank"] == 0]
    ranges: dict[int, dict] = {}
    for r in rows:
        ranges.setdefault(r["ev_idx"], r | {"values": {}})["values"][r["counter"]] = r["value"]
    ours = list(ranges.values())  # in start order, as HTA's
    assert len(ours) == len(hta["0"]) > 20
    for mine, (name, _, stack, top, bottom, values) in zip(ours, hta["0"], strict=True):
        assert mine["kernel"] == name
        assert mine["op_stack"].split(STACK_SEPARATOR) == stack
        assert (mine["top_level_op"], mine["bottom_level_op"]) == (top, bottom)
        assert mine["values"] == values


def test_a_merged_file_gives_each_ranks_counters_as_its_own_file(job, tmp_path: Path) -> None:  # noqa: ANN001
    """The same job merged into one file (rank 1 whole this time): each range's counters are
    those written, and rank 0's kernels and operators those of its own file."""
    _, _, per_rank = job
    merged = tmp_path / "merged.json"
    write_merged(JOB, merged)
    written = counter_mode(merged)
    graph = tracegraph.open(tmp_path / "m.kuzu")
    graph.ingest(merged, run="merged")
    got = graph.report("merged").tables["counters"].to_pylist()
    assert {(r["ev_idx"], r["counter"]): r["value"] for r in got} == {
        (i, c): v for i, cs in written.items() for c, v in cs.items()
    }
    where = ("kernel", "top_level_op", "bottom_level_op", "op_stack", "counter")
    own = per_rank.report("cupti").tables["counters"].to_pylist()
    assert [[r[k] for k in where] for r in got if r["rank"] == 0] == [
        [r[k] for k in where] for r in own if r["rank"] == 0
    ]
    ones = [r for r in got if r["rank"] == 1]
    assert ones and all(r["op_stack"] for r in ones)  # paired: an operator each


def test_an_op_ending_as_the_launch_starts_does_not_hold_it() -> None:
    """As HTA's call stack: `aten::t` closes at 10 µs, where the launch opens: not its op."""
    events = pa.table(
        {
            "ev_idx": [0, 1, 2, 3],
            "ph": ["X"] * 4,
            "cat": ["cpu_op", "cpu_op", "cuda_runtime", CATEGORY],
            "name": ["aten::linear", "aten::t", "cudaLaunchKernel", "gemm"],
            "pid": [1, 1, 1, 0],
            "tid": [1, 1, 1, 7],
            "ts": [0, 0, 10_000, 20_000],
            "dur": [100_000, 10_000, 5_000, 3_000],
            "args": ["{}", "{}", "{}", json.dumps({FFMA: 5})],
        }
    )
    (row,) = counter_rows(0, events)
    assert (row["op_stack"], row["bottom_level_op"], row["value"]) == (
        "aten::linear",
        "aten::linear",
        5.0,
    )
