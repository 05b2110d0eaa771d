"""Output files written whole or not at all: a report, a trace export, a cache entry.

A file is written to a fresh hidden temporary beside its target and renamed onto it once
complete (fsynced first), so a reader never sees half a file and a failed write leaves the
target as it was. The temporary is made by `tempfile.mkstemp` (O_CREAT|O_EXCL: never a
predictable name, never through a planted link). A target that is a symbolic link is written
as the database is (ingest/store.py): the file the link names changes, the link stays. A file
that exists keeps its permission bits; a new one gets the umask's (as `open` would make it); a
read-only one is refused, and so is a Kuzu database (an export or a console CSV aimed at the
database being read would otherwise replace it).

A writer killed mid-write (kill -9) leaves its temporary behind. Each temporary names its
writer: `.NAME.HOST.PID.RANDOM.tracegraph-partial`, HOST a tag of this machine and pid
namespace. The next write of NAME (or `sweep` of the folder) removes the ones this user's
writers on this machine left that are no longer running; any other file stays.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

SUFFIX = ".tracegraph-partial"
KUZU_MAGIC = b"KUZU"  # the first bytes of a Kuzu database file


class PartialFile:
    """The temporary that becomes `target` on `commit`; `discard` removes it. For writes that
    span calls (a cache written a piece at a time); `written` is the block form."""

    def __init__(self, target: str | os.PathLike[str], *, binary: bool = False) -> None:
        self.target = _writable_target(Path(target))
        folder, name = self.target.parent, self.target.name
        sweep(folder, name)
        mode = _kept_mode(self.target)
        prefix = f".{name}.{_machine_tag()}.{os.getpid()}."
        fd, temp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=SUFFIX)
        self.path = Path(temp)
        try:
            os.fchmod(fd, mode)
            self.file: IO[Any] = (
                os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
            )
        except BaseException:
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise

    def commit(self) -> None:
        """Put the complete file in place of the target (the temporary removed on a failure)."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.path, self.target)
        except BaseException:
            self.discard()
            raise
        _fsync_folder(self.target.parent)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        self.path.unlink(missing_ok=True)


@contextlib.contextmanager
def written(target: str | os.PathLike[str], *, binary: bool = False) -> Iterator[IO[Any]]:
    """A file (text, UTF-8, or `binary`) whose contents become `target` if the block succeeds;
    on any exception the target is as it was and the temporary is gone."""
    partial = PartialFile(target, binary=binary)
    try:
        yield partial.file
    except BaseException:
        partial.discard()
        raise
    partial.commit()


def write_text(target: str | os.PathLike[str], text: str) -> None:
    """`text` (UTF-8) as the whole of `target`."""
    with written(target) as f:
        f.write(text)


def sweep(folder: Path, name: str | None = None) -> None:
    """Remove the temporaries of `name` (of any target when None) in `folder` that this user's
    writers on this machine left and that are no longer running. Best effort."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if _left_by_a_gone_writer(entry, name):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def _left_by_a_gone_writer(entry: os.DirEntry[str], name: str | None) -> bool:
    if not (entry.name.startswith(".") and entry.name.endswith(SUFFIX)):
        return False
    parts = entry.name[: -len(SUFFIX)].rsplit(".", 3)
    if len(parts) != 4:
        return False
    target, tag, pid, _random = parts
    if (name is not None and target != f".{name}") or tag != _machine_tag() or not pid.isdigit():
        return False
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        return False
    return not _running(int(pid))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, another user's
        return True
    return True


def _machine_tag() -> str:
    """This machine and pid namespace, so that a folder shared between machines (or
    containers) never has a live writer's temporary taken for a gone one's."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}\0{namespace}".encode()).hexdigest()[:8]


def _writable_target(given: Path) -> Path:
    """The file to replace for `given`: through a link, the file it names. An OSError (naming
    `given`) for a folder or a read-only file."""
    target = Path(os.path.realpath(given))
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder", str(given))
    writable = not target.exists() or (
        os.access(target, os.W_OK) and target.stat().st_mode & 0o222  # root: the bits
    )
    if not writable:
        raise PermissionError(errno.EACCES, "the file is read-only", str(given))
    if _is_kuzu_database(target):
        raise FileExistsError(
            errno.EEXIST, "it is a Kuzu database: choose another file", str(given)
        )
    return target


def _is_kuzu_database(path: Path) -> bool:
    try:
        if not path.is_file():  # a FIFO's open would wait for a writer
            return False
        with path.open("rb") as handle:
            return handle.read(len(KUZU_MAGIC)) == KUZU_MAGIC
    except OSError:
        return False


def _kept_mode(target: Path) -> int:
    """The permission bits the new file gets: the old file's, else what the umask leaves."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it where the system says it (os.umask can
    only be read by setting it, which a writer thread must not do to the others)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: some file systems refuse a folder's fsync)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
