"""`tracegraph path` / `Graph.step_paths` (queries/path.py): one verdict per step, the same in
every view: the stored `edges --native --all-steps` verdict, the in-memory path, the report's
bound_by, what-if's unscaled length; the CLI's table and JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tracegraph
from tracegraph.explorer.cli import main
from tracegraph.queries.whatif import what_if

GLOO = Path(__file__).resolve().parents[1] / "data" / "gloo_4r"


@pytest.fixture(scope="module")
def stall(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("path") / "stall.kuzu"
    g = tracegraph.open(db)
    g.ingest(GLOO / "data_stall", run="stall")
    g.edges("native", all_steps=True)
    return db


def test_every_view_tells_the_same_verdict(stall: Path) -> None:
    g = tracegraph.open(stall)
    stories = {s.step: s for s in g.step_paths()}
    stored = {v.step: v for v in g.stragglers("stall")}
    report = g.report()
    with g.reading() as st:
        whatif = what_if(st, "native", run="stall").lengths.to_pylist()
    assert set(stories) == set(stored) and len(stories) == 4
    for step, story in stories.items():
        v, s = stored[step], story.verdict
        assert s is not None
        assert (s.length_ns, s.bound_by_rank, s.bound_by_op, s.straggler) == (
            v.length_ns,
            v.bound_by_rank,
            v.bound_by_op,
            v.straggler,
        )
        number = int(step.split("#")[1])
        bound = report.bound_by[number]
        assert (bound["rank"], bound["op"], bound["length_ns"]) == (
            v.bound_by_rank,
            v.bound_by_op,
            v.length_ns,
        )
        (row,) = [r for r in whatif if r["window"] == step]
        assert row["rank"] == -1 and row["baseline_ns"] == v.length_ns


def test_the_cli_table_sums_to_the_path_and_json_is_the_api(
    stall: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["path", str(stall), "--step", "3", "--depth", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    heading = out[0]
    assert heading.startswith("ProfilerStep#3: across ranks") and "bound by rank 2" in heading
    rows = [line for line in out[2:] if line.strip()]
    assert 1 < len(rows) <= 15
    total = sum(float(line.split()[0].replace(",", "")) for line in rows)
    length = float(re.search(r"across ranks ([\d,]+) µs", heading)[1].replace(",", ""))  # type: ignore[index]
    assert total == pytest.approx(length, abs=len(rows) * 0.1)  # each row rounded to 0.1 µs
    assert main(["path", str(stall), "--step", "3", "--format", "json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)
    (story,) = tracegraph.open(stall).step_paths(step=3)
    assert data == json.loads(json.dumps(story.to_json(2)))
    assert sum(s["ns"] for s in data["segments"]) == data["length_ns"]


def test_a_rank_own_path_and_refusals(stall: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (own,) = tracegraph.open(stall).step_paths(step=3, rank=0)
    assert own.rank == 0 and own.verdict is None
    assert sum(s.ns for s in own.segments) == own.length_ns
    assert main(["path", str(stall), "--step", "99"]) == 2
    assert "has no ProfilerStep#99" in capsys.readouterr().err
    assert main(["path", str(stall), "--rank", "9"]) == 2
    assert "has no rank 9" in capsys.readouterr().err


def test_perfetto_export_has_a_segment_track(stall: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    assert main(["export", str(stall), "--perfetto", str(out), "--edge-set", "native"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e.get("cat") == "critical_path_segment"]
    assert slices and {e["pid"] for e in slices} == {0, 2, 4, 6}  # each rank's host process
    assert all(e["dur"] >= 0 and e["args"]["path_us"] > 0 for e in slices)
