"""Where the report reads CPU ops' recorded arguments (`args`, JSON text) by name or by event:
from the database (`StoreOpArgs`, a run's loaded ranks) or from one rank's parsed events
(`EventOpArgs`, a summary worker's, which never loads them). Both answer with the same table,
so a rule reads the same values either way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.store import GraphStore

COLUMNS = ("rank", "ev_idx", "args")


class OpArgs(Protocol):
    def named(self, names: Sequence[str], ranks: Sequence[int]) -> pa.Table:
        """rank, ev_idx, args of the ops of these names on these ranks."""
        ...

    def at(self, rank: int, ev_idx: Sequence[int]) -> pa.Table:
        """rank, ev_idx, args of these ops of `rank`."""
        ...


class StoreOpArgs:
    """The Op nodes of one run (one query for every rank: a query per rank costs more than the
    scan on a job of many ranks)."""

    def __init__(self, store: GraphStore, run: str) -> None:
        self.store, self.run = store, run

    def named(self, names: Sequence[str], ranks: Sequence[int]) -> pa.Table:
        return self.store.run(
            "MATCH (o:Op) WHERE o.run = $run AND o.rank IN $ranks AND o.name IN $names "
            "RETURN o.rank AS rank, o.ev_idx AS ev_idx, o.args AS args",
            {"run": self.run, "names": list(names), "ranks": [int(r) for r in ranks]},
        ).table

    def at(self, rank: int, ev_idx: Sequence[int]) -> pa.Table:
        return self.store.run(
            f"MATCH (o:Op) WHERE o.run = $run AND o.rank = {int(rank)} AND o.ev_idx IN $ev "
            "RETURN o.rank AS rank, o.ev_idx AS ev_idx, o.args AS args",
            {"run": self.run, "ev": [int(e) for e in ev_idx]},
        ).table


class EventOpArgs:
    """One rank's parsed events (columns label, rank, ev_idx, name, args): its Op rows."""

    def __init__(self, events: pa.Table) -> None:
        self.ops = events.select(["label", "rank", "ev_idx", "name", "args"]).filter(
            pc.equal(events["label"], "Op")
        )

    def named(self, names: Sequence[str], ranks: Sequence[int]) -> pa.Table:
        keep = pc.and_(
            pc.is_in(self.ops["name"], value_set=pa.array(list(names), pa.string())),
            pc.is_in(self.ops["rank"], value_set=pa.array([int(r) for r in ranks], pa.int64())),
        )
        return self.ops.filter(keep).select(list(COLUMNS))

    def at(self, rank: int, ev_idx: Sequence[int]) -> pa.Table:
        keep = pc.and_(
            pc.equal(self.ops["rank"], int(rank)),
            pc.is_in(self.ops["ev_idx"], value_set=pa.array([int(e) for e in ev_idx], pa.int64())),
        )
        return self.ops.filter(keep).select(list(COLUMNS))
