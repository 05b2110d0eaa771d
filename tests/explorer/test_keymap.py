"""Keymap files (explorer/keymap.py): only a regular file of at most MAX_KEYMAP_BYTES is read,
so `--keymap /dev/zero` or a FIFO is a one-line error (exit 2), not a read without end or a hang."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main
from tracegraph.explorer.keymap import MAX_KEYMAP_BYTES, KeymapError, load_keymap

CHILD_MEMORY = 2 << 30  # address space of the child: a read without end fails, not the machine
CHILD_TIMEOUT_S = 60  # a blocking open fails the test instead of hanging it


@pytest.fixture
def fake_db(tmp_path: Path) -> Path:
    """A file `explore` takes for a database until the app opens it (after the keymap)."""
    db = tmp_path / "x.kuzu"
    db.write_bytes(b"KUZU" + bytes(4092))
    return db


def _explore_in_a_child(db: Path, keys: Path | str) -> subprocess.CompletedProcess[str]:
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))

    argv = [sys.executable, "-m", "tracegraph.explorer.cli", "explore", str(db), "--keymap"]
    return subprocess.run(
        [*argv, str(keys)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=limit_memory,
    )


def _assert_one_line(done: subprocess.CompletedProcess[str], keys: Path | str, says: str) -> None:
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"tracegraph: error: {keys}: {says}"), done.stderr


def test_a_device_is_refused_without_reading_it(fake_db: Path) -> None:
    _assert_one_line(_explore_in_a_child(fake_db, "/dev/zero"), "/dev/zero", "not a regular file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(fake_db: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "keys.json"
    os.mkfifo(fifo)
    _assert_one_line(_explore_in_a_child(fake_db, fifo), fifo, "not a regular file")


def test_a_file_over_the_bound_is_refused(fake_db: Path, tmp_path: Path) -> None:
    big = tmp_path / "keys.json"
    big.write_text("{}" + " " * MAX_KEYMAP_BYTES)
    _assert_one_line(_explore_in_a_child(fake_db, big), big, "over 1,048,576 bytes")
    small = tmp_path / "small.json"
    small.write_text("{}" + " " * (MAX_KEYMAP_BYTES - 2))
    assert load_keymap(small) == {}  # exactly the bound is read


def test_serve_refuses_them_the_same(
    synthetic_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "keys.json"
    big.write_text("{}" + " " * MAX_KEYMAP_BYTES)
    for keys, says in ((big, "over 1,048,576 bytes"), (tmp_path, "not a regular file")):
        assert main(["serve", str(synthetic_db), "--keymap", str(keys)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"tracegraph: error: {keys}: {says}") and err.count("\n") == 1


def test_a_keymap_that_is_no_utf8_text_is_one_line(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_bytes(b'{"app.help": "\xff"}')
    with pytest.raises(KeymapError, match="not UTF-8"):
        load_keymap(keys)
