"""Synthetic traces for tests that need no ../shared: per-rank files written once per version of
the generator into the system's temp folder, with a fixed mtime, so that answers cached by file
identity (HTA's, in the oracle tests) stay valid from one session to the next."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from tracegraph.examples import synthetic
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank

FIXED_MTIME_NS = 1_700_000_000_000_000_000


def synthetic_rank_files(name: str, config: SyntheticConfig) -> tuple[Path, ...]:
    """The rank files (rank order) of `config`, under a folder named `name`."""
    digest = hashlib.sha1(Path(synthetic.__file__).read_bytes()).hexdigest()[:8]
    folder = Path(tempfile.gettempdir()) / f"tracegraph-test-synthetic-{digest}" / name
    files = tuple(folder / f"rank{r}.trace.json" for r in range(config.ranks))
    if not all(f.exists() for f in files):
        partial = folder.with_name(f".{name}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        write_per_rank(config, partial)
        for written in partial.iterdir():
            os.utime(written, ns=(FIXED_MTIME_NS, FIXED_MTIME_NS))
        shutil.rmtree(folder, ignore_errors=True)
        partial.replace(folder)
    return files
