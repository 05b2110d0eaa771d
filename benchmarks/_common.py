"""Shared helpers for the benchmark scripts: child processes, medians, tables, trace paths.

Every timed ingest runs in a fresh child process, so imports, allocator state and Kuzu's buffer
pool start the same way for every run, and `os.wait4` gives that child's own peak RSS.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracegraph.examples import synthetic
from tracegraph.examples.synthetic import SyntheticConfig, write_merged, write_per_rank

ROOT = Path(__file__).resolve().parents[1]
TRACES = (ROOT / ".." / "shared" / "traces").resolve()
CONTROL = TRACES / "hta" / "trace_diff" / "control" / "control.json.gz"
CACHE = Path(os.environ.get("TRACEGRAPH_BENCH_CACHE", Path(tempfile.gettempdir()) / "tg-bench"))

# Runs one tracegraph ingest into a fresh database; prints timings and node counts as JSON.
# argv: db, run name, trace paths...
INGEST_CHILD = """
import time
t0 = time.perf_counter()
from tracegraph.explorer.entry import choose_allocator
choose_allocator()  # as the tracegraph command does, before pyarrow is imported
import json, resource, sys
from pathlib import Path

from tracegraph.examples import synthetic
from tracegraph.examples.synthetic import SyntheticConfig, write_merged, write_per_rank
from tracegraph.ingest.pipeline import IngestOptions, ingest
t1, c1 = time.perf_counter(), time.process_time()
res = ingest([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), IngestOptions(run=sys.argv[2]))
t2, c2 = time.perf_counter(), time.process_time()
counts = {}
for r in res.ranks:
    for k, v in r.counts.items():
        counts[k] = counts.get(k, 0) + v
print(json.dumps({"import_s": t1 - t0, "work_s": t2 - t1, "cpu_s": c2 - c1, "counts": counts,
                  "ranks": len(res.ranks), "edges": res.edges}))
"""

# Only the imports of INGEST_CHILD: the fixed cost (time and RSS) every ingest pays.
IMPORT_CHILD = """
import time
t0 = time.perf_counter()
from tracegraph.explorer.entry import choose_allocator
choose_allocator()  # as the tracegraph command does, before pyarrow is imported
import json
from tracegraph.ingest.pipeline import IngestOptions, ingest
print(json.dumps({"import_s": time.perf_counter() - t0, "work_s": 0.0}))
"""


@dataclass(frozen=True)
class ChildRun:
    """One finished child process: its wall time, peak RSS and the JSON it printed."""

    wall_s: float
    maxrss_bytes: int
    report: dict[str, object]

    @property
    def import_s(self) -> float:
        return float(self.report.get("import_s", 0.0))  # type: ignore[arg-type]

    @property
    def work_s(self) -> float:
        return float(self.report.get("work_s", 0.0))  # type: ignore[arg-type]

    @property
    def cpu_s(self) -> float:
        """CPU seconds (all threads) of the work alone: steadier than wall time on a busy box."""
        return float(self.report.get("cpu_s", 0.0))  # type: ignore[arg-type]


class ChildFailed(RuntimeError):
    """A benchmark child exited non-zero."""


def run_child(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> ChildRun:
    """Run `argv`, wait for it with wait4 (its own rusage), parse the last stdout line as JSON."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=err, env=dict(env) if env else None, cwd=cwd
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise ChildFailed(f"{argv[0]} exited {proc.returncode}:\n{stderr[-3000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise ChildFailed(f"{argv[0]} printed no JSON report:\n{stdout[-2000:]}{stderr[-2000:]}")
    # Linux reports ru_maxrss in KiB.
    return ChildRun(wall, usage.ru_maxrss * 1024, json.loads(lines[-1]))


def ingest_child(
    paths: Sequence[Path], run: str = "bench", python: Path | None = None, db: Path | None = None
) -> ChildRun:
    """One tracegraph ingest of `paths` in a fresh interpreter (`python`: another install).

    Into `db` when given (it must not exist; the caller removes it), else a temporary one.
    """
    folder = None if db else Path(tempfile.mkdtemp(prefix="tg-bench-db-"))
    target = db or folder / "bench.kuzu"  # type: ignore[operator]
    try:
        argv = [str(python or sys.executable), "-c", INGEST_CHILD, str(target), run]
        return run_child(argv + [str(p) for p in paths])
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def import_child() -> ChildRun:
    """A child that only imports the ingest pipeline (the baseline for time and RSS)."""
    return run_child([sys.executable, "-c", IMPORT_CHILD])


def generator_tag() -> str:
    """Short hash of the synthetic generator's source: cached files go stale when it changes."""
    return hashlib.sha1(synthetic.source_bytes()).hexdigest()[:8]


def cached_merged(config: SyntheticConfig, rank_in_args: bool = True) -> Path:
    """The cached merged synthetic file for `config`, written (atomically) on first use."""
    shape = f"r{config.ranks}-s{config.steps}-l{config.layers}-seed{config.seed}"
    tag = "" if rank_in_args else "-pidranks"
    path = CACHE / f"merged-{shape}{tag}-{generator_tag()}.json"
    if not path.exists():
        note(f"writing {path}")
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial.json")
        write_merged(config, partial, rank_in_args=rank_in_args)
        partial.replace(path)
    return path


def cached_per_rank(config: SyntheticConfig) -> list[Path]:
    """The cached per-rank synthetic files for `config` (rank{r}.trace.json), written once
    (keyed by the whole config: a late rank or a fault is another job)."""
    shape = f"r{config.ranks}-s{config.steps}-l{config.layers}-seed{config.seed}"
    every = hashlib.sha1(repr(config).encode()).hexdigest()[:8]
    folder = CACHE / f"per-rank-{shape}-{every}-{generator_tag()}"
    if not folder.exists():
        note(f"writing {folder}/")
        partial = folder.with_name(f".{folder.name}.{os.getpid()}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        write_per_rank(config, partial)
        partial.rename(folder)
    return sorted(folder.glob("rank*.trace.json"), key=lambda p: int(p.name[4:].split(".")[0]))


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def raw_json_bytes(path: Path) -> int:
    """Uncompressed size of a trace file (streams gzip, never holds it in memory)."""
    if not path.name.endswith(".gz"):
        return path.stat().st_size
    total = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(1 << 24):
            total += len(chunk)
    return total


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Right-aligned plain-text table on stdout."""
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,d}"
    return str(value)


def mb(n: float) -> float:
    return n / 1e6


def note(message: str) -> None:
    """Progress to stderr, results stay on stdout."""
    print(message, file=sys.stderr, flush=True)


# Which release an HTA environment holds (both distributions install the module `hta`).
HTA_VERSION_PROBE = """
from importlib.metadata import PackageNotFoundError, version
for dist, prefix in (("HolisticTraceAnalysis", "hta"), ("traceinsight", "traceinsight")):
    try:
        print(f"{prefix}-{version(dist)}")
        break
    except PackageNotFoundError:
        pass
else:
    print("hta-unknown")
"""


def hta_label(python: Path) -> str:
    """The edge-set style name, e.g. 'hta-0.5.0', of the env whose interpreter is `python`."""
    out = subprocess.run(
        [str(python), "-I", "-c", HTA_VERSION_PROBE], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()
