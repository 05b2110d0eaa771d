"""The storage of an edge set, whoever produced it: its `EdgeSet` node and its `DEP` rows."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import archive, schema
from ..runs import resolve_run
from ..store import GraphStore, write_transaction
from . import copies
from .errors import EdgeSetError, EmptyEdgeSetError


@dataclass(frozen=True)
class RankOutcome:
    """What a producer gave for one rank, whichever producer it was; stored per rank on the
    `EdgeSet` node (`to_json`) and read back as the same type (`rank_outcomes`)."""

    rank: int
    status: str  # "ok" | "failed" (no window has a path)
    message: str
    path_length_ns: int | None  # summed over the rank's windows (each is in `windows`)
    windows: tuple[Mapping[str, object], ...]  # annotation, instance, step, status, times, path
    edges_by_type: Mapping[str, int]
    critical_path_by_type: Mapping[str, int]
    skipped_edges: int  # edges with an endpoint that is no event node of the run
    seconds: Mapping[str, float]
    skewed_edges: Mapping[str, int] = field(default_factory=dict)  # left out: back in time
    invariant_breaks: str = ""  # what of the graph breaks tracegraph's invariants ("" none)
    inferred_syncs: int = 0
    details: Mapping[str, object] = field(default_factory=dict)  # what only its producer says

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, object]:
        return {
            **self.details,
            "rank": self.rank,
            "status": self.status,
            "message": self.message,
            "path_length_ns": self.path_length_ns,
            "windows": len(self.windows),
            "edges": dict(self.edges_by_type),
            "critical_path_edges": dict(self.critical_path_by_type),
            "skipped_edges": self.skipped_edges,
            "seconds": dict(self.seconds),
            "skewed_edges": dict(self.skewed_edges),
            "invariant_breaks": self.invariant_breaks,
            "inferred_syncs": self.inferred_syncs,
        }

    @staticmethod
    def from_json(
        rank: int, data: Mapping[str, object], windows: tuple[Mapping[str, object], ...] = ()
    ) -> RankOutcome:
        """From what `to_json` stored (older databases: keys they lack take their defaults)."""
        known = set(RankOutcome(0, "", "", None, (), {}, {}, 0, {}).to_json())

        def get(key: str, default: object) -> object:
            value = data.get(key)
            return default if value is None else value

        length = data.get("path_length_ns")
        return RankOutcome(
            rank,
            str(get("status", "failed")),
            str(get("message", "")),
            int(length) if isinstance(length, int | float) else None,
            windows,
            dict(get("edges", {})),  # type: ignore[call-overload]
            dict(get("critical_path_edges", {})),  # type: ignore[call-overload]
            int(get("skipped_edges", 0)),  # type: ignore[call-overload]
            dict(get("seconds", {})),  # type: ignore[call-overload]
            dict(get("skewed_edges", {})),  # type: ignore[call-overload]
            str(get("invariant_breaks", "")),
            int(get("inferred_syncs", 0)),  # type: ignore[call-overload]
            {k: v for k, v in data.items() if k not in known},
        )


def rank_outcomes(store: GraphStore, name: str, run: str) -> dict[int, RankOutcome]:
    """Each rank's outcome as edge set `name` of `run` stored it ({} when there is no such set)."""
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.name = $name AND e.run = $run "
        "RETURN e.ranks AS ranks, e.window AS window",
        {"name": name, "run": run},
    ).table
    if table.num_rows == 0:
        return {}
    ranks = json.loads(table["ranks"][0].as_py() or "{}")
    windows = json.loads(table["window"][0].as_py() or "{}").get("ranks", {})
    out = {}
    for key, data in ranks.items():
        listed = windows.get(key)
        shown = tuple(listed) if isinstance(listed, list) else ()
        out[int(key)] = RankOutcome.from_json(int(key), data, shown)
    return out


def edge_set_row(
    run: str,
    name: str,
    producer: str,
    version: str,
    options: dict[str, object],
    window: dict[str, object],
    ranks: dict[str, object],
) -> dict[str, object]:
    """The EdgeSet node: JSON text for options, window and per-rank status."""
    return {
        "id": f"{run}/{name}",
        "run": run,
        "name": name,
        "producer": producer,
        "version": version,
        "options": json.dumps(options, sort_keys=True),
        "window": json.dumps(window, sort_keys=True),
        "ranks": json.dumps(ranks, sort_keys=True),
        # to the µs: with the run and name, what names the set's copy (`copies.copy_key`)
        "created_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "copy_hash": None,  # set where the write keeps a copy (`write_edge_sets`)
    }


def refuse_empty(
    db: object, name: str, ranks: list[tuple[int, int, str]], allow_empty: bool
) -> None:
    """Refuse to replace edge set `name` when a rank gave no edges: (rank, edges, message) per
    rank. A failed or empty build must never erase a good set; `allow_empty` writes it anyway."""
    empty = [(rank, message) for rank, edges, message in ranks if edges == 0]
    if not empty or allow_empty:
        return
    lines = [f"rank {rank}: {message or 'no edges'}" for rank, message in empty]
    which = "every rank" if len(empty) == len(ranks) else f"rank(s) {[r for r, _ in empty]}"
    raise EmptyEdgeSetError(
        f"{db}: edge set '{name}' not written: {which} gave no edges; what the database held "
        "is kept (--allow-empty writes it anyway)",
        lines,
    )


def remove_edge_sets(store: GraphStore, run: str, run_idx: int, names: list[str]) -> None:
    """In an open write: drop the run's DEP rows and EdgeSet nodes of these edge sets.

    Kuzu deletes relationships at ~7 µs each (2.56 M: 18 s); reading rows out and copying them
    back into a fresh table costs ~11 µs each. So where the rows to keep are fewer than
    REBUILD_BELOW times those to drop, the DEP table is rebuilt instead (2.56 M dropped: with
    12 k kept 0.8 s, with 1.27 M kept 15 s)."""
    lo, hi = schema.key_range(run_idx)
    # Labels named: unlabeled, `a.id` would also be EdgeSet's STRING id. Validated integers
    # inlined: Kuzu types an integer parameter by its value (0 is INT8).
    mine = f"d.edge_set IN $names AND a.id >= {lo} AND a.id < {hi}"
    params: dict[str, object] = {"names": names}
    runs = (
        store.run("MATCH (r:Run) WHERE r.run_idx = $idx RETURN r.name AS name", {"idx": run_idx})
        .table["name"]
        .to_pylist()
    )
    ids = [f"{r}/{name}" for name in names for r in runs]
    present = _count(store, "MATCH (e:EdgeSet) WHERE e.id IN $ids RETURN count(*) AS n",
                     {"ids": ids})  # fmt: skip
    # A set's DEP rows are only written with its EdgeSet node, in one write (here), and
    # removed with it (here and remove_run): none exist without it, so a first write scans no
    # DEP rows (on 5 M of them the two counts below take ~1 s).
    dropped = total = 0
    if present:
        dropped = _count(store, f"MATCH (a:{_EVENTS})-[d:DEP]->() WHERE {mine} "
                         "RETURN count(*) AS n", params)  # fmt: skip
    if dropped:
        total = _count(store, "MATCH ()-[d:DEP]->() RETURN count(*) AS n", {})
    if dropped and total - dropped < REBUILD_BELOW * dropped:
        kept = [
            (src, dst, store.run(
                f"MATCH (a:{src})-[d:DEP]->(b:{dst}) WHERE NOT ({mine}) "
                f"RETURN a.id AS from_id, b.id AS to_id, {_DEP_COLUMNS}", params).table)
            for src, dst in schema.DEP.pairs
        ]  # fmt: skip
        store.recreate_rel_table("DEP")
        for src, dst, rows in kept:
            if rows.num_rows:
                store.copy("DEP", schema.conform(rows, schema.DEP), pair=(src, dst))
    elif dropped:
        store.run(f"MATCH (a:{_EVENTS})-[d:DEP]->() WHERE {mine} DELETE d "
                  "RETURN count(*) AS deleted", params)  # fmt: skip
    if present:
        store.run("MATCH (e:EdgeSet) WHERE e.id IN $ids DELETE e RETURN count(*) AS deleted",
                  {"ids": ids})  # fmt: skip


REBUILD_BELOW = 0.6  # kept rows per dropped row below which rebuilding DEP is cheaper
_EVENTS = ":".join(schema.EVENT_LABELS)
_DEP_COLUMNS = ", ".join(
    f"d.{c.name} AS {c.name}" for c in schema.arrow_schema(schema.DEP) if c.name not in
    ("from_id", "to_id")
)  # fmt: skip


def _count(store: GraphStore, cypher: str, params: dict[str, object]) -> int:
    return int(store.run(cypher, params).table["n"][0].as_py() or 0)


@dataclass(frozen=True)
class RunSource:
    """One ingested run as an edge-set producer reads it: its name and index (the prefix of its
    keys), and each rank's source file and event-node count."""

    run: str
    run_idx: int
    files: dict[int, str]
    counts: dict[int, int]
    ingested_at: str  # with the name, what tells this ingest of the run from a later one
    # ranks kept as summaries (`ingest --summary`): no events, so in neither `files` nor
    # `counts`
    summarised: tuple[int, ...] = ()

    def events_needed(self, db: Path, what: str) -> None:
        """Refuse `what` on a run none of whose ranks has events."""
        if not self.files and self.summarised:
            raise EdgeSetError(
                f"{db}: run '{self.run}' holds summaries of its {len(self.summarised)} rank(s), "
                f"not their events (ingest --summary), and {what} needs events: load some "
                "with `tracegraph ingest --db DB --full-ranks auto` (or a list of ranks)"
            )


def run_source(store: GraphStore, run: str | None) -> RunSource:
    """The run (the only one of the database when not named) with its ranks."""
    run, run_idx = resolve_run(store, run)
    tier = "k.tier" if "tier" in store.properties("Rank") else "NULL"
    ranks = store.run(
        "MATCH (k:Rank) WHERE k.run = $run RETURN k.rank AS rank, k.file AS file, "
        f"k.event_count AS n, {tier} AS tier ORDER BY rank",
        {"run": run},
    ).table
    rows = ranks.to_pylist()
    files = {r["rank"]: r["file"] for r in rows if r["tier"] != "summary"}
    counts = {r["rank"]: r["n"] for r in rows if r["tier"] != "summary"}
    summarised = tuple(r["rank"] for r in rows if r["tier"] == "summary")
    return RunSource(run, run_idx, files, counts, _ingested_at(store, run), summarised)


def rank_hosts(store: GraphStore, run: str) -> dict[int, str | None]:
    """Each rank's host, as its trace names it (None: unnamed, or a database from before
    tracegraph kept it)."""
    return rank_property(store, run, "host")


def rank_property(store: GraphStore, run: str, name: str) -> dict[int, Any]:
    """Each rank's Rank property `name` (none where the database is older than it)."""
    if name not in store.properties("Rank"):
        return {}
    table = store.run(
        f"MATCH (k:Rank) WHERE k.run = $run RETURN k.rank AS rank, k.`{name}` AS value",
        {"run": run},
    ).table
    return dict(zip(table["rank"].to_pylist(), table["value"].to_pylist(), strict=True))


def _ingested_at(store: GraphStore, run: str) -> str:
    table = store.run("MATCH (r:Run) WHERE r.name = $run RETURN r.ingested_at AS at", {"run": run})
    return ";".join(str(a) for a in table.table["at"].to_pylist())


def write_edge_sets(
    db: Path,
    source: RunSource,
    sets: list[tuple[dict[str, object], pa.Table]],
    inferred_syncs: pa.Table | None = None,
) -> int:
    """The one write of every producer: replace these edge sets of the run (and, when given, its
    inferred SYNCS) in one atomic write, refused if the run changed since it was read (a
    re-ingest under the same name has other keys). The number of DEP edges loaded."""
    lo, hi = schema.key_range(source.run_idx)
    loaded = 0
    written: list[Path] = []  # the sets' Parquet copies (`copies`), removed if the write fails
    folder: Path | None = None
    replaced: set[str] = set()  # the copies of the sets this write replaces
    try:
        with write_transaction(db) as store:
            found = (
                store.run(
                    "MATCH (r:Run) WHERE r.name = $run RETURN r.run_idx AS idx",
                    {"run": source.run},
                )
                .table["idx"]
                .to_pylist()
            )
            if found != [source.run_idx] or _ingested_at(store, source.run) != source.ingested_at:
                raise EdgeSetError(
                    f"{db}: run '{source.run}' changed while its edges were built; try again"
                )
            kept = archive.run_archive(db, store, source.run_idx)
            folder = kept.folder if kept is not None else None
            names = [str(r["name"]) for r, _ in sets]
            before = edge_set_copies(store, source.run, source.run_idx)
            replaced = {before[name].key for name in names if name in before}
            remove_edge_sets(store, source.run, source.run_idx, names)
            for row, edges in sets:
                loaded += store.copy_edges("DEP", edges)
                copy = None
                if folder is not None:
                    key = copies.copy_key(source.run_idx, str(row["name"]), str(row["created_at"]))
                    copy = copies.write_copy(folder, key, edges)
                if copy is not None:
                    written.append(copy[0])
                    row = {**row, "copy_hash": copy[1]}  # in the write that makes it current
                store.copy("EdgeSet", schema.conform(pa.Table.from_pylist([row]), schema.EDGE_SET))
            if inferred_syncs is not None:
                # Validated integers inlined: Kuzu types an integer parameter by its value.
                store.run(
                    f"MATCH (a:Kernel)-[s:SYNCS]->() WHERE s.source = 'inferred' AND a.id >= {lo} "
                    f"AND a.id < {hi} DELETE s RETURN count(*) AS deleted"
                )
                if inferred_syncs.num_rows:
                    store.copy_edges("SYNCS", inferred_syncs)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    if folder is not None:  # only this write's: another may have written since the lock went
        copies.remove(folder, replaced - {p.stem for p in written})
    return loaded


def edge_set_copies(store: GraphStore, run: str, run_idx: int) -> dict[str, copies.SetCopy]:
    """Each edge set of the run, by name: the key and content hash of its Parquet copy
    (`copies`)."""
    digest = "e.copy_hash" if "copy_hash" in store.properties("EdgeSet") else "NULL"
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run "
        f"RETURN e.name AS name, e.created_at AS at, {digest} AS digest",
        {"run": run},
    ).table
    rows = zip(*(table[c].to_pylist() for c in ("name", "at", "digest")), strict=True)
    return {name: copies.SetCopy(copies.copy_key(run_idx, name, at), d) for name, at, d in rows}


def pid_ranks(store: GraphStore, run_idx: int) -> dict[int, int]:
    """pid → its one rank as ingested (pids that hold events of several ranks are left out):
    what re-reading a merged file needs where its pids name no rank."""
    lo, hi = schema.key_range(run_idx)
    pairs = [
        # Validated integers inlined: Kuzu prunes the id scan only for literals.
        store.run(
            f"MATCH (n:{label}) WHERE n.id >= {lo} AND n.id < {hi} "
            "RETURN DISTINCT n.pid AS pid, n.rank AS rank"
        ).table
        for label in schema.EVENT_LABELS
    ]
    return unique_pid_ranks(pa.concat_tables(pairs))


def unique_pid_ranks(pairs: pa.Table) -> dict[int, int]:
    """pid → rank from (pid, rank) rows, for the pids of exactly one rank."""
    pairs = pairs.select(["pid", "rank"]).drop_null()
    if pairs.num_rows == 0:
        return {}
    grouped = pairs.group_by("pid").aggregate([("rank", "min"), ("rank", "max")])
    lo, hi = grouped["rank_min"].to_pylist(), grouped["rank_max"].to_pylist()
    return {p: a for p, a, b in zip(grouped["pid"].to_pylist(), lo, hi, strict=True) if a == b}
