"""The nn.Module tree (`queries/report/modules.py`): each module path's calls, CPU time and the
GPU work launched inside it, computed again from the raw JSON in plain Python on real traces
with python stacks: an H100 Qwen step, a B200 GPT-OSS run, an MI300 ResNet with activation
checkpointing, and the CPU DDP job (CPU time only)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tracegraph

from ..conftest import TRACES
from .test_launchers import GPU, _busy, _events, _ns, json_launch_owners

TRACES_WITH_MODULES = {
    "h100": ["tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"],
    "b200": ["tracelens/traces/b200/eager_trace.json.gz"],
    "mi300": ["tracelens/traces/mi300/resnet_act_checkpoint.json.gz"],
    "cpu_ddp_2r": [
        "cpu_ddp_2r/rank0.step5.pt.trace.json.gz",
        "cpu_ddp_2r/rank1.step5.pt.trace.json.gz",
    ],
}
PREFIX = "nn.Module: "


def json_modules(path: Path) -> dict[str, dict[str, Any]]:
    """Per module path: calls, cpu_ns, kernels, gpu_ns, self_gpu_ns, from the raw JSON."""
    events = _events(path)
    complete = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e]
    modules = [
        (e.get("pid"), e.get("tid"), _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), i)
        for i, e in complete
        if e.get("cat") == "python_function" and e.get("name", "").startswith(PREFIX)
    ]
    order = {m[4]: (m[2], -m[3], m[4]) for m in modules}  # nesting order: start, longer first
    parent: dict[int, int | None] = {}
    for pid, tid, _, e, i in modules:
        held = [m for m in modules if (m[0], m[1]) == (pid, tid) and m[4] != i
                and order[m[4]] < order[i] and m[3] >= e]  # fmt: skip
        parent[i] = max(held, key=lambda m: order[m[4]])[4] if held else None

    def path(i: int) -> str:
        name = events[i]["name"][len(PREFIX) :]
        return name if parent[i] is None else path(parent[i]) + " > " + name

    owner = json_launch_owners(complete)
    inside: dict[int, list[tuple[int, int]]] = defaultdict(list)  # inclusive, per call
    own: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for _, e in complete:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") not in GPU or corr not in owner:
            continue
        call = events[owner[corr][2]]
        at = _ns(call["ts"])
        held = [m for m in modules if (m[0], m[1]) == (call.get("pid"), call.get("tid"))
                and m[2] <= at <= m[3]]  # fmt: skip
        if not held:
            continue
        interval = (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        innermost = max(held, key=lambda m: (m[2], -m[3], m[4]))[4]
        own[innermost].append(interval)
        j: int | None = innermost
        while j is not None:
            inside[j].append(interval)
            j = parent[j]
    out: dict[str, dict[str, Any]] = {}
    for _, _, s, e, i in modules:
        row = out.setdefault(
            path(i), {"calls": 0, "cpu_ns": 0, "kernels": 0, "gpu_ns": 0, "self_gpu_ns": 0}
        )
        row["calls"] += 1
        row["cpu_ns"] += e - s
        row["kernels"] += len(inside[i])
        row["gpu_ns"] += _busy(inside[i])
        row["self_gpu_ns"] += _busy(own[i])
    return out


@pytest.mark.parametrize("name", sorted(TRACES_WITH_MODULES))
def test_module_tree_equals_the_raw_json(name: str, tmp_path: Path) -> None:
    files = [TRACES / f for f in TRACES_WITH_MODULES[name]]
    if not all(f.is_file() for f in files):
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(*files, run=name)
    report = tracegraph.open(db).report()
    got = report.tables["module_tree"].to_pylist()
    for rank, path in zip(report.ranks, files, strict=True):
        want = json_modules(path)
        mine = {r["module"]: r for r in got if r["rank"] == rank}
        assert set(mine) == set(want) and want
        for module, row in mine.items():
            assert {k: row[k] for k in want[module]} == want[module], module
            assert row["depth"] == module.count(" > ")
            assert row["self_gpu_ns"] <= row["gpu_ns"]  # invariants
        roots = [r for r in mine.values() if r["depth"] == 0]
        assert sum(r["kernels"] for r in roots) <= sum(r["kernels"] for r in mine.values())


def test_a_module_first_seen_later_comes_under_its_parent() -> None:
    """Step 1 runs Model > A and Model > B; step 2 adds C inside A: C is listed under A."""
    import pyarrow as pa

    from tracegraph.queries.report.modules import module_rows

    spans = [("Model_0", 0, 100), ("A_0", 10, 20), ("B_0", 30, 40),
             ("Model_0", 200, 300), ("A_0", 210, 250), ("C_0", 220, 230)]  # fmt: skip
    n = len(spans)
    rows = pa.table(
        {
            "ev_idx": list(range(n)), "label": ["Op"] * n, "cat": ["python_function"] * n,
            "name": [f"nn.Module: {name}" for name, _, _ in spans], "pid": [1] * n,
            "tid": [1] * n, "ts": [s for _, s, _ in spans], "dur": [e - s for _, s, e in spans],
            "correlation": pa.array([None] * n, pa.int64()),
        }
    )  # fmt: skip
    got = [(r["module"], r["calls"], r["cpu_ns"]) for r in module_rows(0, rows, None)]
    assert got == [
        ("Model_0", 2, 200), ("Model_0 > A_0", 2, 50), ("Model_0 > A_0 > C_0", 1, 10),
        ("Model_0 > B_0", 1, 10),
    ]  # fmt: skip
