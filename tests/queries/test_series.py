"""Time series of GPU work (`queries/report/series.py`, `Graph.queue_length_series`,
`Graph.memory_bandwidth_series`): equal to a plain-Python reading of the raw JSON on real GPU
traces, and in HTA's reading to HTA 0.5.0's own `get_queue_length_time_series` (from its
environment) on HTA's 2-rank sampled job and its NCCL trace."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tracegraph

from ..conftest import TRACES
from .hta_oracle import hta_oracle
from .test_launchers import GPU, _events, _ns, json_launch_owners

ORACLE = Path(__file__).with_name("hta_series_oracle.py")
RAW = {
    "h100": "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "b200": "tracelens/traces/b200/eager_trace.json.gz",
    "mi300": "tracelens/traces/mi300/resnet_act_checkpoint.json.gz",
    "nccl_data": "hta/nccl_parser_config/nccl_data.json.gz",
    "trace_filter": "hta/trace_filter/sampled_rank-0.json.gz",
}
COPIES = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}


def _steps(changes: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(time, value after every change at that time), in time order."""
    out: dict[int, float] = {}
    total = 0.0
    for t, delta in sorted(changes, key=lambda c: c[0]):
        total += delta
        out[t] = total
    return sorted(out.items())


def json_queues(path: Path) -> dict[int, list[tuple[int, float]]]:
    """Per stream: +1 at each launching call's start, -1 at its kernel's start."""
    events = _events(path)
    complete = [(i, e) for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e]
    owner = json_launch_owners(complete)
    changes: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for _, e in complete:
        args = e.get("args") or {}
        if e.get("cat") in GPU and args.get("correlation") in owner:
            stream = int(args.get("stream", -1))
            changes[stream] += [(owner[args["correlation"]][1], 1), (_ns(e["ts"]), -1)]
    return {stream: _steps(c) for stream, c in changes.items()}


def json_bandwidth(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Per copy kind: each copy's recorded GB/s (else bytes/ns) from its start to its end."""
    changes: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for e in _events(path):
        if e.get("ph") != "X" or e.get("cat") not in COPIES or "dur" not in e:
            continue
        args, name = e.get("args") or {}, e.get("name", "")
        kind = "Memset" if name.startswith("Memset") else name[:11]
        start, dur = _ns(e["ts"]), _ns(e["dur"])
        if "memory bandwidth (GB/s)" in args:
            rate = float(args["memory bandwidth (GB/s)"])
        elif "bytes" in args and dur > 0:
            rate = int(args["bytes"]) / dur
        else:
            continue
        changes[kind] += [(start, rate), (start + dur, -rate)]
    return {kind: _steps(c) for kind, c in changes.items()}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tracegraph.Graph]:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    out = {}
    for name, path in RAW.items():
        graph = tracegraph.open(tmp_path_factory.mktemp(name) / "one.db")
        graph.ingest(TRACES / path, run="one")
        out[name] = graph
    return out


@pytest.mark.parametrize("name", list(RAW))
def test_queue_lengths_equal_the_raw_json(ingested, name: str) -> None:  # noqa: ANN001
    series = ingested[name].queue_length_series().to_pylist()
    ours: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for row in series:
        ours[row["stream"]].append((row["ts"], float(row["queued"])))
    assert dict(ours) == json_queues(TRACES / RAW[name])
    assert series and min(row["queued"] for row in series) >= 0  # never negative


@pytest.mark.parametrize("name", list(RAW))
def test_memory_bandwidth_equals_the_raw_json(ingested, name: str) -> None:  # noqa: ANN001
    series = ingested[name].memory_bandwidth_series().to_pylist()
    expected = json_bandwidth(TRACES / RAW[name])
    assert {row["kind"] for row in series} == set(expected)
    for kind, steps in expected.items():
        ours = [(row["ts"], row["gbps"]) for row in series if row["kind"] == kind]
        assert [t for t, _ in ours] == [t for t, _ in steps]
        assert [v for _, v in ours] == pytest.approx([v for _, v in steps], abs=1e-5)
        assert min(v for _, v in ours) >= 0


def _hta_series(folder: Path, out: Path) -> dict[str, Any]:
    return hta_oracle("hta-0.5.0", ORACLE, out, folder, out)


@pytest.mark.parametrize("folder", ["hta/trace_filter", "hta/nccl_parser_config"])
def test_queue_lengths_in_htas_reading_equal_htas_own(folder: str, tmp_path: Path) -> None:
    if not (TRACES / folder).is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    hta = _hta_series(TRACES / folder, tmp_path / "hta.json")
    graph = tracegraph.open(tmp_path / "run.db")
    graph.ingest(TRACES / folder, run=re.sub(r"\W", "_", folder))
    for rank, answer in hta.items():
        theirs: dict[tuple[int, int], int] = {}
        for ts, stream, queued in answer["queue"]:  # HTA's order: the last of a time holds
            theirs[(stream, ts)] = queued
        rows = graph.queue_length_series(rank=int(rank), hta_compatible=True).to_pylist()
        ours = {(row["stream"], row["ts"]): row["queued"] for row in rows}
        # HTA counts time from its own origin: the series agree up to where each starts
        shift = min(t for _, t in ours) - min(t for _, t in theirs)
        assert {(s, t - shift): q for (s, t), q in ours.items()} == theirs
        assert len(theirs) > 1000
