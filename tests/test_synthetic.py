"""Tests of the synthetic multi-rank Kineto trace generator."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tracegraph.examples.synthetic import (
    MERGED_PID_STRIDE,
    NCCL_STREAM,
    SyntheticConfig,
    estimate_bytes,
    expected_counts,
    main,
    write_merged,
    write_per_rank,
)

Event = dict[str, Any]
CONFIG = SyntheticConfig()  # 4 ranks x 3 steps x 8 layers, straggler rank 3
CPU_CATS = {"cpu_op", "user_annotation", "cuda_runtime"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCHER = {
    "kernel": "cudaLaunchKernel",
    "gpu_memcpy": "cudaMemcpyAsync",
    "gpu_memset": "cudaMemsetAsync",
}
SYNC_CALLER = {
    "Stream Sync": "cudaStreamSynchronize",
    "Event Sync": "cudaEventSynchronize",
    "Context Sync": "cudaDeviceSynchronize",
    "Stream Wait Event": "cudaStreamWaitEvent",
}


def _load(path: Path) -> dict[str, Any]:
    """A trace with floats kept exact (Decimal)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh, parse_float=Decimal)


def _ns(value: Decimal) -> int:
    """A ts/dur in µs as integer ns."""
    return int(value * 1000)


def _end(e: Event) -> int:
    return _ns(e["ts"]) + _ns(e["dur"])


def _category(e: Event) -> str:
    return "metadata" if e["ph"] == "M" else e["cat"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synthetic")
    write_per_rank(CONFIG, root / "ranks")
    write_merged(CONFIG, root / "merged.json")
    return root


@pytest.fixture(scope="module")
def ranks(out: Path) -> dict[int, list[Event]]:
    return {
        r: _load(out / "ranks" / f"rank{r}.trace.json")["traceEvents"] for r in range(CONFIG.ranks)
    }


def test_same_config_same_bytes(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=2, steps=2, layers=3)
    for name in ("a", "b"):
        write_per_rank(config, tmp_path / name)
        write_per_rank(config, tmp_path / name / "gz", gzip=True)
        write_merged(config, tmp_path / name / "merged.json")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json*"))
    assert len(files) == 5
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    other = write_per_rank(replace(config, seed=1), tmp_path / "c")
    assert other[0].read_bytes() != (tmp_path / "a" / "rank0.trace.json").read_bytes()


def test_top_level(out: Path) -> None:
    trace = _load(out / "ranks" / "rank2.trace.json")
    assert trace["schemaVersion"] == 1
    assert trace["displayTimeUnit"] == "ms"
    assert trace["baseTimeNanoseconds"] == 0
    assert trace["traceName"] == "rank2.trace.json"
    assert [d["id"] for d in trace["deviceProperties"]] == [2]
    dist = trace["distributedInfo"]
    assert dist["backend"] == "nccl" and dist["pg_count"] == 1
    assert (dist["rank"], dist["world_size"]) == (2, 4)
    assert dist["pg_config"] == [
        {
            "pg_name": "0",
            "pg_desc": "default_pg",
            "backend_config": "cuda:nccl",
            "pg_size": 4,
            "ranks": [0, 1, 2, 3],
        }
    ]


@pytest.mark.parametrize(
    "config",
    [
        CONFIG,
        SyntheticConfig(ranks=1, steps=2, layers=5, bucket_layers=2, with_cuda_sync=False),
        SyntheticConfig(ranks=3, steps=1, layers=1, with_fwdbwd=False, slow_gap_every=0),
    ],
)
def test_counts_match_expected(config: SyntheticConfig, tmp_path: Path) -> None:
    paths = write_per_rank(config, tmp_path)
    expected = expected_counts(config)
    for rank, path in enumerate(paths):
        got = Counter(_category(e) for e in _load(path)["traceEvents"])
        assert got == Counter(expected[rank]), rank


def test_gpu_activity_has_its_launch(ranks: dict[int, list[Event]]) -> None:
    for events in ranks.values():
        runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
        assert len(runtime) == sum(e.get("cat") == "cuda_runtime" for e in events)
        flows = {(e["ph"], e["id"]): e for e in events if e.get("cat") == "ac2g"}
        gpu = [e for e in events if e.get("cat") in GPU_CATS]
        assert len(flows) == 2 * len(gpu)
        for e in gpu:
            launch = runtime[e["args"]["correlation"]]
            assert launch["name"] == LAUNCHER[e["cat"]]
            assert launch["args"]["External id"] == e["args"]["External id"]
            assert _ns(e["ts"]) > _ns(launch["ts"])
            corr = e["args"]["correlation"]
            start, finish = flows["s", corr], flows["f", corr]
            assert (start["pid"], start["tid"], start["ts"]) == (
                launch["pid"],
                launch["tid"],
                launch["ts"],
            )
            assert (finish["pid"], finish["tid"], finish["ts"], finish["bp"]) == (
                e["pid"],
                e["tid"],
                e["ts"],
                "e",
            )


def test_cuda_sync_events_point_at_their_calls(ranks: dict[int, list[Event]]) -> None:
    for events in ranks.values():
        runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
        syncs = [e for e in events if e.get("cat") == "cuda_sync"]
        assert {e["name"] for e in syncs} == set(SYNC_CALLER)
        for e in syncs:
            args = e["args"]
            assert args["cuda_sync_kind"] == e["name"]
            assert runtime[args["correlation"]]["name"] == SYNC_CALLER[e["name"]]
            assert e["tid"] == args["stream"]
            if "wait_on_cuda_event_record_corr_id" in args:
                record = runtime[args["wait_on_cuda_event_record_corr_id"]]
                assert record["name"] == "cudaEventRecord"
                assert _ns(record["ts"]) < _ns(e["ts"])
                assert args["wait_on_stream"] != args["stream"]


def _check_nesting(spans: list[Event]) -> None:
    """Spans on one timeline: children strictly inside parents, siblings disjoint."""
    stack: list[Event] = []
    for e in sorted(spans, key=lambda e: (_ns(e["ts"]), -_ns(e["dur"]))):
        while stack and _end(stack[-1]) <= _ns(e["ts"]):
            stack.pop()
        if stack:
            parent = stack[-1]
            assert _ns(parent["ts"]) < _ns(e["ts"]) and _end(e) < _end(parent), (parent, e)
        stack.append(e)


def test_ops_nest_on_each_thread(ranks: dict[int, list[Event]]) -> None:
    for events in ranks.values():
        threads: dict[tuple[int, int], list[Event]] = defaultdict(list)
        streams: dict[tuple[int, int], list[Event]] = defaultdict(list)
        for e in events:
            if e.get("cat") in CPU_CATS:
                threads[e["pid"], e["tid"]].append(e)
            elif e.get("cat") in GPU_CATS:
                streams[e["pid"], e["tid"]].append(e)
        assert len(threads) == 2 and len(streams) == 2
        for spans in threads.values():
            _check_nesting(spans)
        for spans in streams.values():
            spans.sort(key=lambda e: _ns(e["ts"]))
            assert all(_end(a) <= _ns(b["ts"]) for a, b in zip(spans, spans[1:], strict=False))


def test_runtime_external_ids_point_at_ops(ranks: dict[int, list[Event]]) -> None:
    for events in ranks.values():
        ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op"}
        bare = 0
        for e in events:
            if e.get("cat") != "cuda_runtime":
                continue
            if "External id" not in e["args"]:
                bare += 1
                continue
            op = ops[e["args"]["External id"]]
            assert (op["pid"], op["tid"]) == (e["pid"], e["tid"])
            assert _ns(op["ts"]) < _ns(e["ts"]) and _end(e) < _end(op)
        assert bare == 3 * CONFIG.steps  # the step timer's calls have no op around them


def test_forward_backward_flows(ranks: dict[int, list[Event]]) -> None:
    for rank, events in ranks.items():
        flows: dict[int, dict[str, Event]] = defaultdict(dict)
        for e in events:
            if e.get("cat") == "fwdbwd":
                flows[e["id"]][e["ph"]] = e
        assert len(flows) == CONFIG.steps * (3 * CONFIG.layers + 1)
        for pair in flows.values():
            assert pair["s"]["tid"] == 1000 + rank and pair["f"]["tid"] != pair["s"]["tid"]
            assert _ns(pair["s"]["ts"]) < _ns(pair["f"]["ts"]) and pair["f"]["bp"] == "e"


def _nccl_kernels(events: list[Event]) -> dict[int, Event]:
    return {
        e["args"]["Seq"]: e
        for e in events
        if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_AllReduce")
    }


def test_collectives_end_together(ranks: dict[int, list[Event]]) -> None:
    kernels = {rank: _nccl_kernels(events) for rank, events in ranks.items()}
    seqs = set(kernels[0])
    assert seqs == set(range(1, CONFIG.steps * CONFIG.buckets + 1))
    for seq in seqs:
        instances = [kernels[rank][seq] for rank in ranks]
        assert len({_end(e) for e in instances}) == 1, seq
        assert len({_ns(e["ts"]) for e in instances}) > 1, seq
        assert all(e["tid"] == NCCL_STREAM and e["args"]["Group size"] == 4 for e in instances)
        # The last to arrive (the straggler, or a rank whose data loader stalled) waits least.
        late = CONFIG.stall_rank((seq - 1) // CONFIG.buckets)
        late = CONFIG.straggler if late is None else late
        waited = sorted(instances, key=lambda e: _ns(e["dur"]))
        assert waited[0]["pid"] == CONFIG.device(late)
        assert _ns(waited[0]["dur"]) < _ns(waited[1]["dur"])


def test_record_param_comms(ranks: dict[int, list[Event]]) -> None:
    for events in ranks.values():
        comms = [e for e in events if e["name"] == "record_param_comms"]
        kernels = _nccl_kernels(events)
        assert len(comms) == len(kernels)
        for op in comms:
            args = op["args"]
            assert args["Collective name"] == "allreduce"
            assert args["Process Group Ranks"] == "[0, 1, 2, 3]"
            kernel = kernels[args["Seq"]]
            assert kernel["args"]["External id"] == args["External id"]
            assert kernel["args"]["In msg nelems"] == args["In msg nelems"]


def test_kernel_gaps_and_stall(ranks: dict[int, list[Event]]) -> None:
    for rank, events in ranks.items():
        kernels = sorted(
            (e for e in events if e.get("cat") == "kernel" and e["tid"] == 7),
            key=lambda e: _ns(e["ts"]),
        )
        gaps = [_ns(b["ts"]) - _end(a) for a, b in zip(kernels, kernels[1:], strict=False)]
        assert max(gaps) > 1_500_000, rank
        loader = [e for e in events if e["name"].startswith("enumerate(DataLoader)")]
        stalled = [e for e in loader if _ns(e["dur"]) > CONFIG.stall_us * 1000]
        assert len(stalled) == (1 if rank == CONFIG.stall_rank(2) else 0)


def test_timestamps_have_three_decimals(out: Path) -> None:
    text = (out / "ranks" / "rank0.trace.json").read_text()
    values = re.findall(r'"(?:ts|dur)": ([^,}]*)', text)
    assert len(values) > 1000
    assert all(re.fullmatch(r"\d+\.\d{3}", v) for v in values)
    assert '"ts": 1712195495519' in text


def test_ids_collide_across_ranks(ranks: dict[int, list[Event]]) -> None:
    def first(key: str, cat: str) -> set[int]:
        return {min(e["args"][key] for e in evs if e.get("cat") == cat) for evs in ranks.values()}

    assert first("correlation", "cuda_runtime") == {1}
    assert first("External id", "user_annotation") == {1}


def test_merged_file(out: Path, ranks: dict[int, list[Event]]) -> None:
    merged = _load(out / "merged.json")
    assert merged["distributedInfo"] == {"world_size": CONFIG.ranks}
    by_rank: dict[int, list[Event]] = defaultdict(list)
    for e in merged["traceEvents"]:
        rank = e["pid"] // MERGED_PID_STRIDE
        if e["ph"] == "X":
            assert e["args"]["rank"] == rank
        if e["name"] == "process_name":
            assert e["args"]["name"].startswith(f"rank {rank}: ")
        by_rank[rank].append(e)
    assert sorted(by_rank) == list(range(CONFIG.ranks))
    expected = expected_counts(CONFIG)
    for rank, events in by_rank.items():
        assert Counter(_category(e) for e in events) == Counter(expected[rank])
        assert _strip(events) == _strip(ranks[rank]) - _names(ranks[rank])
    correlations = [
        {e["args"]["correlation"] for e in evs if e.get("cat") == "kernel"}
        for evs in by_rank.values()
    ]
    assert set.intersection(*correlations)


def _strip(events: list[Event]) -> set[str]:
    """Events with the merge undone (pid, args.rank), process names aside, as text."""
    keep = set()
    for e in events:
        if e["name"] == "process_name":
            continue
        e = dict(e, pid=e["pid"] % MERGED_PID_STRIDE)
        if "args" in e:
            e["args"] = {k: v for k, v in e["args"].items() if k != "rank"}
        keep.add(json.dumps(e, sort_keys=True, default=str))
    return keep


def _names(events: list[Event]) -> set[str]:
    return {
        json.dumps(e, sort_keys=True, default=str) for e in events if e["name"] == "process_name"
    }


def test_merged_without_rank_args(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=2, steps=1, layers=2)
    events = _load(write_merged(config, tmp_path / "m.json", rank_in_args=False))["traceEvents"]
    assert not any("rank" in e.get("args", {}) for e in events)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {
        1000: "rank 0: python3.11",
        0: "rank 0: GPU 0",
        1_001_001: "rank 1: python3.11",
        1_000_001: "rank 1: GPU 1",
    }


def test_base_time_shifts_ts_only(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=1, steps=1, layers=2)
    base = 1_712_195_000_000_000_000
    absolute = _load(write_per_rank(config, tmp_path / "a")[0])
    relative = _load(write_per_rank(replace(config, base_time_ns=base), tmp_path / "r")[0])
    assert relative["baseTimeNanoseconds"] == base
    for a, r in zip(absolute["traceEvents"], relative["traceEvents"], strict=True):
        assert _ns(a["ts"]) == _ns(r["ts"]) + base
        assert a.get("dur") == r.get("dur")


def test_size_estimate(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=2, steps=2, layers=24)
    total = sum(p.stat().st_size for p in write_per_rank(config, tmp_path))
    assert abs(estimate_bytes(config) - total) < 0.1 * total


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "--ranks",
        "2",
        "--steps",
        "1",
        "--layers",
        "2",
        "--out",
        str(tmp_path / "d"),
        "--merged",
        str(tmp_path / "m.json"),
        "--gzip",
        "--seed",
        "3",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "rank1.trace.json.gz" in printed and "m.json" in printed and "total" in printed
    assert _load(tmp_path / "d" / "rank1.trace.json.gz")["distributedInfo"]["rank"] == 1


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        SyntheticConfig(ranks=0)
    with pytest.raises(ValueError):
        SyntheticConfig(ranks=2, straggler_rank=2)
    assert SyntheticConfig(ranks=1).straggler is None


def test_sync_kinds_options(tmp_path: Path) -> None:
    """Every sync kind on several streams and devices; off by default (same bytes as before)."""
    base = SyntheticConfig(ranks=2, steps=2, layers=3)
    off = replace(base, sync_kinds=False, extra_streams=0, devices_per_rank=1, blocking_copy=False)
    a, b = write_per_rank(base, tmp_path / "a"), write_per_rank(off, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    config = replace(base, extra_streams=2, devices_per_rank=2, blocking_copy=True)
    assert config.sync_demo and not base.sync_demo
    paths = write_per_rank(config, tmp_path / "c")
    expected = expected_counts(config)
    for rank, path in enumerate(paths):
        trace = _load(path)
        events = trace["traceEvents"]
        assert Counter(_category(e) for e in events) == Counter(expected[rank])
        assert [d["id"] for d in trace["deviceProperties"]] == config.devices(rank)
        gpu = [e for e in events if e.get("cat") in GPU_CATS]
        assert {(e["pid"], e["args"]["device"]) for e in gpu} == {
            (d, d) for d in config.devices(rank)
        }
        assert {e["tid"] for e in gpu} == {7, 21, 31, 32}
        runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
        kinds = Counter()
        for e in events:
            if e.get("cat") != "cuda_sync":
                continue
            call = runtime[e["args"]["correlation"]]["name"]
            kinds[e["name"], call] += 1
            assert e["pid"] == e["args"]["device"] in config.devices(rank)
            assert _ns(e["ts"]) >= _ns(runtime[e["args"]["correlation"]]["ts"])
        n = config.steps * config.devices_per_rank
        assert kinds[("Stream Sync", "cudaMemcpy")] == n
        assert kinds[("Context Sync", "cudaDeviceSynchronize")] == config.steps + n
        assert kinds[("Stream Sync", "cudaStreamSynchronize")] == config.steps + 4 * n
        # every blocking copy returns after its copy
        copies = {e["args"]["correlation"]: e for e in gpu if e["cat"] == "gpu_memcpy"}
        for corr, call in runtime.items():
            if call["name"] == "cudaMemcpy":
                assert _end(copies[corr]) <= _end(call)
    with pytest.raises(ValueError):
        SyntheticConfig(devices_per_rank=0)
    with pytest.raises(ValueError):
        SyntheticConfig(extra_streams=-1)
