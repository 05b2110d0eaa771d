"""The native builder's sources: the run's archive, so that the traces may move or go after
the ingest; for a run without one (ingested before archives existed), the trace re-read as the
ingest read it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest import read
from tracegraph.ingest.edgesets.native import frame
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ...conftest import needs_traces, trace

CONFIG = SyntheticConfig(ranks=1, steps=2, layers=2)


def test_a_file_ingested_with_rank_over_a_bad_distributed_info_rebuilds(
    tmp_path: Path, capsys
) -> None:
    (path,) = write_per_rank(CONFIG, tmp_path / "traces")
    text = path.read_text()
    head, tail = text.split('"distributedInfo"', 1)
    path.write_text(head + '"distributedInfo"' + tail.replace('"rank": 0', '"rank": "abc"', 1))
    db = tmp_path / "run.kuzu"
    assert main(["ingest", str(path), "--db", str(db)]) == 2  # the file's rank is unusable
    assert main(["ingest", str(path), "--db", str(db), "--rank", "5"]) == 0
    shutil.rmtree(db.with_name(db.name + ".archive"))  # as before archives: re-read the file
    capsys.readouterr()
    assert main(["edges", str(db), "--native"]) == 0
    out = capsys.readouterr().out
    assert "rank 5: critical path" in out


def test_no_command_after_ingest_needs_the_traces(tmp_path: Path, capsys) -> None:
    config = SyntheticConfig(ranks=3, steps=2, layers=2, late_rank=1, late_us=2_000)
    traces = tmp_path / "traces"
    write_per_rank(config, traces)
    db = tmp_path / "run.kuzu"
    assert main(["ingest", str(traces), "--db", str(db)]) == 0
    traces.rename(tmp_path / "moved")  # the traces are gone from where they were ingested
    commands = [
        ["edges", str(db), "--native", "--all-steps"],
        ["edges", str(db), "--native", "--emulate", "traceinsight-0.6.1"],
        ["diff", str(db), "native", "native:traceinsight-0.6.1"],
        ["whatif", str(db), "native", "--scale", "kernel=0.5"],
        ["info", str(db)],
        ["query", str(db), "--canned", "step-times", "--param", "run=traces"],
        ["report", str(db)],
        ["report", str(db), "--hta-compatible", "--format", "json"],
    ]
    for argv in commands:
        capsys.readouterr()
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    assert "straggler rank 1" in _edges_output(db, capsys)


def _edges_output(db: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["edges", str(db), "--native", "--all-steps"]) == 0
    return capsys.readouterr().out


def test_an_ingest_removes_archives_no_run_owns(tmp_path: Path) -> None:
    (path,) = write_per_rank(CONFIG, tmp_path / "traces")
    db = tmp_path / "run.kuzu"
    root = db.with_name(db.name + ".archive")
    assert main(["ingest", str(path), "--db", str(db), "--run", "a"]) == 0
    (kept,) = root.iterdir()
    for orphan in (".partial-1-999", "run-1-0123456789ab"):  # a killed ingest's, a failed one's
        (root / orphan).mkdir()
        (root / orphan / "rank-0.parquet").write_bytes(b"x")
    assert main(["ingest", str(path), "--db", str(db), "--run", "b"]) == 0
    names = sorted(p.name for p in root.iterdir())
    assert kept.name in names and len(names) == 2
    assert not any(n.startswith(".partial") or n == "run-1-0123456789ab" for n in names)
    assert main(["ingest", str(path), "--db", str(db), "--run", "b"]) == 2  # refused: no trace
    assert sorted(p.name for p in root.iterdir()) == names  # of the failure is left


def test_an_error_after_the_swap_keeps_the_archive_of_the_run_swapped_in(
    tmp_path: Path, monkeypatch
) -> None:
    """The database is in place when its folder's fsync fails (or a Ctrl-C lands there): the
    run it holds keeps its archive, so its edges still build without the traces."""
    from tracegraph.ingest import store as store_module

    (path,) = write_per_rank(CONFIG, tmp_path / "traces")
    db = tmp_path / "run.kuzu"
    real_fsync = store_module._fsync

    def fsync(p: Path) -> None:
        if Path(p).is_dir():
            raise KeyboardInterrupt
        real_fsync(p)

    monkeypatch.setattr(store_module, "_fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        ingest([path], db, IngestOptions(run="job"))
    monkeypatch.setattr(store_module, "_fsync", real_fsync)
    shutil.rmtree(tmp_path / "traces")
    assert main(["edges", str(db), "--native", "--run", "job"]) == 0


def test_hta_edges_build_from_the_archive_when_the_traces_are_gone(
    tmp_path: Path, hta_envs, capsys
) -> None:
    """`edges --hta` gives the same edges with the traces moved away (per-rank files, and a
    merged one split by rank), HTA reading the bytes the run's archive kept."""
    import tracegraph

    from ..merge import write_merged
    from .conftest import cache_root

    config = SyntheticConfig(ranks=2, steps=2, layers=2)
    traces = tmp_path / "traces"
    files = write_per_rank(config, traces)
    merged = write_merged(sorted(files), tmp_path / "merged.json", [])
    graph = tracegraph.open(tmp_path / "run.kuzu")
    graph.ingest(traces, run="per_rank")
    graph.ingest(merged, run="merged")

    def edges(run: str) -> list[tuple]:
        graph.edges(producer="HolisticTraceAnalysis==0.5.0", run=run, cache_root=cache_root())
        table = graph.dependencies("hta-0.5.0", run=run).drop_columns(["src_id", "dst_id"])
        return sorted(tuple(r.values()) for r in table.to_pylist())

    before = {run: edges(run) for run in ("per_rank", "merged")}
    assert before["per_rank"] and before["per_rank"] == before["merged"]
    traces.rename(tmp_path / "moved")
    merged.unlink()
    assert {run: edges(run) for run in ("per_rank", "merged")} == before


@needs_traces
def test_hta_streams_read_a_slice_of_args_at_a_time_equal_those_read_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ROCm writes some streams as text ("0x0"): HTA reads those as -1, unlike tracegraph
    rank = next(read.rank_traces(trace("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")))
    at_once = frame.frame_source(rank).rows
    differ = pc.not_equal(pc.fill_null(at_once["stream"], -1), at_once["hta_stream"])
    assert pc.sum(differ).as_py() > 0  # rows whose args HTA reads otherwise
    monkeypatch.setattr(frame, "ARGS_AT_A_TIME", 3)
    assert frame.frame_source(rank).rows.equals(at_once)
