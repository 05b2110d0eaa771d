"""Summary ranks made full (`ingest --full-ranks`): the events of some ranks of a summary run
(`ingest --summary`) loaded after all, from their trace files, without reading the others.

In one open write: each chosen rank's file is parsed again (a file of one rank with that rank,
as the first ingest read it), the rank prepared as a full ingest prepares it (`prepare_rank`:
node and edge tables, archive rows), its events loaded, their PART_OF edges made from the rank's
CollectiveArrival rows (the same Collective nodes: no matching again), its archive rows written
into the run's archive, and its Rank row, the run's edge counts and archive hashes updated.
What the first ingest kept of the rank (Step and CollectiveArrival rows, its summary tables)
stays: the summary and the events agree (`tests/queries/test_summary_tier.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from . import schema
from .archive import rank_file, run_archive, write_rank
from .batch import LoadBatch
from .errors import IngestError, TraceFormatError
from .parse import RankTrace
from .parse_options import ParseOptions
from .prepare import prepare_rank
from .read import rank_traces
from .runs import resolve_run
from .store import GraphStore, write_transaction

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FullRanks:
    run: str
    ranks: tuple[int, ...]  # the ranks loaded now
    events: int  # their event nodes
    edges: dict[str, int]  # their structural edges, by label


def summary_rank_files(store: GraphStore, run: str) -> dict[int, str]:
    """The run's summary ranks and the trace file each was read from."""
    table = store.run(
        "MATCH (k:Rank) WHERE k.run = $run AND k.tier = 'summary' RETURN k.rank AS rank, "
        "k.file AS file ORDER BY rank",
        {"run": run},
    ).table
    return dict(zip(table["rank"].to_pylist(), table["file"].to_pylist(), strict=True))


def load_full_ranks(
    db: Path,
    store: GraphStore,
    run: str,
    ranks: Sequence[int],
    progress: Progress | None = None,
) -> FullRanks:
    """Load the events of summary ranks `ranks` of `run` in the open write `store` (see the
    module docstring); an error names what cannot be loaded, and the caller's write then
    leaves the database as it was (the archive files written here are removed)."""
    report = progress or (lambda stage, done, total: None)
    run_idx, hashes, edge_counts = _run_row(store, run)
    summary = summary_rank_files(store, run)
    wanted = sorted(set(int(r) for r in ranks))
    not_summary = [r for r in wanted if r not in summary]
    if not_summary:
        raise IngestError(
            f"{db}: run '{run}' has no summary rank(s) {not_summary} (its summary ranks: "
            f"{_listed(sorted(summary))}); a rank ingested in full is loaded already"
        )
    kept = run_archive(db, store, run_idx)
    if kept is None:
        raise IngestError(f"{db}: run '{run}' has lost its archive; re-ingest it")
    by_file: dict[str, list[int]] = {}
    for rank in wanted:
        by_file.setdefault(summary[rank], []).append(rank)
    written: list[Path] = []
    batch = LoadBatch(store)
    events = 0
    edges: dict[str, int] = {}
    try:
        for i, (file, of_file) in enumerate(by_file.items()):
            report("full ranks", i, len(by_file))
            # a file of one rank is read as the first ingest read it: with that rank
            options = ParseOptions() if _merged(store, run, file) else ParseOptions(rank=of_file[0])
            found: set[int] = set()
            for trace in _traces(Path(file), options):
                if trace.rank not in of_file:
                    continue
                found.add(trace.rank)
                prepared = prepare_rank(trace, run, run_idx)
                del trace
                hashes[rank_file(prepared.rank)] = write_rank(
                    kept.folder, prepared.rank, prepared.archive_rows
                )
                written.append(kept.folder / rank_file(prepared.rank))
                batch.add(prepared.node_tables, prepared.edge_tables)
                events += sum(prepared.node_tables[label].num_rows for label in schema.EVENT_LABELS)
                for label, n in prepared.edge_rows().items():
                    edges[label] = edges.get(label, 0) + n
                batch.flush(last=True)  # its events in place for its PART_OF; no pause
                edges["PART_OF"] = edges.get("PART_OF", 0) + _part_of(
                    store, run, prepared.participants
                )
                del prepared
            missing = sorted(set(of_file) - found)
            if missing:
                raise TraceFormatError(
                    Path(file), f"holds no rank {_listed(missing)} now: the file changed since "
                    "the run was ingested"
                )  # fmt: skip
        batch.flush(last=True)
        report("full ranks", len(by_file), len(by_file))
        for label, n in edges.items():
            edge_counts[label] = edge_counts.get(label, 0) + n
        store.run(
            "MATCH (k:Rank) WHERE k.run = $run AND k.rank IN $ranks SET k.tier = 'full' "
            "RETURN count(*) AS n",
            {"run": run, "ranks": wanted},
        )
        store.run(
            "MATCH (r:Run) WHERE r.name = $run SET r.archive_hashes = $hashes, "
            "r.edge_counts = $counts RETURN count(*) AS n",
            {
                "run": run,
                "hashes": json.dumps(dict(sorted(hashes.items()))),
                "counts": json.dumps(edge_counts, sort_keys=True),
            },
        )
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    finally:
        batch.close()
    return FullRanks(run, tuple(wanted), events, edges)


def _traces(path: Path, options: ParseOptions) -> Iterator[RankTrace]:
    if not path.is_file():
        raise TraceFormatError(
            path, "no such file: a summary rank's events are read from its trace file, which "
            "must be where the run was ingested from"
        )  # fmt: skip
    traces = rank_traces(path, options)
    try:
        yield from traces
    finally:
        traces.close()


def _merged(store: GraphStore, run: str, file: str) -> bool:
    """Whether `file` held several ranks of the run (then its ranks are told by its events)."""
    table = store.run(
        "MATCH (k:Rank) WHERE k.run = $run AND k.file = $file RETURN count(*) AS n",
        {"run": run, "file": file},
    ).table
    return int(table["n"][0].as_py()) > 1


def _part_of(store: GraphStore, run: str, participants: pa.Table) -> int:
    """The rank's PART_OF edges, to the Collective each arrival was matched to at ingest."""
    if participants.num_rows == 0:
        return 0
    matched = store.run(
        "MATCH (a:CollectiveArrival) WHERE a.run = $run AND a.id IN $ids "
        "RETURN a.id AS from_id, a.collective AS to_id",
        {"run": run, "ids": participants["id"].to_pylist()},
    ).table
    labels = participants.select(["id", "label"]).rename_columns(["from_id", "from_label"])
    edges = matched.join(labels, "from_id", join_type="inner")
    to_label = pa.array(["Collective"] * edges.num_rows, pa.string())
    return store.copy_edges("PART_OF", edges.append_column("to_label", to_label))


def _run_row(store: GraphStore, run: str) -> tuple[int, dict[str, str], dict[str, int]]:
    table = store.run(
        "MATCH (r:Run) WHERE r.name = $run RETURN r.run_idx AS idx, "
        "r.archive_hashes AS hashes, r.edge_counts AS counts",
        {"run": run},
    ).table
    if table.num_rows == 0:
        raise IngestError(f"no run '{run}'")
    row = table.to_pylist()[0]
    return int(row["idx"]), json.loads(row["hashes"] or "{}"), json.loads(row["counts"] or "{}")


def _listed(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks) or "none"


def make_full(
    db: Path,
    run: str | None,
    choose: Callable[[GraphStore, str, list[int]], Sequence[int]],
    progress: Progress | None = None,
) -> FullRanks:
    """In a write of its own: load the summary ranks of `run` (the database's only run when
    None) that `choose(store, run, summary_ranks)` picks; all or nothing."""
    if not Path(db).exists():
        raise IngestError(f"{db}: no such database")
    with write_transaction(db) as store:
        name, _ = resolve_run(store, run)
        summary = sorted(summary_rank_files(store, name))
        if not summary:
            raise IngestError(f"{db}: run '{name}' has no summary ranks (ingest --summary)")
        return load_full_ranks(db, store, name, choose(store, name, summary), progress)
