"""The database path is the database: links are followed, permissions kept, a read-only file
refused, and a bad path or a failing disk is one line naming the path given, with nothing left
behind and nothing changed."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest.store import GraphStore

CONFIG = SyntheticConfig(ranks=1, steps=1, layers=2)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (path,) = write_per_rank(CONFIG, tmp_path_factory.mktemp("trace"))
    return path


def _ingest(trace: Path, db: Path, run: str) -> int:
    return main(["ingest", str(trace), "--db", str(db), "--run", run])


def _runs(db: Path) -> list[str]:
    with GraphStore(db) as store:
        return sorted(store.run("MATCH (r:Run) RETURN r.name AS n").table["n"].to_pylist())


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith(".lock")
    }


def _one_error(capsys: pytest.CaptureFixture[str], given: Path, says: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tracegraph: error: {given}: "), err
    assert says in err and ".staging-" not in err and "Traceback" not in err


def test_through_a_link_the_target_changes_and_the_link_stays(trace: Path, tmp_path: Path):
    real = tmp_path / "data" / "real.kuzu"
    real.parent.mkdir()
    assert _ingest(trace, real, "a") == 0
    link = tmp_path / "link.kuzu"
    link.symlink_to(real)
    assert _ingest(trace, link, "b") == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _runs(real) == ["a", "b"]


def test_permissions_are_kept(trace: Path, tmp_path: Path):
    db = tmp_path / "run.kuzu"
    assert _ingest(trace, db, "a") == 0
    db.chmod(0o640)
    assert _ingest(trace, db, "b") == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o640


def test_a_read_only_database_is_refused_and_unchanged(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "run.kuzu"
    assert _ingest(trace, db, "a") == 0
    db.chmod(0o444)
    capsys.readouterr()
    before = _digest(tmp_path)
    assert _ingest(trace, db, "b") == 2
    _one_error(capsys, db, "read-only")
    assert _digest(tmp_path) == before and stat.S_IMODE(db.stat().st_mode) == 0o444


@pytest.mark.parametrize("kind", ["folder", "file as parent"])
def test_a_path_that_cannot_be_a_database(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
):
    if kind == "folder":
        given, says = tmp_path / "adir", "is a folder"
        given.mkdir()
    else:
        (tmp_path / "afile").write_text("x")
        given, says = tmp_path / "afile" / "sub.kuzu", "is a file, not a folder"
    assert _ingest(trace, given, "a") == 2
    _one_error(capsys, given, says)


def test_a_full_disk_while_staging_leaves_nothing_behind(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
):
    db = tmp_path / "run.kuzu"
    assert _ingest(trace, db, "a") == 0
    capsys.readouterr()
    before = _digest(tmp_path)

    def full_disk(src: str, dst: str, *a: object, **k: object) -> None:
        Path(dst).write_bytes(Path(src).read_bytes()[:100])  # a partial copy, then ENOSPC
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    assert _ingest(trace, db, "b") == 2
    _one_error(capsys, db, "No space left on device")
    assert _digest(tmp_path) == before
    assert not list(tmp_path.glob(".*staging*"))
