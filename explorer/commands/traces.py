"""`report`, `path` and `edges` on trace files or folders: the database that holds them,
ingested first unless it already does (ingest/reuse.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

from tracegraph.ingest.file_bytes import TRACE_SUFFIXES

from ..progress import stderr_progress
from .common import UsageError
from .ingest import print_ingest

if TYPE_CHECKING:
    from tracegraph.ingest.prepare import Summariser
    from tracegraph.ingest.reuse import Ingested
    from tracegraph.ingest.store import GraphStore


def names_traces(paths: list[Path]) -> bool:
    """Whether `paths` name traces (files *.json / *.json.gz, or folders) rather than one
    database file."""
    return len(paths) > 1 or paths[0].is_dir() or paths[0].name.endswith(TRACE_SUFFIXES)


def resolve_database(
    args: argparse.Namespace, answer: Callable[[GraphStore], None] | None = None
) -> bool:
    """Set `args.db` (and `args.run`) from `args.inputs`: the database named, or the database
    holding the traces named (`--db`, else the cache's), ingesting them if it does not yet.

    When they are ingested now and `answer` is given, it is called with the store holding
    them before the database write commits (the answer printed first, the command still
    exiting only once the write is done), and True returned; else False."""
    inputs: list[Path] = args.inputs
    summary = getattr(args, "summary", False)
    if not names_traces(inputs):
        if args.into is not None:
            raise UsageError(f"--db {args.into}: only with trace files or folders")
        if summary:
            raise UsageError("--summary: only with trace files or folders (a database holds "
                             "what its ingest kept)")  # fmt: skip
        args.db = inputs[0]
        return False
    if summary is None:  # `report`'s default: a fleet is summarised
        summary = _many_files(inputs)
    from tracegraph.ingest.reuse import ingested

    answered = False

    def ingested_now(done: Ingested, store: GraphStore) -> None:
        nonlocal answered
        _say_ingested(done)
        args.db, args.run = done.db, done.run
        assert answer is not None
        try:
            answer(store)
            sys.stdout.flush()  # the answer is out before the write commits
        except BrokenPipeError:
            # the reader went away (`| head`): the write still commits, so that the next
            # command on these traces reuses it rather than ingest them again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        answered = True

    with stderr_progress() as progress:
        done = ingested(
            inputs,
            args.into,
            run=args.run,
            progress=progress,
            answer=ingested_now if answer is not None else None,
            waiting=_say_waiting,
            summarise=_summariser() if summary else None,
        )
    if done.result is None:
        print(f"tracegraph: run '{done.run}' of {done.db} holds these traces", file=sys.stderr)
    elif not answered:
        _say_ingested(done)
    args.db, args.run = done.db, done.run
    return answered


# From this many trace files on, `report TRACES` summarises them (`ingest --summary`) unless
# told --no-summary: a report of a fleet in a fraction of the time a graph of every event takes.
SUMMARY_FROM_FILES = 512


def _many_files(inputs: list[Path]) -> bool:
    from tracegraph.ingest.pipeline import trace_files

    count = len(trace_files(inputs))
    if count < SUMMARY_FROM_FILES:
        return False
    print(
        f"tracegraph: {count:,} trace files: summarised (each rank's figures, not its events; "
        "--no-summary for every event)",
        file=sys.stderr,
    )
    return True


def _summariser() -> Summariser:
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER

    return SUMMARY_TIER


def _say_waiting(db: Path) -> None:
    print(f"tracegraph: waiting for another tracegraph process writing {db}", file=sys.stderr)


def _say_ingested(done: Ingested) -> None:
    assert done.result is not None
    for name, why in done.result.skipped:
        print(f"tracegraph: skipped {name}: {why}", file=sys.stderr)
    with redirect_stdout(sys.stderr):  # the ingest's summary is progress, not the answer
        print_ingest(done.result, done.db)
