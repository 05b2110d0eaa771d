"""The files the CLI writes (`export --perfetto`, `export --sync-deps`, `report --html`) go
through ingest/outputs.py: a link planted at the old fixed `.NAME.partial` is never written
through, a replaced file keeps its mode, and what a kill -9 mid-export leaves is gone after the
next export."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main

from . import dbs

EDGE_SET = "native:hta-0.5.0"
WRITES = {
    "perfetto": ["export", "{db}", "--perfetto", "{out}"],
    "sync-deps": ["export", "{db}", "--sync-deps", "{out}", "--edge-set", EDGE_SET],
    "html": ["report", "{db}", "--html", "{out}"],
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = dbs.native_db(tmp_path_factory.mktemp("outputs"))
    if found is None:
        pytest.skip("no native edge-set builder (tracegraph.ingest.edgesets.native.edge_set)")
    return found


def _argv(write: str, db: Path, out: Path) -> list[str]:
    return [a.format(db=db, out=out) for a in WRITES[write]]


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("write", list(WRITES))
def test_a_link_planted_at_the_fixed_partial_name_is_not_written_through(
    write: str, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(b"precious\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "pre.out"
    (out_dir / ".pre.out.partial").symlink_to(victim)
    assert main(_argv(write, db, out)) == 0
    assert victim.read_bytes() == b"precious\n"
    assert (out_dir / ".pre.out.partial").is_symlink()
    assert out.stat().st_size > 0 and not out.is_symlink()
    assert _hidden(out_dir) == [".pre.out.partial"]
    capsys.readouterr()


@pytest.mark.parametrize("write", list(WRITES))
def test_a_replaced_output_keeps_its_mode(
    write: str, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "private.out"
    out.write_text("old")
    out.chmod(0o600)
    assert main(_argv(write, db, out)) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text() != "old"
    capsys.readouterr()


# The child runs `export --perfetto` with the trace writer stopped once it has written the
# whole trace (not yet renamed): so the kill always lands mid-export, whatever the machine.
CHILD = """
import sys, time
import tracegraph.queries.perfetto as perfetto
real = perfetto.write_chrome_trace
def stalled(f, *args, **kwargs):
    counts = real(f, *args, **kwargs)
    f.flush()
    time.sleep(600)
    return counts
perfetto.write_chrome_trace = stalled
from tracegraph.explorer.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("write", list(WRITES))
def test_an_output_aimed_at_the_database_itself_is_one_line_and_changes_nothing(
    write: str, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = db.read_bytes()
    assert main(_argv(write, db, db)) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"{db}: cannot write" in err and "is a Kuzu database" in err
    assert db.read_bytes() == before


def test_a_kill_mid_export_leaves_nothing_after_the_next_export(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pre.out"
    child = subprocess.Popen([sys.executable, "-c", CHILD, *_argv("perfetto", db, out)])
    try:
        deadline = time.monotonic() + 120
        while not any(p.stat().st_size for p in tmp_path.glob(".pre.out.*")):
            assert child.poll() is None, "the export ended before it was killed"
            assert time.monotonic() < deadline, "no temporary file after 120 s"
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    left = _hidden(tmp_path)
    assert len(left) == 1 and not out.exists()
    assert main(_argv("perfetto", db, out)) == 0
    assert _hidden(tmp_path) == []
    assert json.loads(out.read_text())["traceEvents"]
    capsys.readouterr()
