"""Trace files → one run in the database: parse, key, link, match collectives, load atomically."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from . import archive, collectives, link, nodes, schema, syncs
from .edgesets.native.frame import frame_source
from .errors import IngestError, TraceFormatError
from .parse import DROP_REASONS, ParseOptions, RankTrace, json_blocks, read_trace_bytes
from .read import rank_traces, sweep_spills
from .scan import ScanError, TopLevel, scan_events
from .steps import step_rows
from .store import KUZU_VERSION, GraphStore, write_transaction

TOOL_VERSION = "0.1.0"
TRACE_SUFFIXES = (".json", ".json.gz")

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class IngestOptions:
    run: str | None = None
    parse: ParseOptions = field(default_factory=ParseOptions)
    recursive: bool = False  # a folder's subfolders too (else only the files directly in it)


@dataclass(frozen=True)
class RankSummary:
    rank: int
    file: str
    counts: dict[str, int]
    # events left out at parse time, by reason (parse.NO_TS, parse.BAD_DUR)
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IngestResult:
    run: str
    ranks: list[RankSummary]
    collectives: int
    edges: dict[str, int]
    # (what, why): files found in a folder that are JSON but no trace (name within the folder),
    # and events a rank's file held that were left out ("3 event(s) of rank 0 in FILE")
    skipped: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Source:
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


def _sources(paths: Iterable[Path], recursive: bool) -> list[_Source]:
    found: list[_Source] = []
    for path in paths:
        if path.is_dir():
            folder = path.resolve()
            inside = sorted(_trace_names(folder, recursive))
            if not inside:
                deeper = "" if recursive else _subfolder_hint(folder)
                raise TraceFormatError(
                    path, f"folder holds no trace files (*.json, *.json.gz){deeper}"
                )
            found.extend(_Source(p, folder) for p in inside)
        elif path.exists():
            found.append(_Source(path.resolve()))
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


WHOLE_CHECK_BYTES = 8 << 20  # a failed file up to this size is read whole to say what it is


def _not_a_trace(path: Path) -> str | None:
    """Why a file that failed to parse is JSON but no trace (None: it is a broken trace, or
    no JSON at all). Only files that failed are read again, so this costs nothing otherwise;
    a large one is scanned block by block, never held."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
    except OSError:
        return None
    if size > (WHOLE_CHECK_BYTES // 64 if gzipped else WHOLE_CHECK_BYTES):
        top = TopLevel()
        blocks = json_blocks(path, ParseOptions(), whole_up_to=0)
        try:
            for _ in scan_events(blocks, frozenset({"traceEvents"}), top):
                pass
        except (ScanError, TraceFormatError):
            return None
        if top.has_events or "traceEvents" in top.values:  # a trace, or a broken one
            return None
        return "not a trace (no traceEvents)"
    try:
        document = json.loads(read_trace_bytes(path))
    except (TraceFormatError, ValueError, RecursionError):
        return None
    if isinstance(document, dict) and "traceEvents" not in document:
        return "not a trace (no traceEvents)"
    if not isinstance(document, dict | list):
        return "not a trace (JSON, but no object or event list)"
    return None


def ingest(
    paths: Sequence[Path],
    db: Path,
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest trace files (per rank or merged) as one run; all or nothing.

    A folder gives the trace files in it (in its subfolders too with `options.recursive`); one
    of those that is JSON but no trace (e.g. a run's metadata) is skipped and listed in the
    result's `skipped`. A file named itself must be a trace, and each folder must give one.
    """
    paths = list(paths)
    found = _sources(paths, options.recursive)
    report = progress or (lambda stage, done, total: None)
    run = options.run or _default_run_name(paths, [s.path for s in found])
    files: list[Path] = []  # the files ingested, filled as they are parsed
    skipped: list[tuple[str, str]] = []
    spill_at = db.with_name(f".{db.name}.spill")
    parse_options = replace(options.parse, spill_at=options.parse.spill_at or spill_at)
    ingested_at = datetime.now(UTC).isoformat(timespec="microseconds")
    writer: archive.ArchiveWriter | None = None
    store: GraphStore | None = None
    traces: Generator[RankTrace, None, None] | None = None
    try:
        with write_transaction(db) as store:
            # what a killed or failed ingest left (the transaction holds the lock)
            sweep_spills(spill_at)
            archive.sweep(db, store)
            run_idx = _claim_run(store, run, db)
            # The edge-set builders' inputs, archived with the run: no later command reads the
            # traces again.
            writer = archive.ArchiveWriter(db, run_idx)
            traces = _rank_traces(found, parse_options, report, files, skipped, writer.add_source)
            result = _load(store, _archived(traces, writer), run, run_idx, files, ingested_at)
            writer.finish(ingested_at)  # in place before the database that names it
    except BaseException:
        if traces is not None:
            traces.close()  # now, not when the traceback goes: removes a spill folder at once
        if writer is not None and not (store is not None and store.swapped):
            writer.abandon(ingested_at)
        raise
    return replace(result, skipped=(*skipped, *_dropped_events(result.ranks)))


def _dropped_events(ranks: Iterable[RankSummary]) -> Iterator[tuple[str, str]]:
    """A notice per rank and reason for the events left out at parse time."""
    for summary in ranks:
        for reason, n in sorted(summary.dropped.items()):
            yield (
                f"{n:,} event(s) of rank {summary.rank} in {summary.file}",
                f'{DROP_REASONS.get(reason, reason)} (counted in Rank.skipped as "{reason}")',
            )


def _archived(traces: Iterable[RankTrace], writer: archive.ArchiveWriter) -> Iterator[RankTrace]:
    for trace in traces:
        writer.add(trace.rank, frame_source(trace).rows)
        yield trace
        del trace  # the consumer frees each rank as it goes: hold none here


def _rank_traces(
    found: list[_Source],
    options: ParseOptions,
    report: Progress,
    files: list[Path],
    skipped: list[tuple[str, str]],
    keep_source: Callable[[Path], None],
) -> Generator[RankTrace, None, None]:
    """The ranks of each file in turn; only one file's events are held at a time. Files
    parsed are appended to `files` and handed to `keep_source`; a folder's files that are no
    trace to `skipped`."""
    owner: dict[int, str] = {}
    from_folder: dict[Path, int] = {}
    passed_over: dict[Path, list[str]] = {}
    for i, source in enumerate(found):
        path = source.path
        report("ingest", i, len(found))
        traces = rank_traces(path, options)
        try:  # closed when left, even by an error: a file read in blocks removes its spill
            try:
                first = next(traces)
            except TraceFormatError:
                why = _not_a_trace(path) if source.folder is not None else None
                if why is None or source.folder is None:
                    raise
                skipped.append((source.name, why))
                passed_over.setdefault(source.folder, []).append(source.name)
                continue
            files.append(path)
            keep_source(path)
            if source.folder is not None:
                from_folder[source.folder] = from_folder.get(source.folder, 0) + 1
            held = [first]
            del first
            for trace in itertools.chain(_handed_on(held), traces):
                rank = trace.rank
                if rank in owner:
                    raise TraceFormatError(
                        path,
                        f"rank {rank} is also in {owner[rank]}: a run holds one "
                        "trace per rank (use --rank N, or ingest it as another --run)",
                    )
                owner[rank] = str(path)
                yield trace
                del trace  # keep no reference here: the consumer frees it as it goes
        finally:
            traces.close()
    for folder in dict.fromkeys(s.folder for s in found if s.folder is not None):
        if not from_folder.get(folder):
            names = passed_over.get(folder, [])
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise TraceFormatError(folder, f"folder holds no traces ({shown}: not a trace)")
    report("ingest", len(found), len(found))


def _handed_on(held: list[RankTrace]) -> Iterator[RankTrace]:
    while held:
        yield held.pop()


def _default_run_name(paths: Sequence[Path], files: list[Path]) -> str:
    """A folder named alone gives its name; else one file its name, several their folder's."""
    if len(paths) == 1 and paths[0].is_dir():
        return paths[0].resolve().name or "run"
    first = files[0]
    base = first.parent.name if len(files) > 1 else first.name.split(".")[0]
    return base or "run"


def _claim_run(store: GraphStore, run: str, db: Path) -> int:
    # errors name the database, not the staging copy `store` is open on
    existing = store.run("MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx").table
    if run in existing["name"].to_pylist():
        raise IngestError(f"{db}: run '{run}' already exists; choose another --run")
    used = existing["idx"].to_pylist()
    run_idx = max(used) + 1 if used else 0
    if run_idx > schema.MAX_RUNS:
        raise IngestError(f"{db}: too many runs in one database ({run_idx})")
    return run_idx


# Ranks are loaded in batches of up to this many rows or bytes: few large COPYs are much
# faster than many small ones, and the batch bounds memory on runs of many ranks.
BATCH_ROWS = 4_000_000
BATCH_BYTES = 256 << 20


class _Batch:
    """Node and edge tables of several ranks, loaded together (nodes before their edges)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.nodes: dict[str, list[pa.Table]] = {label: [] for label in schema.EVENT_LABELS}
        self.edges: dict[str, list[pa.Table]] = {}
        self.rows = self.bytes = 0

    def add(self, node_tables: dict[str, pa.Table], edge_tables: dict[str, pa.Table]) -> None:
        for label, table in node_tables.items():
            self.nodes[label].append(table)
            self.rows += table.num_rows
            self.bytes += table.get_total_buffer_size()
        for label, table in edge_tables.items():
            self.edges.setdefault(label, []).append(table)
            self.rows += table.num_rows
            self.bytes += table.get_total_buffer_size()

    def flush(self, last: bool = False) -> None:
        """Load the batch; unless it is the `last`, commit and start afresh (see
        `GraphStore.commit_and_continue`)."""
        if not self.rows:
            return
        for label, tables in self.nodes.items():
            if any(t.num_rows for t in tables):
                self.store.copy(label, _concat(tables))
            tables.clear()
        for label, tables in self.edges.items():
            if any(t.num_rows for t in tables):
                self.store.copy_edges(label, _concat(tables))
            tables.clear()
        self.rows = self.bytes = 0
        if not last:
            self.store.commit_and_continue()


def _concat(tables: list[pa.Table]) -> pa.Table:
    """The non-empty tables as one: a rank without rows of a kind (a CPU-only rank's runtime
    calls) gives an empty table, whose columns may be null-typed and which, as the first chunk
    of a COPY, made Kuzu load none of the rows after it."""
    return pa.concat_tables([t for t in tables if t.num_rows], promote_options="default")


def _load(
    store: GraphStore,
    traces: Iterable[RankTrace],
    run: str,
    run_idx: int,
    files: list[Path],
    ingested_at: str,
) -> IngestResult:
    edge_counts: dict[str, int] = {}
    summaries: list[RankSummary] = []
    parts: list[pa.Table] = []
    steps: list[pa.Table] = []
    rank_rows: list[dict[str, object]] = []
    batch = _Batch(store)
    world_size = 0
    for trace in traces:
        world_size = max(world_size, trace.world_size or 0)
        # hand the event table over so that with_keys holds the only reference to it
        handover = [trace.events]
        trace = replace(trace, events=trace.events.slice(0, 0))
        events = nodes.with_keys(handover.pop(), trace.rank, run, run_idx)
        node_tables = nodes.node_tables(events)
        edge_tables = _rank_edges(events)
        batch.add(node_tables, edge_tables)
        if batch.rows >= BATCH_ROWS or batch.bytes >= BATCH_BYTES:
            batch.flush()
        for label, edges in edge_tables.items():
            edge_counts[label] = edge_counts.get(label, 0) + edges.num_rows
        parts.append(collectives.participants(events))
        steps.append(step_rows(events, trace.rank, run, run_idx))
        counts = {label: t.num_rows for label, t in node_tables.items()}
        counts["cuda_sync"] = pc.sum(pc.equal(events["label"], "sync")).as_py() or 0
        summaries.append(RankSummary(trace.rank, trace.file, counts, dict(trace.dropped)))
        rank_rows.append(_rank_row(trace, run, run_idx, events, counts))
    batch.flush(last=True)
    coll_nodes, part_of = collectives.match(pa.concat_tables(parts), run, run_idx)
    store.copy("Collective", schema.conform(coll_nodes, schema.COLLECTIVE))
    to_collective = pa.array(["Collective"] * part_of.num_rows, pa.string())
    edge_counts["PART_OF"] = store.copy_edges(
        "PART_OF", part_of.append_column("to_label", to_collective)
    )
    store.copy("Rank", schema.conform(pa.Table.from_pylist(rank_rows), schema.RANK))
    store.copy("Step", schema.conform(pa.concat_tables(steps), schema.STEP))
    world_size = world_size or len(summaries)
    run_row = {
        "name": run,
        "run_idx": run_idx,
        "sources": json.dumps([str(f) for f in files]),
        "ingested_at": ingested_at,
        "tool_version": f"tracegraph {TOOL_VERSION}; kuzu {KUZU_VERSION}",
        "world_size": world_size,
        "edge_counts": json.dumps(edge_counts, sort_keys=True),
    }
    store.copy("Run", schema.conform(pa.Table.from_pylist([run_row]), schema.RUN))
    return IngestResult(run, summaries, coll_nodes.num_rows, edge_counts)


def _rank_edges(events: pa.Table) -> dict[str, pa.Table]:
    """The structural edges of one rank, each with from_label/to_label columns."""
    return {
        "CALLS": link.call_edges(events),
        "LAUNCHES": _labelled(link.launch_edges(events), "Runtime", "Kernel"),
        "NEXT_ON_STREAM": _labelled(link.stream_edges(events), "Kernel", "Kernel"),
        "SYNCS": syncs.sync_edges(events),
    }


def _labelled(edges: pa.Table, src: str, dst: str) -> pa.Table:
    n = edges.num_rows
    return edges.append_column("from_label", pa.array([src] * n, pa.string())).append_column(
        "to_label", pa.array([dst] * n, pa.string())
    )


def _rank_row(
    trace: RankTrace, run: str, run_idx: int, events: pa.Table, counts: dict[str, int]
) -> dict[str, object]:
    narrow = events.select(["cat", "label", "ph"])
    skipped = narrow.filter(pc.and_(pc.is_null(narrow["label"]), pc.equal(narrow["ph"], "X")))
    by_cat = skipped.group_by("cat").aggregate([("cat", "count")]).to_pylist()
    counts_skipped = {str(r["cat"]): r["cat_count"] for r in by_cat}
    for reason, n in trace.dropped.items():  # events left out at parse time
        counts_skipped[reason] = counts_skipped.get(reason, 0) + n
    return {
        "id": schema.event_key(run_idx, trace.rank, 0),
        "run": run,
        "rank": trace.rank,
        "file": trace.file,
        "device": trace.device,
        "schema_version": trace.schema_version,
        "base_time_ns": trace.base_time_ns,
        "event_count": counts["Op"] + counts["Runtime"] + counts["Kernel"],
        "op_count": counts["Op"],
        "runtime_count": counts["Runtime"],
        "kernel_count": counts["Kernel"],
        "cuda_sync_count": counts["cuda_sync"],
        "skipped": json.dumps(counts_skipped, sort_keys=True),
    }
