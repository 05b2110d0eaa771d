"""tracegraph's errors: one family, each a one-line message that says which file or database
and what is wrong. The CLI prints it as `tracegraph: error: <message>` (exit 2) in one place;
the TUI shows it in a dialog; the Python API raises it."""

from __future__ import annotations

from pathlib import Path


class TracegraphError(Exception):
    """Anything tracegraph refuses or cannot do, with a one-line message for the user."""


class TraceFormatError(TracegraphError):
    """A trace file that cannot be read as a Kineto trace."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # picklable, so the error can come back from a worker process
        return (type(self), (self.path, self.reason))


class IngestError(TracegraphError):
    """An ingest that cannot proceed (bad arguments, clashing run, locked database)."""


class DatabaseBusy(IngestError):
    """Another process holds the database's write lock."""


class UnknownRunError(IngestError, LookupError):
    """A run the database does not hold, or none named where it holds several."""
