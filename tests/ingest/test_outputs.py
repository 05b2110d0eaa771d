"""ingest/outputs.py: an output file is written whole or not at all, through a fresh temporary
that no planted link redirects; modes are kept; leftovers of gone writers are swept, nothing
else is."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracegraph.ingest import outputs


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file elsewhere that a planted link points at: it must never change."""
    path = tmp_path / "elsewhere" / "victim.txt"
    path.parent.mkdir()
    path.write_bytes(b"precious\n")
    return path


def _leftover(folder: Path, name: str, pid: int, tag: str | None = None) -> Path:
    tag = outputs._machine_tag() if tag is None else tag
    return folder / f".{name}.{tag}.{pid}.abcd1234{outputs.SUFFIX}"


def _gone_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_planted_link_at_the_old_fixed_name_is_left_alone(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "pre.out"
    planted = tmp_path / ".pre.out.partial"
    planted.symlink_to(victim)
    outputs.write_text(out, "new\n")
    assert out.read_text() == "new\n" and not out.is_symlink()
    assert victim.read_bytes() == b"precious\n"
    assert planted.is_symlink() and _hidden(tmp_path) == [planted.name]


def test_a_link_planted_at_a_guessed_temporary_name_is_not_followed(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary's name is made with O_EXCL: a link at the very name mkstemp tries first
    is skipped, not written through."""
    out = tmp_path / "pre.out"
    guessed = tmp_path / f".pre.out.{outputs._machine_tag()}.{os.getpid()}.guess{outputs.SUFFIX}"
    guessed.symlink_to(victim)
    candidates: Iterator[str] = iter(["guess", "other"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: candidates)
    outputs.write_text(out, "new\n")
    assert out.read_text() == "new\n"
    assert victim.read_bytes() == b"precious\n" and guessed.is_symlink()


def test_a_target_that_is_a_link_writes_the_file_it_names_and_keeps_the_link(
    tmp_path: Path, victim: Path
) -> None:
    """As the database writer does (ingest/store.py): the user's own link is the user's file."""
    link = tmp_path / "report.html"
    link.symlink_to(victim)
    outputs.write_text(link, "new\n")
    assert link.is_symlink() and victim.read_text() == "new\n"
    assert _hidden(victim.parent) == [] and _hidden(tmp_path) == []


def test_an_existing_files_mode_is_kept_and_a_new_one_gets_the_umasks(tmp_path: Path) -> None:
    kept = tmp_path / "private.json"
    kept.write_text("old")
    kept.chmod(0o600)
    outputs.write_text(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.read_text() == "new"
    old = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh.json"
        outputs.write_text(fresh, "new")
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_a_failure_mid_write_leaves_the_target_as_it_was_and_no_temporary(
    tmp_path: Path,
) -> None:
    out = tmp_path / "trace.json"
    out.write_text("old")
    with pytest.raises(RuntimeError), outputs.written(out) as f:
        f.write("half of it")
        assert len(_hidden(tmp_path)) == 1  # the temporary, while the write is on
        raise RuntimeError("the export failed")
    assert out.read_text() == "old" and _hidden(tmp_path) == []
    with pytest.raises(KeyboardInterrupt), outputs.written(tmp_path / "new.json") as f:
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


def test_a_folder_or_a_read_only_file_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        outputs.write_text(tmp_path / "folder", "x")
    locked = tmp_path / "locked.json"
    locked.write_text("old")
    locked.chmod(0o444)
    with pytest.raises(PermissionError, match="read-only"):
        outputs.write_text(locked, "new")
    assert locked.read_text() == "old" and _hidden(tmp_path) == []


def test_a_kuzu_database_is_never_replaced_by_an_output(tmp_path: Path) -> None:
    """Issue #22: a console export (or `export --perfetto DB`) aimed at the database replaced
    it with a CSV."""
    db = tmp_path / "graph.kuzu"
    db.write_bytes(b"KUZU" + bytes(range(256)) * 4)  # Kuzu's header, then anything
    link = tmp_path / "link.csv"
    link.symlink_to(db)
    before = db.read_bytes()
    for target in (db, link):
        with pytest.raises(FileExistsError, match="is a Kuzu database"):
            outputs.write_text(target, "overwritten")
    assert db.read_bytes() == before and _hidden(tmp_path) == []
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not outputs._is_kuzu_database(fifo)  # not opened: that would wait for a writer


def test_a_gone_writers_leftover_is_swept_a_live_ones_and_strangers_stay(
    tmp_path: Path, victim: Path
) -> None:
    gone = _gone_pid()
    dead = _leftover(tmp_path, "trace.json", gone)
    live = _leftover(tmp_path, "trace.json", os.getpid())
    elsewhere = _leftover(tmp_path, "trace.json", gone, tag="0ther0ne")  # another machine's
    other_name = _leftover(tmp_path, "other.json", gone)
    not_ours = tmp_path / f".trace.json.{gone}.partial"
    for path in (dead, live, elsewhere, other_name, not_ours):
        path.write_text("left")
    planted = _leftover(tmp_path, "trace.json", gone).with_name(
        f".trace.json.{outputs._machine_tag()}.{gone}.link{outputs.SUFFIX}"
    )
    planted.symlink_to(victim)
    outputs.write_text(tmp_path / "trace.json", "new")
    kept = [live, elsewhere, other_name, not_ours, planted]
    assert _hidden(tmp_path) == sorted(p.name for p in kept)
    assert victim.read_bytes() == b"precious\n"
    outputs.sweep(tmp_path)  # every name: the copies folder's sweep
    assert _hidden(tmp_path) == sorted(p.name for p in kept if p != other_name)


def test_a_partial_file_spans_calls_until_commit_or_discard(tmp_path: Path) -> None:
    out = tmp_path / "entry.parquet"
    partial = outputs.PartialFile(out, binary=True)
    partial.file.write(b"one ")
    partial.file.write(b"two")
    assert not out.exists()
    partial.commit()
    assert out.read_bytes() == b"one two" and _hidden(tmp_path) == []
    dropped = outputs.PartialFile(out, binary=True)
    dropped.file.write(b"never")
    dropped.discard()
    assert out.read_bytes() == b"one two" and _hidden(tmp_path) == []
