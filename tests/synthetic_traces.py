"""Synthetic traces for tests that need no ../shared: per-rank files written once per generator
version and config into the system's temp folder (with a fixed mtime), shared by the test
processes that ask for the same ones."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from tracegraph.examples import synthetic
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank

FIXED_MTIME_NS = 1_700_000_000_000_000_000


def synthetic_rank_files(name: str, config: SyntheticConfig) -> tuple[Path, ...]:
    """The rank files (rank order) of `config`, in a folder named after `name`, the generator's
    source and the config (another config never gets these files)."""
    key = synthetic.source_bytes() + json.dumps(dataclasses.asdict(config)).encode()
    digest = hashlib.sha1(key).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / "tracegraph-test-synthetic" / f"{name}-{digest}"
    files = tuple(folder / f"rank{r}.trace.json" for r in range(config.ranks))
    if folder.is_dir():  # renamed into place whole: complete
        return files
    partial = folder.with_name(f".{folder.name}.{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    write_per_rank(config, partial)
    for written in partial.iterdir():
        os.utime(written, ns=(FIXED_MTIME_NS, FIXED_MTIME_NS))
    try:
        partial.rename(folder)
    except OSError:  # another process put the same files there first
        shutil.rmtree(partial, ignore_errors=True)
    return files
