"""Progress of long ingests on stderr (a bar on a terminal, nothing when piped)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

STAGES = {"ingest": "ingesting files"}


@contextmanager
def stderr_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback for `ingest`: (stage, done, total)."""
    if not sys.stderr.isatty():
        yield lambda stage, done, total: None
        return
    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield report
