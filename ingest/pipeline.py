"""Trace files → one run in the database: parse, key, link, match collectives, load atomically."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from . import collectives, link, nodes, schema, syncs
from .edgesets.native_cache import store_sources
from .edgesets.native_frame import FrameSource, frame_source
from .errors import IngestError, TraceFormatError
from .parse import ParseOptions, RankTrace, parse_file
from .steps import step_rows
from .store import KUZU_VERSION, GraphStore, write_transaction

TOOL_VERSION = "0.1.0"
TRACE_SUFFIXES = (".json", ".json.gz")

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class IngestOptions:
    run: str | None = None
    parse: ParseOptions = field(default_factory=ParseOptions)


@dataclass(frozen=True)
class RankSummary:
    rank: int
    file: str
    counts: dict[str, int]


@dataclass(frozen=True)
class IngestResult:
    run: str
    ranks: list[RankSummary]
    collectives: int
    edges: dict[str, int]


def trace_files(paths: Iterable[Path]) -> list[Path]:
    """Files named, and trace files (*.json, *.json.gz) found under folders named, in order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p.resolve() for p in path.rglob("*") if p.is_file() and _is_trace_name(p)
            )
            if not inside:
                raise TraceFormatError(path, "folder holds no trace files (*.json, *.json.gz)")
            found.extend(inside)
        elif path.exists():
            found.append(path.resolve())
        else:
            raise TraceFormatError(path, "no such file or folder")
    return found


def _is_trace_name(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def ingest(
    paths: Sequence[Path],
    db: Path,
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest trace files (per rank or merged) as one run; all or nothing."""
    files = trace_files(paths)
    report = progress or (lambda stage, done, total: None)
    run = options.run or _default_run_name(files)
    sources: dict[str, list[FrameSource]] = {}
    with write_transaction(db) as store:
        run_idx = _claim_run(store, run)
        traces = _rank_traces(files, options.parse, report)
        result = _load(store, _keep_frame_sources(traces, sources), run, run_idx, files)
    # The native builder's inputs, cached beside the database once it is committed, so the
    # first `edges --native` starts from columns instead of decoding the JSON again.
    for file, file_sources in sources.items():
        store_sources(db, Path(file), file_sources)
    return result


def _keep_frame_sources(
    traces: Iterable[RankTrace], sources: dict[str, list[FrameSource]]
) -> Iterator[RankTrace]:
    for trace in traces:
        sources.setdefault(trace.file, []).append(frame_source(trace))
        yield trace


def _rank_traces(files: list[Path], options: ParseOptions, report: Progress) -> Iterator[RankTrace]:
    """The ranks of each file in turn; only one file's events are held at a time."""
    owner: dict[int, str] = {}
    for i, path in enumerate(files):
        report("ingest", i, len(files))
        traces = parse_file(path, options)
        while traces:
            rank = traces[0].rank
            if rank in owner:
                raise TraceFormatError(
                    path,
                    f"rank {rank} is also in {owner[rank]}: a run holds one "
                    "trace per rank (use --rank N, or ingest it as another --run)",
                )
            owner[rank] = str(path)
            yield traces.pop(0)  # keep no reference here: the consumer frees it as it goes
    report("ingest", len(files), len(files))


def _default_run_name(files: list[Path]) -> str:
    first = files[0]
    base = first.parent.name if len(files) > 1 else first.name.split(".")[0]
    return base or "run"


def _claim_run(store: GraphStore, run: str) -> int:
    existing = store.run("MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx").table
    if run in existing["name"].to_pylist():
        raise IngestError(f"{store.path}: run '{run}' already exists; choose another --run")
    used = existing["idx"].to_pylist()
    run_idx = max(used) + 1 if used else 0
    if run_idx > schema.MAX_RUNS:
        raise IngestError(f"{store.path}: too many runs in one database ({run_idx})")
    return run_idx


# Ranks are loaded in batches of about this many rows: few large COPYs are much faster than
# many small ones, and the batch bounds memory on runs of many ranks.
BATCH_ROWS = 4_000_000


class _Batch:
    """Node and edge tables of several ranks, loaded together (nodes before their edges)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.nodes: dict[str, list[pa.Table]] = {label: [] for label in schema.EVENT_LABELS}
        self.edges: dict[str, list[pa.Table]] = {}
        self.rows = 0

    def add(self, node_tables: dict[str, pa.Table], edge_tables: dict[str, pa.Table]) -> None:
        for label, table in node_tables.items():
            self.nodes[label].append(table)
            self.rows += table.num_rows
        for label, table in edge_tables.items():
            self.edges.setdefault(label, []).append(table)
            self.rows += table.num_rows

    def flush(self) -> None:
        for label, tables in self.nodes.items():
            if tables:
                self.store.copy(label, pa.concat_tables(tables))
            tables.clear()
        for label, tables in self.edges.items():
            if tables:
                self.store.copy_edges(label, pa.concat_tables(tables))
            tables.clear()
        self.rows = 0


def _load(
    store: GraphStore, traces: Iterable[RankTrace], run: str, run_idx: int, files: list[Path]
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
        if batch.rows >= BATCH_ROWS:
            batch.flush()
        for label, edges in edge_tables.items():
            edge_counts[label] = edge_counts.get(label, 0) + edges.num_rows
        parts.append(collectives.participants(events))
        steps.append(step_rows(events, trace.rank, run, run_idx))
        counts = {label: t.num_rows for label, t in node_tables.items()}
        counts["cuda_sync"] = pc.sum(pc.equal(events["label"], "sync")).as_py() or 0
        summaries.append(RankSummary(trace.rank, trace.file, counts))
        rank_rows.append(_rank_row(trace, run, run_idx, events, counts))
    batch.flush()
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
        "ingested_at": datetime.now(UTC).isoformat(timespec="seconds"),
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
        "skipped": json.dumps({str(r["cat"]): r["cat_count"] for r in by_cat}, sort_keys=True),
    }
