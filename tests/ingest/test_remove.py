"""Removing runs (`runs DB rm NAME`) and replacing one (`ingest --replace`): the other runs are
left exactly as they were, the removed run leaves nothing behind, and a failure changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest import archive
from tracegraph.ingest.errors import TraceFormatError

from .test_parallel import dump

CONFIG = SyntheticConfig(ranks=2, steps=2, layers=2)


def of_run(everything: dict[str, list], run_ids: set[int]) -> dict[str, list]:
    """The rows of a dump that belong to events of one run (by id)."""
    out = {}
    for key, rows in everything.items():
        if key in ("Op", "Runtime", "Kernel"):
            out[key] = [r for r in rows if r["n.id"] in run_ids]
        elif " " in key:  # relationships: (from id, to id)
            out[key] = [r for r in rows if int(r[0]) in run_ids or int(r[1]) in run_ids]
    return out


def test_removing_a_run_leaves_the_others_as_they_were(tmp_path: Path, capsys) -> None:
    write_per_rank(CONFIG, tmp_path / "a")
    write_per_rank(SyntheticConfig(ranks=3, steps=1, layers=2), tmp_path / "b")
    db = tmp_path / "runs.kuzu"
    g = tracegraph.open(db)
    g.ingest(tmp_path / "a", run="a")
    g.ingest(tmp_path / "b", run="b")
    g.edges("native", run="b")
    keep = {r["id"] for r in g.query("MATCH (n:Op:Runtime:Kernel) WHERE n.run = 'a' "
                                     "RETURN n.id AS id").to_pylist()}  # fmt: skip
    before = of_run(dump(db), keep)
    assert main(["runs", str(db), "rm", "b"]) == 0
    assert g.runs()["name"].to_pylist() == ["a"]
    assert of_run(dump(db), keep) == before
    left = g.query("MATCH (n) WHERE n.run = 'b' RETURN count(*) AS n")["n"][0].as_py()
    assert left == 0 and g.edge_sets().num_rows == 0  # b's nodes and its edge set are gone
    assert len(list(archive.archive_root(db).iterdir())) == 1  # only a's archive remains
    capsys.readouterr()
    unchanged = db.read_bytes()
    assert main(["runs", str(db), "rm", "a", "nope"]) == 2  # all or none
    assert "no run 'nope'" in capsys.readouterr().err
    assert db.read_bytes() == unchanged


def test_replace_swaps_a_run_in_one_write_and_a_failed_one_keeps_the_old(tmp_path: Path) -> None:
    write_per_rank(CONFIG, tmp_path / "v1")
    write_per_rank(SyntheticConfig(ranks=3, steps=1, layers=2), tmp_path / "v2")
    db = tmp_path / "job.kuzu"
    g = tracegraph.open(db)
    g.ingest(tmp_path / "v1", run="job")
    with pytest.raises(tracegraph.TracegraphError, match="already exists.*--replace"):
        g.ingest(tmp_path / "v2", run="job")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "rank0.json").write_text('{"traceEvents": [')
    before = db.read_bytes()
    with pytest.raises(TraceFormatError):
        g.ingest(broken, run="job", replace=True)
    assert db.read_bytes() == before  # the old run is intact
    g.ingest(tmp_path / "v2", run="job", replace=True)
    runs = g.runs().to_pylist()
    assert [(r["name"], r["ranks"]) for r in runs] == [("job", [0, 1, 2])]
    assert len(list(archive.archive_root(db).iterdir())) == 1  # the old archive went with it
    assert g.edges("native", run="job").ranks  # the new run builds from its own archive
