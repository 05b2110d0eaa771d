"""Trace files → one run in the database: parse, key, link, match collectives, load atomically."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import archive, collectives, schema
from .batch import LoadBatch
from .columns import DROP_REASONS
from .errors import IngestError, TraceFormatError
from .file_bytes import TRACE_SUFFIXES
from .full_ranks import FullRanks
from .memory import returning_memory
from .parallel import (
    FilePool,
    FileWork,
    LocalWorkers,
    ProcessFilePool,
    json_size,
    prepare_in_parallel,
    start_local_workers,
)
from .parse import RankTrace
from .parse_options import ParseOptions
from .prepare import PreparedRank, RankSummary, Summariser, prepare_rank
from .read import file_traces, sweep_spills
from .remove import remove_run, run_folder_of
from .store import KUZU_VERSION, GraphStore, write_transaction

TOOL_VERSION = "0.1.0"

Progress = Callable[[str, int, int], None]
# called with the ingest's result and the open (staging) store, once the run is loaded and its
# archive in place, before the write commits: an answer printed before the database is written
Answer = Callable[["IngestResult", GraphStore], None]


@dataclass(frozen=True)
class IngestOptions:
    run: str | None = None
    parse: ParseOptions = field(default_factory=ParseOptions)
    recursive: bool = False  # a folder's subfolders too (else only the files directly in it)
    # worker processes that parse and prepare files: 1 all in this process; None as many as
    # cores where there are several files and enough to parse (AUTO_JOBS_BYTES), else 1
    jobs: int | None = None
    replace: bool = False  # a run of the same name is replaced (else that is an error)
    # files prepared as tasks on a Ray cluster: "auto" (the one running here), "local" (a new
    # instance on this machine) or its address; `jobs` then counts files in flight (default:
    # the cluster's CPUs)
    ray: str | None = None
    # the summary tier (`ingest --summary`): every rank summarised by this function (see
    # `prepare.Summariser`), none of its events loaded; None: every event of every rank
    summarise: Summariser | None = None
    # a file that cannot be read as a trace is reported (`IngestResult.skipped`) and the others
    # loaded; else (the default) it fails the whole ingest
    keep_going: bool = False


@dataclass(frozen=True)
class IngestResult:
    run: str
    ranks: list[RankSummary]
    collectives: int
    edges: dict[str, int]
    # (what, why): files found in a folder that are JSON but no trace (name within the folder),
    # and events a rank's file held that were left out ("3 event(s) of rank 0 in FILE")
    skipped: tuple[tuple[str, str], ...] = ()
    # per file prepared by a worker (local or Ray): its ranks, time and the worker's memory
    work: tuple[FileWork, ...] = ()
    # a summary ingest's ranks loaded in full in the same write (`full_ranks.load_full_ranks`)
    full: FullRanks | None = None


@dataclass(frozen=True)
class TraceFile:
    """A file to ingest, and the folder it was found in (None: named itself)."""

    path: Path
    folder: Path | None = None

    @property
    def name(self) -> str:
        """The file as its folder's listing names it (its path when named itself)."""
        return str(self.path.relative_to(self.folder) if self.folder else self.path)


def trace_files(paths: Iterable[Path], recursive: bool = False) -> list[Path]:
    """Files named, and trace files (*.json, *.json.gz) in folders named, in order; a folder's
    subfolders only when `recursive`."""
    return [s.path for s in _sources(paths, recursive)]


def _sources(paths: Iterable[Path], recursive: bool) -> list[TraceFile]:
    found: list[TraceFile] = []
    for path in paths:
        if path.is_dir():
            folder = path.resolve()
            inside = sorted(_trace_names(folder, recursive))
            if not inside:
                deeper = "" if recursive else _subfolder_hint(folder)
                raise TraceFormatError(
                    path, f"folder holds no trace files (*.json, *.json.gz){deeper}"
                )
            found.extend(TraceFile(p, folder) for p in inside)
        elif path.exists():
            found.append(TraceFile(path.resolve()))
        else:
            raise TraceFormatError(path, "no such file or folder")
    return found


def _trace_names(folder: Path, recursive: bool) -> Iterator[Path]:
    for p in folder.rglob("*") if recursive else folder.iterdir():
        if p.is_file() and _is_trace_name(p):
            yield p


def _subfolder_hint(folder: Path) -> str:
    deeper = sum(1 for _ in _trace_names(folder, recursive=True))
    return f"; {deeper} in its subfolders (use --recursive)" if deeper else ""


def _is_trace_name(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def ingest(
    paths: Sequence[Path],
    db: Path,
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
    answer: Answer | None = None,
) -> IngestResult:
    """Ingest trace files (per rank or merged) as one run; all or nothing.

    A folder gives the trace files in it (in its subfolders too with `options.recursive`); one
    of those that is JSON but no trace (e.g. a run's metadata) is skipped and listed in the
    result's `skipped`. A file named itself must be a trace, and each folder must give one.
    What each stage frees goes back to the system before the next (`memory`). `answer` is
    called with the result and the store holding the run before the write commits (an error
    it raises leaves the database as it was).
    """
    with returning_memory():
        return _ingest(list(paths), db, options, progress, answer)


def _ingest(
    paths: list[Path],
    db: Path,
    options: IngestOptions,
    progress: Progress | None,
    answer: Answer | None,
) -> IngestResult:
    found = _sources(paths, options.recursive)
    report = progress or (lambda stage, done, total: None)
    run = options.run or default_run_name(paths, [s.path for s in found])
    files: list[Path] = []  # the files ingested, filled as they are parsed
    work: list[FileWork] = []
    skipped: list[tuple[str, str]] = []
    spill_at = db.with_name(f".{db.name}.spill")
    parse_options = replace(options.parse, spill_at=options.parse.spill_at or spill_at)
    ingested_at = datetime.now(UTC).isoformat(timespec="microseconds")
    writer: archive.ArchiveWriter | None = None
    replaced: Path | None = None  # the archive of the run --replace removes
    store: GraphStore | None = None
    traces: Generator[RankTrace, None, None] | None = None
    prepared: Generator[PreparedRank, None, None] | None = None
    batch: LoadBatch | None = None
    workers: LocalWorkers | None = None  # the pool closes them; a failure, at once
    try:
        workers = _local_workers(options, found)
        with write_transaction(db) as store:
            # what a killed or failed ingest left (the transaction holds the lock)
            sweep_spills(spill_at)
            archive.sweep(db, store)
            if options.replace and run in _run_names(store):
                replaced = run_folder_of(db, store, run)
                remove_run(store, run)  # the new run takes its place in the same write
            run_idx = _claim_run(store, run, db)
            large = _json_bytes(found) >= LARGE_FROM_BYTES
            if large:
                store.commit_and_pause()  # reopened by the first load: closed while ranks parse
            # The edge-set builders' inputs, archived with the run: no later command reads the
            # traces again.
            writer = archive.ArchiveWriter(db, run_idx)
            batch = LoadBatch(store, spill_at if large else None)
            # a summary keeps no copy of the traces: a tenth of their size, where its own
            # tables are kilobytes per rank
            keep = writer.add_source if options.summarise is None else _not_kept
            seen = FilesSeen(files, skipped, keep)
            pool = _pool(
                options, workers, (writer.partial, writer.token), batch.folder, options.summarise
            )
            if pool is not None:
                prepared = prepare_in_parallel(
                    found, parse_options, run, run_idx, pool, seen, report, work,
                    options.keep_going,
                )  # fmt: skip
            else:
                traces = _rank_traces(found, parse_options, report, seen, options.keep_going)
                prepared = _prepared(traces, run, run_idx, writer.add, options.summarise)
            result = _load(batch, _archived(prepared, writer), run, run_idx, files, ingested_at,
                           writer, options.summarise)  # fmt: skip
            writer.finish(ingested_at)  # in place before the database that names it
            dropped = _dropped_events(result.ranks)
            result = replace(result, skipped=(*skipped, *dropped), work=tuple(work))
            if answer is not None:
                answer(result, store)
    except BaseException:
        # now, not when the traceback goes: removes a spill folder, terminates the workers
        for stream in (prepared, traces):
            if stream is not None:
                stream.close()
        if workers is not None:
            workers.terminate()
        if writer is not None and not (store is not None and store.swapped):
            writer.abandon(ingested_at)
        raise
    finally:
        if batch is not None:  # after the workers that write into it are gone
            batch.close()
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)
    return result


def _not_kept(path: Path) -> None:
    pass


def _local_workers(options: IngestOptions, found: list[TraceFile]) -> LocalWorkers | None:
    """Local worker processes where they pay (None: all in this process, or on Ray), started
    before the database is opened."""
    if options.ray is not None:
        return None
    jobs = _jobs(options.jobs, found)
    return start_local_workers(jobs, options.summarise) if jobs > 1 else None


def _pool(
    options: IngestOptions,
    workers: LocalWorkers | None,
    archive: tuple[Path, str],
    load_dir: Path | None,
    summarise: Summariser | None,
) -> FilePool | None:
    """Where files are prepared: Ray when asked, else the local `workers` (None: in this
    process); local workers write their load files into `load_dir` where there is one; with
    `summarise`, workers summarise their ranks (the summary tier)."""
    if options.ray is not None:
        if options.jobs is not None and options.jobs < 1:
            raise IngestError(f"--jobs {options.jobs}: at least 1")
        from .ray_pool import RayFilePool  # Ray is an optional extra

        return RayFilePool(options.ray, options.jobs, archive, summarise)
    return None if workers is None else ProcessFilePool(workers, *archive, load_dir, summarise)


# From this much JSON on, the database is closed while the first ranks are prepared (an open
# Kuzu database holds ~40-90 MiB, which then adds to the peak) and the ranks' tables wait for
# their load in files, not in memory; below, reopening and the files cost more than they save.
LARGE_FROM_BYTES = 64 << 20

AUTO_JOBS_BYTES = 64 << 20  # below this much trace data, starting workers costs more than it saves


def _json_bytes(found: list[TraceFile]) -> int:
    """About how much JSON the files hold (a file that cannot be read counts none: its parse
    says why)."""
    total = 0
    for source in found:
        try:
            total += json_size(source.path)
        except OSError:
            pass
    return total


def _jobs(asked: int | None, found: list[TraceFile]) -> int:
    if asked is not None:
        if asked < 1:
            raise IngestError(f"--jobs {asked}: at least 1")
        return min(asked, max(len(found), 1))
    if len(found) < 2:
        return 1
    size = sum(s.path.stat().st_size for s in found if s.path.is_file())
    return min(_cores(), AUTO_JOBS_MAX, len(found)) if size >= AUTO_JOBS_BYTES else 1


AUTO_JOBS_MAX = 8  # each worker holds a file or two: more would hold much of a large job


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (cgroups, taskset)
    except AttributeError:
        return os.cpu_count() or 1


def _dropped_events(ranks: Iterable[RankSummary]) -> Iterator[tuple[str, str]]:
    """A notice per rank and reason for the events left out at parse time."""
    for summary in ranks:
        for reason, n in sorted(summary.dropped.items()):
            yield (
                f"{n:,} event(s) of rank {summary.rank} in {summary.file}",
                f'{DROP_REASONS.get(reason, reason)} (counted in Rank.skipped as "{reason}")',
            )


def _prepared(
    traces: Iterable[RankTrace],
    run: str,
    run_idx: int,
    keep_archive: Callable[[int, pa.Table], str],
    summarise: Summariser | None,
) -> Generator[PreparedRank, None, None]:
    for trace in traces:
        held = [trace]
        del trace  # prepare_rank holds the only reference: each rank is freed as it goes
        yield prepare_rank(held.pop(), run, run_idx, keep_archive, summarise)


def _archived(
    ranks: Iterable[PreparedRank], writer: archive.ArchiveWriter
) -> Iterator[PreparedRank]:
    for prepared in ranks:
        if prepared.tier == "summary":  # no rows to archive: its figures are the run's tables
            yield prepared
            continue
        if prepared.archived:
            writer.written(prepared.rank, prepared.archive_hash)
        else:
            writer.add(prepared.rank, prepared.archive_rows)
        # not held here while the consumer loads it: the archive rows are freed now
        handover = [replace(prepared, archive_rows=prepared.archive_rows.schema.empty_table())]
        del prepared
        yield handover.pop()


class FilesSeen:
    """What the files of an ingest gave, in their order: the files parsed (`files`, each handed
    to `keep_source`), a folder's JSON files that are no trace (`skipped`), and which file
    each rank came from (a rank in two files is refused)."""

    def __init__(
        self,
        files: list[Path],
        skipped: list[tuple[str, str]],
        keep_source: Callable[[Path], None],
    ) -> None:
        self.files, self.skipped, self.keep_source = files, skipped, keep_source
        self.owner: dict[int, str] = {}
        self.unreadable = 0
        self.from_folder: dict[Path, int] = {}
        self.passed_over: dict[Path, list[str]] = {}

    def skip(self, source: TraceFile, why: str) -> None:
        assert source.folder is not None
        self.skipped.append((source.name, why))
        self.passed_over.setdefault(source.folder, []).append(source.name)

    def parsed(self, source: TraceFile) -> None:
        self.files.append(source.path)
        self.keep_source(source.path)
        if source.folder is not None:
            self.from_folder[source.folder] = self.from_folder.get(source.folder, 0) + 1

    def failed(self, source: TraceFile, why: str) -> None:
        """A file that could not be read, passed over (`--keep-going`)."""
        self.skipped.append((str(source.path), f"not loaded: {why}"))
        self.unreadable += 1

    def rank(self, source: TraceFile, rank: int) -> None:
        if rank in self.owner:
            raise TraceFormatError(
                source.path,
                f"rank {rank} is also in {self.owner[rank]}: a run holds one "
                "trace per rank (use --rank N, or ingest it as another --run)",
            )
        self.owner[rank] = str(source.path)

    def finish(self, found: list[TraceFile]) -> None:
        if self.unreadable and not self.files:
            raise IngestError(f"none of the {len(found)} file(s) could be read as a trace")
        for folder in dict.fromkeys(s.folder for s in found if s.folder is not None):
            if not self.from_folder.get(folder):
                names = self.passed_over.get(folder, [])
                more = f" and {len(names) - 3} more" if len(names) > 3 else ""
                shown = ", ".join(names[:3]) + more
                raise TraceFormatError(folder, f"folder holds no traces ({shown}: not a trace)")


def _rank_traces(
    found: list[TraceFile],
    options: ParseOptions,
    report: Progress,
    seen: FilesSeen,
    keep_going: bool = False,
) -> Generator[RankTrace, None, None]:
    """The ranks of each file in turn; only one file's events are held at a time; with
    `keep_going`, a file that is no readable trace is reported to `seen` and passed over."""
    for i, source in enumerate(found):
        report("ingest", i, len(found))
        traces = file_traces(source, options, seen)
        if keep_going:
            traces = or_passed_over(traces, source, seen)
        yield from traces
    seen.finish(found)
    report("ingest", len(found), len(found))


def or_passed_over(
    traces: Generator[RankTrace, None, None], source: TraceFile, seen: FilesSeen
) -> Generator[RankTrace, None, None]:
    """`traces`, ended where the file turns out no readable trace (`seen.failed`): the ranks
    it gave before stay loaded. Errors of what consumes them are not caught."""
    while True:
        try:
            held = [next(traces)]
        except StopIteration:
            return
        except TraceFormatError as exc:
            seen.failed(source, exc.reason)
            traces.close()
            return
        yield held.pop()  # the consumer holds the only reference


def default_run_name(paths: Sequence[Path], files: list[Path]) -> str:
    """A folder named alone gives its name; else one file its name, several their folder's."""
    if len(paths) == 1 and paths[0].is_dir():
        return paths[0].resolve().name or "run"
    first = files[0]
    base = first.parent.name if len(files) > 1 else _stem(first.name)
    return base or "run"


def _stem(name: str) -> str:
    """A trace file's name without its trace suffixes (`.pt.trace.json.gz`, `.json`, ...):
    dots elsewhere stay (`xdit_sd_3.5_rank0.json` is run `xdit_sd_3.5_rank0`)."""
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name.removesuffix(suffix)
    return name


def _run_names(store: GraphStore) -> list[str]:
    return store.run("MATCH (r:Run) RETURN r.name AS name").table["name"].to_pylist()


def _claim_run(store: GraphStore, run: str, db: Path) -> int:
    # errors name the database, not the staging copy `store` is open on
    existing = store.run("MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx").table
    if run in existing["name"].to_pylist():
        raise IngestError(
            f"{db}: run '{run}' already exists; choose another --run, or --replace it"
        )
    used = existing["idx"].to_pylist()
    run_idx = max(used) + 1 if used else 0
    if run_idx > schema.MAX_RUNS:
        raise IngestError(f"{db}: too many runs in one database ({run_idx})")
    return run_idx


def _load(
    batch: LoadBatch,
    ranks: Iterable[PreparedRank],
    run: str,
    run_idx: int,
    files: list[Path],
    ingested_at: str,
    writer: archive.ArchiveWriter,
    summarise: Summariser | None = None,
) -> IngestResult:
    """Load the ranks, then the run's collectives, ranks, steps and Run row (with the content
    hashes of its archive, which `writer` gives once every file is written, summary ranks'
    figures included: `summarise.table` makes their tables)."""
    edge_counts: dict[str, int] = {}
    summaries: list[RankSummary] = []
    gathered = _Gathered()  # each rank's participants, steps and summary tables
    facts = _GatheredRows(summarise, gathered)
    rank_rows: list[dict[str, object]] = []
    store = batch.store
    world_size = 0
    for prepared in ranks:
        world_size = max(world_size, prepared.world_size)
        batch.add(prepared.node_tables, prepared.edge_tables)
        batch.adopt(prepared.load_files)
        if batch.full:
            batch.flush()
        for label, rows in prepared.edge_rows().items():
            edge_counts[label] = edge_counts.get(label, 0) + rows
        gathered.add(PARTICIPANTS, prepared.participants)
        gathered.add(STEPS, prepared.steps)
        facts.add(prepared.facts)
        summaries.append(prepared.summary)
        rank_rows.append(prepared.rank_row)
        del prepared  # the batch holds what it needs; free the rest as we go
    batch.flush(last=True)
    participants = gathered.pop(PARTICIPANTS)
    coll_nodes, part_of = collectives.match(participants, run, run_idx)
    store.copy("Collective", schema.conform(coll_nodes, schema.COLLECTIVE))
    loaded = _loaded_endpoints(part_of, rank_rows)
    to_collective = pa.array(["Collective"] * loaded.num_rows, pa.string())
    edge_counts["PART_OF"] = store.copy_edges(
        "PART_OF", loaded.append_column("to_label", to_collective)
    )
    arrivals = collectives.arrivals(participants, part_of, run)
    store.copy("CollectiveArrival", schema.conform(arrivals, schema.COLLECTIVE_ARRIVAL))
    steps = gathered.pop(STEPS)
    for name in facts.flush():
        writer.add_table(name, gathered.pop(name))
    store.copy("Rank", schema.conform(pa.Table.from_pylist(rank_rows), schema.RANK))
    store.copy("Step", schema.conform(steps, schema.STEP))
    world_size = world_size or len(summaries)
    run_row = {
        "name": run,
        "run_idx": run_idx,
        "sources": json.dumps([str(f) for f in files]),
        "ingested_at": ingested_at,
        "tool_version": f"tracegraph {TOOL_VERSION}; kuzu {KUZU_VERSION}",
        "world_size": world_size,
        "edge_counts": json.dumps(edge_counts, sort_keys=True),
        "archive_hashes": json.dumps(writer.seal()),
    }
    store.copy("Run", schema.conform(pa.Table.from_pylist([run_row]), schema.RUN))
    return IngestResult(run, summaries, coll_nodes.num_rows, edge_counts)


PARTICIPANTS, STEPS = ".participants", ".steps"  # not names of a summary's tables


class _Gathered:
    """Small tables of every rank, by name, the latest COMPACT_EVERY of a name compacted into one
    table: a table read from a worker carries its own schema and buffers (~7 kB each, more than
    its rows at a few rows), which at 1,024 ranks of 15 tables held ~110 MiB. (Each batch is
    compacted once: compacting all so far each time copied them again and again.)"""

    COMPACT_EVERY = 64

    def __init__(self) -> None:
        self.compacted: dict[str, list[pa.Table]] = {}
        self.latest: dict[str, list[pa.Table]] = {}

    def add(self, name: str, table: pa.Table) -> None:
        latest = self.latest.setdefault(name, [])
        latest.append(table)
        if len(latest) == self.COMPACT_EVERY:
            self.compacted.setdefault(name, []).append(pa.concat_tables(latest).combine_chunks())
            latest.clear()

    def names(self) -> list[str]:
        return list(self.latest)

    def pop(self, name: str) -> pa.Table:
        held = [*self.compacted.pop(name, []), *self.latest.pop(name)]
        return pa.concat_tables(held).combine_chunks()


class _GatheredRows:
    """Summary ranks' facts (`Summariser.facts`), by name: each COMPACT_EVERY ranks' rows made
    one table (`Summariser.table`) and handed to `into`, so that the rows of every rank never
    exist at once."""

    def __init__(self, summarise: Summariser | None, into: _Gathered) -> None:
        self.summarise, self.into = summarise, into
        self.rows: dict[str, list[dict]] = {}
        self.ranks = 0  # whose rows are in `rows`

    def add(self, facts: dict[str, list[dict]]) -> None:
        if not facts:
            return
        for name, rows in facts.items():
            self.rows.setdefault(name, []).extend(rows)
        self.ranks += 1
        if self.ranks == _Gathered.COMPACT_EVERY:
            self.flush()

    def flush(self) -> list[str]:
        """Hand the rows held over as tables; the names of the facts."""
        if self.ranks:
            assert self.summarise is not None
            for name, rows in self.rows.items():
                self.into.add(name, self.summarise.table(name, rows))
            self.rows, self.ranks = {name: [] for name in self.rows}, 0
        return list(self.rows)


def _loaded_endpoints(part_of: pa.Table, rank_rows: list[dict[str, object]]) -> pa.Table:
    """The PART_OF edges whose event is loaded (not of a summary rank)."""
    summary = [r["rank"] for r in rank_rows if r.get("tier") == "summary"]
    if not summary:
        return part_of
    rank = schema.key_rank(part_of["from_id"].to_numpy())
    return part_of.filter(pa.array(~np.isin(rank, np.array(summary, np.int64))))
