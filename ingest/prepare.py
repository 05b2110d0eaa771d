"""One rank's share of an ingest, computed on its own (in this process or a worker): its node
and edge tables, collective participants, steps, counts, Rank row and archive rows.

Pure: a parsed rank in, Arrow tables out; nothing here touches the database, so ranks can be
prepared in parallel and loaded in one transaction afterwards (`pipeline`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from . import collectives, link, nodes, schema, syncs
from .edgesets.native.frame import frame_source
from .memory import release_freed
from .parse import FlowRowsNeeded, RankTrace
from .steps import step_rows

if TYPE_CHECKING:
    from .batch import LoadFile


class Summariser(Protocol):
    """A summary tier's figures (`ingest --summary`), computed by the read side (which ingest
    does not import: the caller hands in an object a worker can be sent). `facts`: of one rank,
    from the rank, its archive rows (`frame.FrameSource`), its keyed events, its Step rows and
    the run's index, named lists of rows (kilobytes; each row carries the rank), which the run
    keeps in its archive in place of the rank's events; `table`: the rows of one name, of many
    ranks, as the archive's table."""

    def facts(
        self, rank: int, rows: pa.Table, events: pa.Table, steps: pa.Table, run_idx: int
    ) -> dict[str, list[dict]]: ...

    def table(self, name: str, rows: list[dict]) -> pa.Table: ...


@dataclass(frozen=True)
class RankSummary:
    rank: int
    file: str
    counts: dict[str, int]
    # events left out at parse time, by reason (columns.NO_TS, columns.BAD_DUR)
    dropped: dict[str, int] = field(default_factory=dict)
    tier: str = "full"  # "summary": `counts` are of its trace; none of them loaded


@dataclass(frozen=True)
class PreparedRank:
    """What the load needs of one rank (see the module docstring)."""

    rank: int
    file: str
    world_size: int
    node_tables: dict[str, pa.Table]
    edge_tables: dict[str, pa.Table]
    participants: pa.Table
    steps: pa.Table
    summary: RankSummary
    rank_row: dict[str, object]
    archive_rows: pa.Table  # the native builder's source rows (`frame.FrameSource`)
    archived: bool = False  # archive_rows are already in the run's archive (a worker wrote them)
    archive_hash: str = ""  # the content hash of the archived rows' file, where `archived`
    # the node and edge tables as files a worker wrote for the load (then the tables are empty)
    load_files: tuple[LoadFile, ...] = ()
    # a summary rank's figures (`Summariser.facts`); then its node, edge and archive tables
    # are empty
    facts: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def tier(self) -> str:
        return "summary" if self.facts else "full"

    def edge_rows(self) -> dict[str, int]:
        """Edges by label, whether in tables or in load files."""
        out = {label: t.num_rows for label, t in self.edge_tables.items()}
        for f in self.load_files:
            if f.pair is not None:
                out[f.label] = out.get(f.label, 0) + f.rows
        return out


def prepare_rank(
    trace: RankTrace,
    run: str,
    run_idx: int,
    keep_archive: Callable[[int, pa.Table], str] | None = None,
    summarise: Summariser | None = None,
) -> PreparedRank:
    """The rank's tables; `trace` is not used afterwards (its events are handed over).

    `keep_archive(rank, rows)`, where given, writes the archive rows at once and gives their
    file's content hash (they are then not in the result, which says `archived`): they are not
    held while the events are sorted. With `summarise`, the rank is summarised instead
    (`summary_rank`).
    """
    if summarise is not None:
        return summary_rank(trace, run, run_idx, summarise)
    if not trace.flow_rows:  # its launches may need them
        raise FlowRowsNeeded(trace.file)
    archive_rows = frame_source(trace).rows
    archive_hash = ""
    if keep_archive is not None:
        archive_hash = keep_archive(trace.rank, archive_rows)
        archive_rows = archive_rows.schema.empty_table()
        release_freed()  # the rows written
    # hand the event table over so that with_keys holds the only reference to it
    handover = [trace.events]
    # an empty table, not a zero-row slice: a slice keeps its parent's buffers alive
    trace = replace(trace, events=trace.events.schema.empty_table())
    events = nodes.with_keys(handover.pop(), trace.rank, run, run_idx)
    release_freed()  # the events as read, moved into key order
    node_tables = nodes.node_tables(events)
    edge_tables = _rank_edges(events)
    counts = {label: t.num_rows for label, t in node_tables.items()}
    counts["cuda_sync"] = pc.sum(pc.equal(events["label"], "sync")).as_py() or 0
    return PreparedRank(
        trace.rank,
        trace.file,
        trace.world_size or 0,
        node_tables,
        edge_tables,
        collectives.participants(events, edge_tables["LAUNCHES"]),
        step_rows(events, trace.rank, run, run_idx),
        RankSummary(trace.rank, trace.file, counts, dict(trace.dropped)),
        _rank_row(trace, run, run_idx, events, counts),
        archive_rows,
        archived=keep_archive is not None,
        archive_hash=archive_hash,
    )


def summary_rank(trace: RankTrace, run: str, run_idx: int, summarise: Summariser) -> PreparedRank:
    """The rank in a summary tier: its Rank and Step rows, collective participants and
    `summarise`'s figures; no node, edge or archive tables (its events are not loaded)."""
    rows = frame_source(trace, hta=False).rows
    events = nodes.keyed(trace.events, trace.rank, run, run_idx)
    trace = replace(trace, events=trace.events.schema.empty_table())
    steps = step_rows(events, trace.rank, run, run_idx)
    by_label = pc.value_counts(events["label"]).to_pylist()
    found = {c["values"]: c["counts"] for c in by_label}
    counts = {label: found.get(label, 0) for label in schema.EVENT_LABELS}
    counts["cuda_sync"] = found.get("sync", 0)
    is_kernel = collectives.collective_kernels(events)
    launches = _collective_launches(events, is_kernel, trace.flow_rows)
    if launches is None:
        raise FlowRowsNeeded(trace.file)
    # in the full ingest's order (its events sorted by label, ts, ev_idx): the Collective
    # nodes are numbered in the order their participants come
    participants = collectives.participants(events, launches, is_kernel).sort_by(
        [("label", "ascending"), ("ts", "ascending"), ("id", "ascending")]
    )
    facts = summarise.facts(trace.rank, rows, events, steps, run_idx)
    rank_row = _rank_row(trace, run, run_idx, events, counts) | {"tier": "summary"}
    return PreparedRank(
        trace.rank,
        trace.file,
        trace.world_size or 0,
        {},
        {},
        participants,
        steps,
        RankSummary(trace.rank, trace.file, counts, dict(trace.dropped), "summary"),
        rank_row,
        rows.schema.empty_table(),
        archived=True,  # nothing to archive: its figures are in `facts`
        facts=facts,
    )


def _collective_launches(
    events: pa.Table, is_kernel: pa.ChunkedArray, flow_rows: bool
) -> pa.Table | None:
    """The LAUNCHES edges of the rank's collective kernels (`is_kernel`: all a summary needs of
    them): from the calls of their correlations, or where one has no such call, from every
    call and launch flow; None where that is so but `events` hold no flow rows (`flow_rows`)."""
    needed = ["id", "label", "cat", "ph", "pid", "tid", "ts", "correlation", "flow_id"]
    narrow = events.select(needed)  # selected first: a filter copies
    kernels = narrow.filter(is_kernel)
    label = narrow["label"]
    owners = pc.and_(
        pc.equal(label, "Runtime"),
        pc.is_in(narrow["correlation"], value_set=kernels["correlation"].drop_null()),
    )
    launches, found = link.launches_by_correlation(narrow.filter(owners), kernels)
    if found.all():  # a launch each: by correlation, as in full
        return launches
    if not flow_rows:
        return None
    keep = pc.or_(pc.is_in(label, pa.array(["Runtime", "flow"])), is_kernel)
    return link.launch_edges(narrow.filter(keep))


def _rank_edges(events: pa.Table) -> dict[str, pa.Table]:
    """The structural edges of one rank, each with from_label/to_label columns."""
    builders: dict[str, Callable[[pa.Table], pa.Table]] = {
        "CALLS": link.call_edges,
        "LAUNCHES": lambda e: _labelled(link.launch_edges(e), "Runtime", "Kernel"),
        "NEXT_ON_STREAM": lambda e: _labelled(link.stream_edges(e), "Kernel", "Kernel"),
        "SYNCS": syncs.sync_edges,
    }
    edges: dict[str, pa.Table] = {}
    for label, build in builders.items():
        edges[label] = build(events)
        release_freed()  # the work arrays of the step (numpy's come from the C heap)
    return edges


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
    by_cat = pc.value_counts(skipped["cat"]).to_pylist() if skipped.num_rows else []
    counts_skipped = {str(r["values"]): r["counts"] for r in by_cat}
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
        "host": trace.host,
        "tier": "full",
        "gpu": trace.gpu,
    }
