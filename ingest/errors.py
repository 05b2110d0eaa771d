"""Typed errors of the ingest side; the CLI turns them into one-line messages."""

from __future__ import annotations

from pathlib import Path


class TraceFormatError(Exception):
    """A trace file that cannot be read as a Kineto trace."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # picklable, so the error can come back from a worker process
        return (type(self), (self.path, self.reason))


class IngestError(Exception):
    """An ingest that cannot proceed (bad arguments, clashing run, locked database)."""
