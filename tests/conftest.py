"""Shared fixtures: the real traces beside the repository, and databases built once per session.

Ingesting every shared trace is most of the suite's work, so a session-wide pool of worker
processes ingests each trace (and reads it with the oracle in tests/ingest/oracle.py) exactly
once, smallest first, in the background while tests run; a test waits only for what it uses.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import site
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest import schema
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, IngestResult
from tracegraph.ingest.store import GraphStore

from .ingest.merge import UNLABELLED_PID, write_merged
from .ingest.oracle import TraceFacts, trace_facts
from .ingest.workers import ingest_job

REPO_ROOT = Path(__file__).resolve().parents[1]
# After the last test the run must end: past this, every thread's stack goes to stderr and the
# run exits failed (a thread or process left waiting would otherwise hold CI to its limit).
EXIT_GRACE_S = 300
TRACES = (REPO_ROOT / ".." / "shared" / "traces").resolve()
TRACE_SUFFIXES = (".json", ".json.gz")
# Folders holding the per-rank files of one job: ingested together, as one run.
MULTI_RANK_FOLDERS = ("cpu_ddp_2r", "hta/trace_filter")
# Merged files built from real per-rank files (tests/ingest/merge.py), rank = position: the two
# real 2-rank jobs, and the two cuda_sync traces (for SYNCS). In the trace_filter one, rank 1's
# GPU pid names no rank, so it ingests only with rank_of_pid.
MERGED = {
    "merged:cpu_ddp_2r": (
        "cpu_ddp_2r/rank0.step5.pt.trace.json.gz",
        "cpu_ddp_2r/rank1.step5.pt.trace.json.gz",
    ),
    "merged:hta/trace_filter": (
        "hta/trace_filter/sampled_rank-0.json.gz",
        "hta/trace_filter/sampled_rank-1.json.gz",
    ),
    "merged:hta/critical_path": (
        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
        "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    ),
}
RANK_OF_PID_KEY = "merged:hta/trace_filter"
RANK_OF_PID = {UNLABELLED_PID: 1}
# Opening a database takes a noticeable fraction of a second and reserves a large address range
# (kuzu refuses to open more than about 20 at once): keep a few open, and run the tests of one
# trace together (see pytest_generate_tests).
MAX_OPEN_STORES = 6

needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not at {TRACES}")


def trace(relative: str) -> Path:
    return TRACES / relative


def trace_files() -> list[Path]:
    """Every trace file under the shared folder (none when it is absent)."""
    if not TRACES.is_dir():
        return []
    return sorted(
        p
        for p in TRACES.rglob("*")
        if p.is_file()
        and p.name.endswith(TRACE_SUFFIXES)
        and "meta" not in p.relative_to(TRACES).parts  # a job's run metadata, not a trace
    )


def trace_id(path: Path) -> str:
    return str(path.relative_to(TRACES))


def per_rank_files(key: str) -> list[Path]:
    """The per-rank files of a multi-rank folder or a merged file, in rank order."""
    if key in MERGED:
        return [trace(f) for f in MERGED[key]]
    return sorted(trace(key).glob("*.json.gz"))  # the names sort by rank


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`shared_trace`: every shared trace file, session-scoped so that pytest runs all tests of
    one trace (so one database) together; an empty parameter set skips when traces are absent."""
    if "shared_trace" in metafunc.fixturenames:
        metafunc.parametrize("shared_trace", trace_files(), ids=trace_id, scope="session")


def rows(store: GraphStore, cypher: str, params: Mapping[str, object] | None = None) -> list[dict]:
    return store.run(cypher, params).table.to_pylist()


def scalar(store: GraphStore, cypher: str, params: Mapping[str, object] | None = None) -> Any:
    table = store.run(cypher, params).table
    assert table.shape == (1, 1), table
    return table.column(0)[0].as_py()


LABEL_COUNTS = (
    "MATCH (n) RETURN label(n) AS label, count(*) AS n "
    "UNION ALL MATCH ()-[e]->() RETURN label(e) AS label, count(*) AS n"
)


def label_counts(store: GraphStore) -> dict[str, int]:
    """Rows per node and relationship label in the whole database."""
    return {r["label"]: r["n"] for r in rows(store, LABEL_COUNTS)}


class Ingested:
    """A database the pool built, its ingest result, and a read-only store opened on demand."""

    def __init__(self, db: Path, result: IngestResult, opened: OrderedDict[Path, Ingested]):
        self.db = db
        self.result = result
        self._opened = opened
        self._store: GraphStore | None = None

    @property
    def store(self) -> GraphStore:
        self._opened.pop(self.db, None)
        self._opened[self.db] = self
        while len(self._opened) > MAX_OPEN_STORES:
            self._opened.popitem(last=False)[1].close()
        if self._store is None:
            self._store = GraphStore(self.db)
        return self._store

    def rows(self, cypher: str, params: Mapping[str, object] | None = None) -> list[dict]:
        return rows(self.store, cypher, params)

    def scalar(self, cypher: str, params: Mapping[str, object] | None = None) -> Any:
        return scalar(self.store, cypher, params)

    def rank_of(self, path: Path) -> int:
        (rank,) = [r.rank for r in self.result.ranks if r.file == str(path)]
        return rank

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class TracePool:
    """Ingests and oracle reads of real traces, each done once, in worker processes."""

    def __init__(self, executor: ProcessPoolExecutor, workdir: Path) -> None:
        self._executor = executor
        self._workdir = workdir
        self._ingests: dict[str, Future[IngestResult]] = {}
        self._paths: dict[str, list[Path]] = {}
        self._dbs: dict[str, Path] = {}
        self._done: dict[str, Ingested] = {}
        self._facts: dict[Path, Future[TraceFacts]] = {}
        self._opened: OrderedDict[Path, Ingested] = OrderedDict()

    def submit(self, key: str, paths: list[Path], options: IngestOptions | None = None) -> None:
        if key not in self._ingests:
            options = options or IngestOptions()
            self._dbs[key] = self._workdir / f"{len(self._dbs):03d}.kuzu"
            self._paths[key] = list(paths)
            self._ingests[key] = self._executor.submit(ingest_job, paths, self._dbs[key], options)

    def submit_facts(self, path: Path) -> None:
        if path not in self._facts:
            self._facts[path] = self._executor.submit(trace_facts, path)

    def db(self, key: str) -> Ingested:
        """The database of a submitted ingest, once it is built."""
        if key not in self._done:
            self._done[key] = Ingested(self._dbs[key], self._ingests[key].result(), self._opened)
        return self._done[key]

    def paths(self, key: str) -> list[Path]:
        """The trace files a submitted ingest reads."""
        return self._paths[key]

    def facts(self, path: Path) -> TraceFacts:
        self.submit_facts(path)
        return self._facts[path].result()

    @staticmethod
    def unit_of(path: Path) -> str:
        """The ingest key holding a trace file: its multi-rank folder, or the file itself."""
        relative = trace_id(path)
        for folder in MULTI_RANK_FOLDERS:
            if relative.startswith(folder + "/"):
                return folder
        return relative

    def db_of(self, path: Path) -> Ingested:
        return self.db(self.unit_of(path))

    def close(self) -> None:
        for ingested in self._done.values():
            ingested.close()


def _queue_everything(pool: TracePool, workdir: Path) -> None:
    """Every standard ingest and oracle read, smallest first, so that tests rarely wait."""
    units: dict[str, list[Path]] = {}
    for path in trace_files():
        units.setdefault(TracePool.unit_of(path), []).append(path)
    for key, files in MERGED.items():
        unlabelled = set(RANK_OF_PID) if key == RANK_OF_PID_KEY else set()
        out = workdir / f"{key.replace(':', '_').replace('/', '_')}.json"
        units[key] = [write_merged([trace(f) for f in files], out, unlabelled_pids=unlabelled)]
    options = {RANK_OF_PID_KEY: IngestOptions(parse=ParseOptions(rank_of_pid=RANK_OF_PID))}

    def order(unit: tuple[str, list[Path]]) -> tuple[bool, int]:
        key, paths = unit  # multi-rank and merged units first: most modules use them
        return (
            key not in MULTI_RANK_FOLDERS and key not in MERGED,
            sum(p.stat().st_size for p in paths),
        )

    for key, paths in sorted(units.items(), key=order):
        pool.submit(key, paths, options.get(key))
        if not key.startswith("merged:"):
            for path in paths:
                pool.submit_facts(path)


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracePool]:
    """The session's pool of real-trace databases and oracle facts (skips without traces)."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    workdir = tmp_path_factory.mktemp("trace_dbs")
    executor = ProcessPoolExecutor(
        max(1, min(4, os.cpu_count() or 1)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=site.addsitedir,  # workers import tests.ingest.* like this process
        initargs=(str(REPO_ROOT),),
    )
    pool = TracePool(executor, workdir)
    try:
        _queue_everything(pool, workdir)
        yield pool
    finally:
        pool.close()
        executor.shutdown(wait=True, cancel_futures=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Arm the watchdog of EXIT_GRACE_S for the exit (cancelled when the interpreter ends),
    writing where the run's own stderr goes, not into pytest's capture."""
    capture = session.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
        stderr = os.dup(2)
    faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True, file=stderr)


def dump(db: Path) -> dict[str, list[dict]]:
    """Every node and relationship of the database, in a fixed order."""
    out: dict[str, list[dict]] = {}
    with GraphStore(db, read_only=True) as store:
        for table in schema.NODE_TABLES:
            if table.label in ("Run", "EdgeSet"):
                continue  # ingest time, edge sets: not what the ingest parsed
            key = table.primary_key if hasattr(table, "primary_key") else "id"
            got = rows(store, f"MATCH (n:{table.label}) RETURN n.* ORDER BY n.{key}")
            out[table.label] = [{k: v for k, v in r.items() if k != "n.file"} for r in got]
        for rel in schema.REL_TABLES:
            for src, dst in rel.pairs:  # labelled: Kuzu 0.11.3 mixes up ids of unlabelled ends
                cypher = f"MATCH (a:{src})-[:{rel.label}]->(b:{dst}) RETURN a.id AS a, b.id AS b"
                out[f"{rel.label} {src}->{dst}"] = sorted(
                    (r["a"], r["b"]) for r in rows(store, cypher)
                )
    return out


def synthetic_db(config: SyntheticConfig, folder: Path, run: str) -> Path:
    """A database of `run`: the synthetic job `config`'s per-rank files, written in `folder`."""
    import tracegraph

    db = folder / f"{run}.kuzu"
    tracegraph.open(db).ingest(*write_per_rank(config, folder / f"{run}-traces"), run=run)
    return db
