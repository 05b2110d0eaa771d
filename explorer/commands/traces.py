"""`report`, `path` and `edges` on trace files or folders: the database that holds them,
ingested first unless it already does (ingest/reuse.py)."""

from __future__ import annotations

import argparse
import sys
from contextlib import redirect_stdout
from pathlib import Path

from tracegraph.ingest.pipeline import TRACE_SUFFIXES

from ..progress import stderr_progress
from .common import UsageError
from .store import print_ingest


def names_traces(paths: list[Path]) -> bool:
    """Whether `paths` name traces (files *.json / *.json.gz, or folders) rather than one
    database file."""
    return len(paths) > 1 or paths[0].is_dir() or paths[0].name.endswith(TRACE_SUFFIXES)


def resolve_database(args: argparse.Namespace) -> None:
    """Set `args.db` (and `args.run`) from `args.inputs`: the database named, or the database
    holding the traces named (`--db`, else the cache's), ingesting them if it does not yet."""
    inputs: list[Path] = args.inputs
    if not names_traces(inputs):
        if args.into is not None:
            raise UsageError(f"--db {args.into}: only with trace files or folders")
        args.db = inputs[0]
        return
    from tracegraph.ingest.reuse import ingested

    with stderr_progress() as progress:
        done = ingested(inputs, args.into, run=args.run, progress=progress)
    if done.result is None:
        print(f"tracegraph: run '{done.run}' of {done.db} holds these traces", file=sys.stderr)
    else:
        for name, why in done.result.skipped:
            print(f"tracegraph: skipped {name}: {why}", file=sys.stderr)
        with redirect_stdout(sys.stderr):  # the ingest's summary is progress, not the answer
            print_ingest(done.result, done.db)
    args.db, args.run = done.db, done.run
