"""Content hashes (sha256, hex) of the run archive's files: taken while a file is written,
recorded in the database with the run or edge set, and checked before a reader uses the file,
so that a file changed since (another rank's copied over it, truncated) is an error, never an
answer from other data.

A check hashes the whole file once per process and file state (size, times, inode): a second
read of an unchanged file (the diff reads a copy per type, the explorer again and again) does
not hash it again. A file changed in the last RECENT_NS is hashed every time: file times tick
in steps of a few ms, so a same-size rewrite within one step would keep its state.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .errors import TracegraphError

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class ArchiveChangedError(TracegraphError):
    """An archive file whose bytes are not those ingest recorded."""


def new_hash(data: bytes = b"") -> hashlib._Hash:
    return hashlib.sha256(data)  # with SHA-NI ~3x blake2b's speed on the machines measured


class HashingFile(io.RawIOBase):
    """A binary file open for writing that hashes every byte written through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw, self.hash = raw, new_hash()

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        self.hash.update(data)
        return self.raw.write(data)

    def hexdigest(self) -> str:
        return self.hash.hexdigest()


def bytes_digest(data: bytes) -> str:
    return new_hash(data).hexdigest()


def file_digest(path: Path) -> str:
    """The content hash of the file at `path`, read in blocks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, new_hash).hexdigest()


# what recorded a file's hash, and what writes the file again
INGEST = ("what ingest recorded (changed since ingest)", "re-ingest the run")


def check(path: Path, recorded: str, writer: tuple[str, str] = INGEST) -> None:
    """Raise ArchiveChangedError unless the file at `path` hashes to `recorded` (`writer`: who
    recorded it, and what writes the file again)."""
    try:
        state = os.stat(path)
        if time.time_ns() - max(state.st_mtime_ns, state.st_ctime_ns) < RECENT_NS:
            found = file_digest(path)
        else:
            found = _digest_of(str(path), state.st_size, state.st_mtime_ns, state.st_ctime_ns,
                               state.st_ino, state.st_dev)  # fmt: skip
    except OSError as exc:
        raise ArchiveChangedError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    if found != recorded:
        recorder, remedy = writer
        raise ArchiveChangedError(f"{path}: does not match {recorder}; {remedy}")


RECENT_NS = 2_000_000_000


@functools.lru_cache(maxsize=1024)
def _digest_of(path: str, size: int, mtime_ns: int, ctime_ns: int, ino: int, dev: int) -> str:
    # keyed by the file's state: a write, a copy over it or a rename changes the key
    return file_digest(Path(path))
