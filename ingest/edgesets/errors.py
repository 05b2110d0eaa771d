"""Typed errors of the edge-set builders; the CLI turns them into one-line messages."""

from __future__ import annotations

from ..errors import IngestError


class EdgeSetError(IngestError):
    """An edge set that cannot be built (no such run, source file gone, worker crashed)."""


class HtaEnvError(EdgeSetError):
    """An HTA environment that could not be built or verified; the message is one line."""


class EmptyEdgeSetError(EdgeSetError):
    """A build in which some rank gave no edges: nothing was written (the old set is kept).

    `rank_lines` says, one line per such rank, what it gave (HTA's or our message)."""

    def __init__(self, message: str, rank_lines: list[str]) -> None:
        super().__init__(message)
        self.rank_lines = rank_lines

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.rank_lines))
