"""The ranks by node: a 32-rank job on 4 named hosts with one late host rank and one slow GPU
names each on its own node, with the lateness the simulation injected; a job whose traces name
no host has no node table (and no section in the text)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tracegraph
from tracegraph.examples.synthetic import collective_arrivals
from tracegraph.examples.truth_jobs import BASE
from tracegraph.explorer.cli import main

from ..conftest import synthetic_db

LATE, SLOW = 10, 21
JOB = replace(
    BASE, ranks=32, gpus_per_node=8, host_names=True, late_rank=LATE, late_us=20_000,
    slow_kernel_rank=SLOW, slow_kernel_factor=25.0,
)  # fmt: skip


def test_each_injected_rank_stands_out_on_its_own_node(tmp_path: Path) -> None:
    db = synthetic_db(JOB, tmp_path, "nodes")
    report = tracegraph.open(db).report()
    nodes = report.tables["nodes"].to_pylist()
    assert [n["host"] for n in nodes] == ["node0", "node1", "node2", "node3"]
    assert [n["rank_list"] for n in nodes] == ["0–7", "8–15", "16–23", "24–31"]
    by_host = {n["host"]: n for n in nodes}
    late, slow = by_host["node1"], by_host["node2"]
    assert late["stand_out"] == str(LATE) and late["late_max_rank"] == LATE
    assert SLOW in [int(r) for r in slow["stand_out"].split()]
    assert slow["compute_max_rank"] == SLOW and slow["compute_max_pct"] > 1000  # 25x GEMMs
    assert by_host["node0"]["stand_out"] == by_host["node3"]["stand_out"] == ""
    # the late host's lateness is the simulation's: its arrival after the others' median
    truth = collective_arrivals(JOB)
    want = max(
        starts[LATE] - np.median([t for r, t in starts.items() if r != LATE])
        for step in truth.values()
        for starts in step.values()
    )
    assert late["late_max_ns"] == pytest.approx(want, rel=0.05)
    listed = report.to_json()["nodes"]
    assert listed[1]["ranks"] == list(range(8, 16)) and listed[1]["stand_out"] == [LATE]


def test_without_named_hosts_there_is_no_node_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = synthetic_db(replace(BASE, ranks=8), tmp_path, "one")
    assert tracegraph.open(db).report().tables["nodes"].num_rows == 0
    assert main(["report", str(db)]) == 0
    assert "by node" not in capsys.readouterr().out
