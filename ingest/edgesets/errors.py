"""Typed errors of the edge-set builders; the CLI turns them into one-line messages."""

from __future__ import annotations

from ..errors import IngestError


class EdgeSetError(IngestError):
    """An edge set that cannot be built (no such run, source file gone, worker crashed)."""


class HtaEnvError(EdgeSetError):
    """An HTA environment that could not be built or verified; the message is one line."""
