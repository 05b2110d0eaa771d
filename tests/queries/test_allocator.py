"""The caching allocator's timeline (`queries/report/allocator.py`, MemoryEvent nodes): every
figure of the report's `allocator` table computed again from the raw JSON's `[memory]` instants
in plain Python (json, Decimal, loops), on every shared trace that has them (CPU DDP with
`profile_memory`, an H100 training step, vLLM and SGLang CUDA-graph captures); the summary tier
gives the same rows; each MemoryEvent's op is the innermost CPU range that holds it."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

import tracegraph
from tracegraph.queries.report.allocator import device_name

from ..conftest import TRACES
from ..ingest.merge import write_merged

MEMORY_TRACES = {
    "cpu_ddp_2r_memory": sorted((TRACES / "cpu_ddp_2r_memory").glob("rank*.json.gz")),
    "h100": [TRACES / "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"],
    "vllm": [
        TRACES / "tracelens/traces/inference/vllm_decode_full/capture_traces/"
        "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
    ],
    "sglang": [
        TRACES / "tracelens/traces/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz"
    ],
}
NAMED = {"user_annotation", "cpu_op", "Operator", "cuda_runtime", "Runtime"}


def _ns(value: Any) -> int:
    return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))


def _document(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)


def json_allocator(path: Path) -> list[dict[str, Any]]:
    """The allocator rows of one single-rank trace file, from its raw JSON."""
    events = _document(path)["traceEvents"]
    memory = sorted(
        (
            (_ns(e["ts"]), i, e)
            for i, e in enumerate(events)
            if e.get("ph") == "i" and e.get("name") == "[memory]"
        ),
        key=lambda m: (m[0], m[1]),
    )
    steps = sorted(
        (_ns(e["ts"]), _ns(e["dur"]), int(e["name"][len("ProfilerStep#") :]))
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") in ("user_annotation", "Operator")
        and e.get("name", "").startswith("ProfilerStep#")
        and e["name"][len("ProfilerStep#") :].isdigit()
    )
    windows = [
        (n, ts, steps[k + 1][0] if k + 1 < len(steps) else ts + dur)
        for k, (ts, dur, n) in enumerate(steps)
    ]
    if not windows:  # the whole trace, from the rank's first event
        first = min(
            _ns(e["ts"]) for e in events if e.get("ph") == "X" and "dur" in e
            and e.get("cat") not in (None, "Trace")
        )  # fmt: skip
        windows = [(-1, min(first, memory[0][0]), memory[-1][0] + 1)]
    ranges = [
        (e.get("pid"), e.get("tid"), _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), e["name"])
        for e in events
        if e.get("ph") == "X" and e.get("cat") in NAMED
    ]
    freed_at: dict[int, int] = {}  # position in `memory` of an allocation -> its free's time
    last_at: dict[tuple, int] = {}
    for k, (ts, _, e) in enumerate(memory):
        a = e["args"]
        key = (a["Device Type"], a["Device Id"], a["Addr"])
        before = last_at.get(key)
        if before is not None and memory[before][2]["args"]["Bytes"] > 0 and a["Bytes"] < 0:
            freed_at[before] = ts
        last_at[key] = k
    rows = []
    devices = sorted({(m[2]["args"]["Device Type"], m[2]["args"]["Device Id"]) for m in memory})
    for device in devices:
        for step, start, end in windows:
            mine = [
                k
                for k, (ts, _, e) in enumerate(memory)
                if (e["args"]["Device Type"], e["args"]["Device Id"]) == device
                and start <= ts < end
            ]
            if not mine:
                continue
            args = [memory[k][2]["args"] for k in mine]
            peak, peak_k = args[0]["Total Allocated"] - args[0]["Bytes"], None
            start_bytes = peak
            for k, a in zip(mine, args, strict=True):
                if a["Total Allocated"] > peak:
                    peak, peak_k = a["Total Allocated"], k
            holding = ""
            if peak_k is not None:
                ts, _, e = memory[peak_k]
                held = sorted(
                    (s, -t, name)
                    for pid, tid, s, t, name in ranges
                    if (pid, tid) == (e.get("pid"), e.get("tid")) and s <= ts <= t
                )
                holding = " > ".join(name for _, _, name in held)
            short = [
                k for k in mine if memory[k][2]["args"]["Bytes"] > 0 and freed_at.get(k, end) < end
            ]
            rows.append(
                {
                    "device": device_name(*device),
                    "step": step,
                    "allocations": sum(1 for a in args if a["Bytes"] > 0),
                    "frees": sum(1 for a in args if a["Bytes"] < 0),
                    "allocated_bytes": sum(a["Bytes"] for a in args if a["Bytes"] > 0),
                    "freed_bytes": -sum(a["Bytes"] for a in args if a["Bytes"] < 0),
                    "start_bytes": start_bytes,
                    "end_bytes": args[-1]["Total Allocated"],
                    "peak_bytes": peak,
                    "peak_offset_ns": memory[peak_k][0] - start if peak_k is not None else 0,
                    "peak_in": holding,
                    "reserved_at_peak_bytes": (
                        memory[peak_k][2]["args"]["Total Reserved"]
                        if peak_k is not None
                        else _reserved_before(memory, device, start)
                    ),
                    "max_reserved_bytes": max(a["Total Reserved"] for a in args),
                    "short_lived": len(short),
                    "short_lived_bytes": sum(memory[k][2]["args"]["Bytes"] for k in short),
                }
            )
    return rows


def _reserved_before(memory: list, device: tuple, start: int) -> int:
    """The device's reserved bytes after its last event before `start` (-1: none)."""
    found = -1
    for ts, _, e in memory:
        a = e["args"]
        if ts < start and (a["Device Type"], a["Device Id"]) == device:
            found = a["Total Reserved"]
    return found


def _rank_of(path: Path) -> int:
    info = _document(path).get("distributedInfo") or {}
    return int(info.get("rank", 0))


def _present(name: str) -> list[Path]:
    files = MEMORY_TRACES[name]
    if not files or not all(f.is_file() for f in files):
        pytest.skip(f"real traces not at {TRACES}")
    return files


@pytest.mark.parametrize("name", sorted(MEMORY_TRACES))
def test_allocator_rows_equal_the_raw_json(name: str, tmp_path: Path) -> None:
    files = _present(name)
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run=name)
    report = tracegraph.open(db).report()
    got = report.tables["allocator"].to_pylist()
    want = []
    for path in files:
        rank = _rank_of(path) if len(files) > 1 else report.ranks[0]
        want += [{"rank": rank, **row} for row in json_allocator(path)]
    key = lambda r: (r["rank"], r["device"], r["step"])  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)
    assert want  # every one of these traces has some
    for row in got:  # invariants: a peak is no lower than where the step starts or ends
        assert row["peak_bytes"] >= max(row["start_bytes"], row["end_bytes"])
        assert row["end_bytes"] - row["start_bytes"] == row["allocated_bytes"] - row["freed_bytes"]


def test_the_churning_rank_and_the_recomputing_rank(tmp_path: Path) -> None:
    """The real job's README: rank 0 allocates and frees scratch tensors of 6-48 MB inside a
    `scratch_buffers` range every step, rank 1 recomputes activations in backward."""
    files = _present("cpu_ddp_2r_memory")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run="memory")
    report = tracegraph.open(db).report()
    rows = report.tables["allocator"].to_pylist()
    by_rank: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_rank[row["rank"]].append(row)
    assert len(by_rank[0]) == len(by_rank[1]) == 4  # 4 profiled steps, the host's allocator
    for row in by_rank[0]:
        assert " > scratch_buffers > " in row["peak_in"]
        assert row["short_lived_bytes"] > 200 * 2**20  # the 8 scratch tensors, freed in step
        assert row["peak_bytes"] >= 48 * 10**6
    for row in by_rank[1]:
        assert " > backward > " in row["peak_in"]  # recomputed activations peak in backward
    # the churn finding tells what the allocator recorded of it
    churn = [f for f in report.findings if f.kind == "memory_churn"]
    assert [f.rank for f in churn] == [0]
    per_step = sum(r["short_lived"] for r in by_rank[0]) / 4
    assert f"on cpu, {per_step:,.0f} allocations a step freed within it" in churn[0].detail
    assert "inside scratch_buffers > aten::empty" in churn[0].detail


def test_a_summary_gives_the_full_ingests_rows(tmp_path: Path) -> None:
    files = _present("cpu_ddp_2r_memory")
    full, summary = tmp_path / "full.kuzu", tmp_path / "summary.kuzu"
    tracegraph.open(full).ingest(*files, run="memory")
    tracegraph.open(summary).ingest(*files, run="memory", summary=True)
    want = tracegraph.open(full).report().tables["allocator"]
    got = tracegraph.open(summary).report().tables["allocator"]
    assert got.num_rows == 8
    assert got.to_pylist() == want.to_pylist()


def test_each_memory_event_names_the_innermost_range_that_holds_it(tmp_path: Path) -> None:
    files = _present("cpu_ddp_2r_memory")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(files[0], run="memory")
    graph = tracegraph.open(db)
    got = {
        r["ev_idx"]: r["op"]
        for r in graph.query(
            "MATCH (m:MemoryEvent) OPTIONAL MATCH (o:Op) WHERE o.id = m.op_id "
            "RETURN m.ev_idx AS ev_idx, o.ev_idx AS op"
        ).to_pylist()
    }
    events = _document(files[0])["traceEvents"]
    cpu = [
        (e.get("pid"), e.get("tid"), _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), i)
        for i, e in enumerate(events)
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
    ]
    want = {}
    for i, e in enumerate(events):
        if e.get("ph") == "i" and e.get("name") == "[memory]":
            ts = _ns(e["ts"])
            held = [c for c in cpu if (c[0], c[1]) == (e["pid"], e["tid"]) and c[2] <= ts <= c[3]]
            # innermost: started last; of those, the shortest
            want[i] = max(held, key=lambda c: (c[2], -c[3]))[4] if held else None
    assert got == want
    assert sum(v is not None for v in want.values()) == len(want)  # every one inside an op


@pytest.mark.parametrize("interleave", [False, "quicksort"])
def test_a_merged_file_gives_its_per_rank_files_rows(
    interleave: str | bool, tmp_path: Path
) -> None:
    files = _present("cpu_ddp_2r_memory")
    merged = write_merged(files, tmp_path / "merged.json", interleave=interleave)
    per_rank, one = tmp_path / "per_rank.kuzu", tmp_path / "merged.kuzu"
    tracegraph.open(per_rank).ingest(*files, run="memory")
    tracegraph.open(one).ingest(merged, run="memory")
    want = tracegraph.open(per_rank).report().tables["allocator"].to_pylist()
    got = tracegraph.open(one).report().tables["allocator"].to_pylist()
    assert len(want) == 8
    assert got == want
    ranks = "MATCH (m:MemoryEvent) RETURN m.rank AS rank, count(*) AS n ORDER BY rank"
    assert (
        tracegraph.open(one).query(ranks).to_pylist()
        == tracegraph.open(per_rank).query(ranks).to_pylist()
    )


def test_the_memory_timeline_is_the_raw_jsons_series(tmp_path: Path) -> None:
    files = _present("h100")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run="h100")
    got = tracegraph.open(db).memory_timeline().to_pylist()
    events = _document(files[0])["traceEvents"]
    memory = sorted(
        (
            (e["args"]["Device Type"], e["args"]["Device Id"], _ns(e["ts"]), i, e["args"])
            for i, e in enumerate(events)
            if e.get("ph") == "i" and e.get("name") == "[memory]"
        ),
        key=lambda m: m[:4],
    )
    want = [
        (device_name(kind, index), ts, a["Bytes"], a["Total Allocated"], a["Total Reserved"])
        for kind, index, ts, _, a in memory
    ]
    assert [(r["device"], r["ts"], r["bytes"], r["allocated"], r["reserved"]) for r in got] == want
    assert {r["device"] for r in got} == {"cpu", "cuda:0"}
    assert tracegraph.open(db).memory_timeline(rank=5).num_rows == 0


def test_what_the_trace_leaves_out_is_not_made_up() -> None:
    """Events without an address pair with none; a window whose first event lacks the totals
    starts from the device's last known state; a step that only frees peaks at its start, with
    the memory reserved then."""
    import pyarrow as pa

    from tracegraph.queries.report.allocator import COLUMNS, allocator_rows
    from tracegraph.queries.report.steps import StepWindow

    n = None
    events = [  # ts, bytes, total_allocated, total_reserved, addr
        (10, 100, 1100, 4096, n),
        (20, 200, n, n, n),
        (30, -100, 1200, 4096, n),
        (40, 50, 1250, 4096, 7),
        (50, -50, 1200, 4096, 7),
        (110, -1000, 200, 8192, 9),
    ]
    memory = pa.table(
        {
            "ts": [e[0] for e in events], "ev_idx": list(range(len(events))),
            "pid": [1] * 6, "tid": [1] * 6, "device_type": [1] * 6, "device_id": [0] * 6,
            "bytes": [e[1] for e in events], "total_allocated": [e[2] for e in events],
            "total_reserved": [e[3] for e in events], "addr": [e[4] for e in events],
            "op_id": [-1] * 6,
        },
        schema=pa.schema([(c, pa.int64()) for c in COLUMNS]),
    )  # fmt: skip
    cpu = pa.table({c: pa.array([], t) for c, t in (("cat", pa.string()), ("name", pa.string()),
                   ("pid", pa.int64()), ("tid", pa.int64()), ("ts", pa.int64()),
                   ("dur", pa.int64()))})  # fmt: skip
    windows = [StepWindow(0, 1, "ProfilerStep#1", 20, 80, 100),
               StepWindow(0, 2, "ProfilerStep#2", 100, 100, 200)]  # fmt: skip
    one, two = allocator_rows(0, memory, windows, cpu)
    assert (one["short_lived"], one["short_lived_bytes"]) == (1, 50)  # addr 7 only
    assert (one["start_bytes"], one["peak_bytes"], one["peak_offset_ns"]) == (1100, 1250, 20)
    assert (one["reserved_at_peak_bytes"], one["end_bytes"]) == (4096, 1200)
    assert (two["start_bytes"], two["peak_bytes"], two["peak_offset_ns"]) == (1200, 1200, 0)
    assert (two["reserved_at_peak_bytes"], two["max_reserved_bytes"]) == (4096, 8192)
    assert two["peak_in"] == ""


def test_a_trace_of_memory_events_alone_is_refused(tmp_path: Path) -> None:
    from tracegraph.ingest.errors import TraceFormatError
    from tracegraph.ingest.parse import parse_file

    path = tmp_path / "only_memory.json"
    event = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
             "tid": 1, "ts": 1.0, "args": {"Bytes": 8, "Total Allocated": 8,
             "Total Reserved": 0, "Device Id": -1, "Device Type": 0, "Addr": 1}}  # fmt: skip
    path.write_text(json.dumps({"traceEvents": [event, {**event, "ts": 2.0}]}))
    with pytest.raises(TraceFormatError, match="no complete"):
        parse_file(path)
