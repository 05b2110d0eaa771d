"""Content hashes of archive files: the hash taken while writing is the file's, a check fails on
any change, and a process hashes an unchanged file once (a recently written one every time)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tracegraph.ingest import checksums


def written(path: Path, data: bytes) -> str:
    with open(path, "wb") as raw:
        out = checksums.HashingFile(raw)
        for at in range(0, len(data), 1000):  # in pieces, as a Parquet writer writes
            out.write(data[at : at + 1000])
    return out.hexdigest()


def test_the_hash_taken_while_writing_is_the_files(tmp_path: Path) -> None:
    data = os.urandom(10_000)
    digest = written(tmp_path / "f", data)
    assert digest == hashlib.sha256(data).hexdigest() == checksums.file_digest(tmp_path / "f")
    assert (tmp_path / "f").read_bytes() == data
    checksums.check(tmp_path / "f", digest)


@pytest.mark.parametrize("how", ["rewritten", "truncated", "replaced", "deleted"])
def test_a_check_fails_on_any_change(tmp_path: Path, how: str) -> None:
    path = tmp_path / "rank-0.parquet"
    digest = written(path, b"a" * 4096)
    checksums.check(path, digest)
    if how == "rewritten":  # same size, other bytes
        path.write_bytes(b"b" * 4096)
    elif how == "truncated":
        os.truncate(path, 100)
    elif how == "replaced":
        (tmp_path / "other").write_bytes(b"c" * 4096)
        os.replace(tmp_path / "other", path)
    else:
        path.unlink()
    with pytest.raises(checksums.ArchiveChangedError, match=f"^{path}: ") as raised:
        checksums.check(path, digest)
    if how != "deleted":
        assert "does not match what ingest recorded" in str(raised.value)


def test_an_unchanged_file_is_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "copy.parquet"
    digest = written(path, os.urandom(5000))
    monkeypatch.setattr(checksums, "RECENT_NS", 0)  # every file old enough to be cached
    hashed: list[Path] = []
    real = checksums.file_digest
    monkeypatch.setattr(checksums, "file_digest", lambda p: hashed.append(p) or real(p))
    for _ in range(3):
        checksums.check(path, digest)
    assert len(hashed) == 1
    path.write_bytes(b"x" * 5001)
    with pytest.raises(checksums.ArchiveChangedError):
        checksums.check(path, digest)
    assert len(hashed) == 2


def test_a_recently_changed_file_is_hashed_at_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File times tick in steps of a few ms: a same-size rewrite within one step can keep every
    time the cache is keyed by, so a file changed in the last RECENT_NS is never cached."""
    path = tmp_path / "rank-0.parquet"
    digest = written(path, b"a" * 4096)
    hashed: list[Path] = []
    real = checksums.file_digest
    monkeypatch.setattr(checksums, "file_digest", lambda p: hashed.append(p) or real(p))
    for _ in range(3):
        checksums.check(path, digest)
    assert len(hashed) == 3
