"""What the commands' handlers share: the usage error, the exit code of a build, outputs written
whole. Light, as the command modules that import it: parsing loads them all (`cli.py`)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import tracegraph
from tracegraph.ingest.errors import TracegraphError

if TYPE_CHECKING:
    from tracegraph.ingest.store import GraphStore

INTEGER = re.compile(r"[+-]?[0-9]+")  # an integer argument, as typed
# the range of Kuzu's INT64, as `queries.catalog` has it (which loads Kuzu)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class UsageError(TracegraphError):
    """Bad command-line input that argparse cannot catch."""


class RankOutcomeLike(Protocol):
    rank: int
    status: str
    message: str


def exit_code_for(ranks: Sequence[RankOutcomeLike], db: Path | str | None = None) -> int:
    """2 when every rank failed (one stderr line per rank: `rank N: message`), else 0.

    Only reached with --allow-empty when a rank gave no edges (without it the builder refuses
    to write, `EmptyEdgeSetError`): a build where some ranks succeed then exits 0, its failed
    ranks reported with the others.
    `db`, when given, leads each line as in the CLI's other errors.
    """
    if not ranks or any(r.status == "ok" for r in ranks):
        return 0
    where = f"{db}: " if db is not None else ""
    for r in ranks:
        message = " ".join(str(r.message).split()) or "failed"
        print(f"tracegraph: error: {where}rank {r.rank}: {message}", file=sys.stderr)
    return 2


def write_json(path: Path, data: object) -> None:
    write_text(path, json.dumps(data, indent=1) + "\n")


def write_text(path: Path, text: str) -> None:
    """Whole or not at all (ingest/outputs.py)."""
    from tracegraph.ingest import outputs  # tempfile, socket, hashlib: only to write a file

    try:
        outputs.write_text(path, text)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def open_reading(
    db: Path, timeout_ms: int = 60_000, allow_files: bool = False
) -> AbstractContextManager[GraphStore]:
    """The database, read-only (each statement checked by the guard); a path that holds
    nothing to read is a one-line error."""
    return tracegraph.open(db).reading(timeout_ms, allow_files=allow_files)


def indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.rstrip("\n").split("\n"))
