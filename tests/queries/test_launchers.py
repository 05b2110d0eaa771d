"""GPU time by operator (`queries/report/launchers.py`): each kernel credited to the innermost
CPU operator holding its launching call (TraceLens's kernel launchers), its busy time, the
categories and the op x shape table, computed again from the raw JSON in plain Python (json,
Decimal, loops) on real GPU traces with recorded shapes: an H100 training step, a B200 eager
run, an MI300 ResNet with activation checkpointing, a ROCm MI250 toy, HTA's 2-rank NCCL job."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest

import tracegraph
from tracegraph.queries.report.launchers import NO_LAUNCH, category

from ..conftest import TRACES

GPU_TRACES = {
    "h100": ["tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"],
    "b200": ["tracelens/traces/b200/eager_trace.json.gz"],
    "mi300": ["tracelens/traces/mi300/resnet_act_checkpoint.json.gz"],
    "mi250": ["hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"],
    "trace_filter": [
        "hta/trace_filter/sampled_rank-0.json.gz",
        "hta/trace_filter/sampled_rank-1.json.gz",
    ],
}
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime"}
OPS = {"cpu_op", "Operator"}


def _ns(value: Any) -> int:
    return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))


def _events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def json_launch_owners(complete: list[tuple[int, dict]]) -> dict[Any, tuple[bool, int, int]]:
    """Per correlation id, the call that launched it, from the raw JSON's complete events
    (index, event): (a driver call?, ts, index), the runtime call before the driver's."""
    owner: dict[Any, tuple[bool, int, int]] = {}
    for i, e in complete:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in RUNTIME and corr is not None:
            mine = (e.get("cat") == "cuda_driver", _ns(e["ts"]), i)
            owner[corr] = min(owner.get(corr, mine), mine)
    return owner


def json_launchers(path: Path) -> dict[tuple, dict[str, Any]]:
    """Per launcher (('op', index) or ('call', index) in traceEvents): its name, args, kernels,
    kernel intervals and first kernel's name, from the raw JSON."""
    events = _events(path)
    complete = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e]
    ops = defaultdict(list)  # (pid, tid) -> [(start, end, index)]
    for i, e in complete:
        if e.get("cat") in OPS:
            ops[(e.get("pid"), e.get("tid"))].append(
                (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), i)
            )
    owner = json_launch_owners(complete)
    out: dict[tuple, dict[str, Any]] = {}
    for _, e in sorted(complete, key=lambda x: (_ns(x[1]["ts"]), _ns(x[1]["dur"]), x[0])):
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in GPU or corr not in owner:
            continue
        call = events[owner[corr][2]]
        at = _ns(call["ts"])
        held = [o for o in ops[(call.get("pid"), call.get("tid"))] if o[0] <= at <= o[1]]
        if held:  # innermost: started last, then the shortest, then the later event
            start, end, k = max(held, key=lambda o: (o[0], -o[1], o[2]))
            key = ("op", k)
        else:
            key = ("call", owner[corr][2])
        entry = out.setdefault(
            key, {"event": events[key[1]], "intervals": [], "first": e.get("name", "")}
        )
        entry["intervals"].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
        entry.setdefault("names", []).append(e.get("name", ""))
    return out


def _copies(entry: dict[str, Any]) -> bool:
    """Whether every kernel the launcher launched is a Memcpy or Memset."""
    return all(n.startswith(("Memcpy", "Memset")) for n in entry["names"])


def json_orphans(path: Path) -> list[tuple[int, int]]:
    """The GPU events whose launching call the trace does not hold: (start, end)."""
    events = _events(path)
    calls = {
        (e.get("args") or {}).get("correlation")
        for e in events
        if e.get("ph") == "X" and e.get("cat") in RUNTIME
    }
    return [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in GPU and "dur" in e
        and (e.get("args") or {}).get("correlation") not in calls - {None}
    ]  # fmt: skip


def _busy(intervals: list[tuple[int, int]]) -> int:
    covered, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            covered, reach = covered + e - s, e
        elif e > reach:
            covered, reach = covered + e - reach, e
    return covered


def _rank_files(name: str) -> list[Path]:
    files = [TRACES / f for f in GPU_TRACES[name]]
    if not all(f.is_file() for f in files):
        pytest.skip(f"real traces not at {TRACES}")
    return files


@pytest.fixture(scope="module", params=sorted(GPU_TRACES))
def ingested(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    files = _rank_files(request.param)
    db = tmp_path_factory.mktemp(request.param) / "run.kuzu"
    tracegraph.open(db).ingest(*files, run=request.param)
    return files, tracegraph.open(db).report(top=10_000)


def test_categories_equal_the_raw_json(ingested) -> None:  # noqa: ANN001
    files, report = ingested
    got = report.tables["op_categories"].to_pylist()
    want = []
    for rank, path in zip(report.ranks, files, strict=True):
        per: dict[str, list] = defaultdict(lambda: [0, 0, 0])
        for entry in json_launchers(path).values():
            cat = category(entry["event"].get("name", ""), entry["first"], _copies(entry))
            per[cat][0] += 1
            per[cat][1] += len(entry["intervals"])
            per[cat][2] += _busy(entry["intervals"])
        orphans = json_orphans(path)
        if orphans:
            per[NO_LAUNCH] = [0, len(orphans), _busy(orphans)]
        total = sum(v[2] for v in per.values())
        want += [
            {"rank": rank, "category": c, "launchers": n, "kernels": k, "gpu_ns": g,
             "pct": 100.0 * g / total if total else 0.0}
            for c, (n, k, g) in per.items()
        ]  # fmt: skip
    key = lambda r: (r["rank"], r["category"])  # noqa: E731
    got, want = sorted(got, key=key), sorted(want, key=key)
    assert [{**r, "pct": round(r["pct"], 9)} for r in got] == [
        {**r, "pct": round(r["pct"], 9)} for r in want
    ]
    assert want


def test_op_shapes_equal_the_raw_json(ingested) -> None:  # noqa: ANN001
    files, report = ingested
    got = report.tables["op_shapes"].to_pylist()
    for rank, path in zip(report.ranks, files, strict=True):
        groups: dict[tuple, list] = defaultdict(list)
        for entry in json_launchers(path).values():
            e = entry["event"]
            args = e.get("args") or {}
            shape = tuple(
                json.dumps(args.get(k), default=str) if k in args else None
                for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
            )
            cat = category(e.get("name", ""), entry["first"], _copies(entry))
            groups[(e.get("name", ""), cat, *shape)].append(entry)
        mine = [r for r in got if r["rank"] == rank]
        assert len(mine) == len(groups)
        for row in mine:
            shape = tuple(
                json.dumps(json.loads(text, parse_float=Decimal), default=str) if text else None
                for text in (row["input_dims"], row["input_types"], row["input_strides"],
                             row["concrete_inputs"])
            )  # fmt: skip
            members = groups[(row["name"], row["category"], *shape)]
            busy = [_busy(m["intervals"]) for m in members]
            assert row["count"] == len(members)
            assert row["kernels"] == sum(len(m["intervals"]) for m in members)
            assert (row["gpu_total_ns"], row["gpu_min_ns"], row["gpu_max_ns"]) == (
                sum(busy),
                min(busy),
                max(busy),
            )
            assert row["cpu_total_ns"] == sum(_ns(m["event"]["dur"]) for m in members)


def test_every_kernel_is_credited_once(ingested) -> None:  # noqa: ANN001
    files, report = ingested
    rows = report.tables["op_categories"].to_pylist()
    for rank, path in zip(report.ranks, files, strict=True):
        launched = sum(len(e["intervals"]) for e in json_launchers(path).values())
        every = launched + len(json_orphans(path))
        assert sum(r["kernels"] for r in rows if r["rank"] == rank) == every


def test_busy_time_is_the_union_of_each_groups_intervals() -> None:
    """`busy_times` (vectorised) against counting the covered nanoseconds one by one."""
    import random

    import numpy as np

    from tracegraph.queries.report.launchers import busy_times

    rng = random.Random(7)
    for _ in range(500):
        rows = [(rng.randint(0, 4), 10**18 + rng.randint(0, 60), rng.randint(0, 25))
                for _ in range(rng.randint(1, 30))]  # fmt: skip
        key = np.array([k for k, _, _ in rows])
        ts = np.array([s for _, s, _ in rows], np.int64)
        end = ts + np.array([d for _, _, d in rows], np.int64)
        busy, groups = busy_times(key, ts, end)
        for g, b in zip(groups.tolist(), busy.tolist(), strict=True):
            covered = set()
            for k, s, d in rows:
                if k == g:
                    covered.update(range(s, s + d))
            assert b == len(covered)
