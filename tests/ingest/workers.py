"""Jobs the session's worker processes run: real ingests into their own databases."""

from __future__ import annotations

from pathlib import Path

from tracegraph.ingest.pipeline import IngestOptions, IngestResult, ingest


def ingest_job(paths: list[Path], db: Path, options: IngestOptions) -> IngestResult:
    """`ingest`, with any failure re-raised as a plain RuntimeError that survives pickling."""
    try:
        return ingest(paths, db, options)
    except Exception as exc:  # noqa: BLE001 - reported in the test that needs the database
        raise RuntimeError(
            f"ingest of {[str(p) for p in paths]} failed: {type(exc).__name__}: {exc}"
        ) from None
