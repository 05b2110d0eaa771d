"""What a database is on disk, for tests that hold "nothing changed"."""

from __future__ import annotations

import hashlib
from pathlib import Path


def db_digest(db: Path) -> dict[str, str]:
    """sha256 of every file of the database: the file itself and everything named after it
    beside it (WAL, lock, the native builder's cache folder)."""
    out = {}
    for entry in sorted(db.parent.glob(db.name + "*")):
        files = sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry]
        for f in files:
            out[str(f.relative_to(db.parent))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out
