"""An event's fields and its neighbours by edge type, for the explorer's inspector.

The focus event's id is a validated integer inlined as a literal (as in queries.runs); queries are
built only from fixed fragments chosen by the event's label, never from user text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

from tracegraph.ingest import schema
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import GraphStore, QueryError

from .runs import CPU_LABELS, EVENT_LABELS

MAX_PER_GROUP = 200
NEIGHBOUR_SCHEMA = pa.schema(
    [
        ("relation", pa.string()),
        ("direction", pa.string()),
        ("id", pa.int64()),
        ("label", pa.string()),
        ("rank", pa.int64()),
        ("name", pa.string()),
        ("ts", pa.int64()),
        ("dur", pa.int64()),
        ("detail", pa.string()),
    ]
)
_OTHER = "x.id AS id, label(x) AS label, x.rank AS rank, x.name AS name, x.ts AS ts, x.dur AS dur"

# (labels of the focus event, relation, direction, pattern binding e and x, detail expression)
_GROUPS: tuple[tuple[tuple[str, ...], str, str, str, str], ...] = (
    (schema.CPU_LABELS, "CALLS", "parent", f"(x:{CPU_LABELS})-[:CALLS]->(e)", "''"),
    (schema.CPU_LABELS, "CALLS", "child", f"(e)-[:CALLS]->(x:{CPU_LABELS})", "''"),
    (("Kernel",), "LAUNCHES", "launched by", "(x:Runtime)-[r:LAUNCHES]->(e)", "r.via"),
    (("Runtime",), "LAUNCHES", "launches", "(e)-[r:LAUNCHES]->(x:Kernel)", "r.via"),
    (
        ("Kernel",),
        "NEXT_ON_STREAM",
        "previous",
        "(x:Kernel)-[r:NEXT_ON_STREAM]->(e)",
        "'gap ' + CAST(r.gap_ns AS STRING) + ' ns'",
    ),
    (
        ("Kernel",),
        "NEXT_ON_STREAM",
        "next",
        "(e)-[r:NEXT_ON_STREAM]->(x:Kernel)",
        "'gap ' + CAST(r.gap_ns AS STRING) + ' ns'",
    ),
    (("Runtime", "Kernel"), "SYNCS", "waits for", "(x:Kernel)-[r:SYNCS]->(e)", "r.sync_type"),
    (("Kernel",), "SYNCS", "waited on by", "(e)-[r:SYNCS]->(x:Runtime:Kernel)", "r.sync_type"),
)
# Tails after "MATCH (e:Label) WHERE e.id = N MATCH ": one branch of the UNION each.
_COLLECTIVE = (
    "(e)-[:PART_OF]->(c:Collective) "
    "RETURN 'PART_OF' AS relation, 'collective' AS direction, c.id AS id, 'Collective' AS label, "
    "CAST(NULL AS INT64) AS rank, c.name AS name, CAST(NULL AS INT64) AS ts, "
    "CAST(NULL AS INT64) AS dur, c.process_group + ' seq ' + CAST(c.seq AS STRING) + ', ' + "
    "CAST(c.participants AS STRING) + ' participants, matched by ' + c.matched_by AS detail"
)
_PEERS = (
    "(e)-[:PART_OF]->(c:Collective)<-[:PART_OF]-(x:Kernel:Op) WHERE x.id <> e.id "
    f"WITH x, c ORDER BY x.rank LIMIT {MAX_PER_GROUP} "
    f"RETURN 'PART_OF' AS relation, 'peer' AS direction, {_OTHER}, c.name AS detail"
)
_DEP_DETAIL = (
    "d.type + ' ' + d.src_boundary + '→' + d.dst_boundary + "
    "CASE WHEN d.on_critical_path THEN ' (critical)' ELSE '' END AS detail"
)
_DEP = tuple(
    f"{pattern} WITH x, d ORDER BY d.edge_set, x.ts LIMIT {MAX_PER_GROUP} "
    f"RETURN 'DEP ' + d.edge_set AS relation, '{direction}' AS direction, {_OTHER}, {_DEP_DETAIL}"
    for pattern, direction in (
        (f"(e)-[d:DEP]->(x:{EVENT_LABELS})", "to"),
        (f"(x:{EVENT_LABELS})-[d:DEP]->(e)", "from"),
    )
)


class EventNotFound(TracegraphError, LookupError):
    """No Op, Runtime or Kernel node has the id asked for."""


@dataclass(frozen=True)
class EventDetail:
    """One event: its label, its properties (args parsed from JSON) and its neighbours."""

    id: int
    label: str
    fields: dict[str, object]
    args: object
    neighbours: pa.Table  # NEIGHBOUR_SCHEMA

    @property
    def name(self) -> str:
        return str(self.fields.get("name", ""))


def find_event(store: GraphStore, event_id: int) -> tuple[str, dict[str, object]]:
    """The label and properties of the event with this id.

    One primary-key lookup per label: a lookup over the union `Op:Runtime:Kernel` does not use
    the key index (~100 ms on 5 M events against ~5 ms).
    """
    for label in schema.EVENT_LABELS:
        table = store.run(f"MATCH (e:{label}) WHERE e.id = {int(event_id)} RETURN e.*").table
        if table.num_rows:
            row = table.to_pylist()[0]
            return label, {k.removeprefix("e."): v for k, v in row.items()}
    raise EventNotFound(f"no event with id {int(event_id)}")


def event_id_of(store: GraphStore, run: str, rank: int, ev_idx: int) -> int:
    """The id of event (run, rank, ev_idx); the run's index comes from its Run node."""
    _, run_idx = resolve_run(store, run)
    return int(schema.event_key(run_idx, int(rank), int(ev_idx)))


def neighbours(store: GraphStore, event_id: int, label: str) -> pa.Table:
    """The event's neighbours by edge type (NEIGHBOUR_SCHEMA), groups in a fixed order."""
    if label not in schema.EVENT_LABELS:
        raise ValueError(f"not an event label: {label}")
    tails = [
        f"{pattern} WITH x, {detail} AS detail ORDER BY x.ts LIMIT {MAX_PER_GROUP} "
        f"RETURN '{relation}' AS relation, '{direction}' AS direction, {_OTHER}, detail"
        for labels, relation, direction, pattern, detail in _GROUPS
        if label in labels
    ]
    if label in ("Kernel", "Op"):
        tails += [_COLLECTIVE, _PEERS]
    try:
        table = store.run(_union(label, event_id, tails + list(_DEP))).table
    except QueryError:  # a database without the DEP table: no dependency neighbours
        table = store.run(_union(label, event_id, tails)).table
    # Kuzu returns a UNION ALL's branches, and rows within one, in no fixed order
    order = [(key, "ascending") for key in ("branch", "relation", "ts", "id", "detail")]
    return table.sort_by(order).drop_columns(["branch"]).cast(NEIGHBOUR_SCHEMA)


def _union(label: str, event_id: int, tails: list[str]) -> str:
    match = f"MATCH (e:{label}) WHERE e.id = {int(event_id)} MATCH "
    numbered = (t.replace("RETURN ", f"RETURN {i} AS branch, ", 1) for i, t in enumerate(tails))
    return " UNION ALL ".join(match + tail for tail in numbered)


def event_detail(store: GraphStore, event_id: int) -> EventDetail:
    """Fields, parsed args and neighbours of one event."""
    label, fields = find_event(store, event_id)
    raw = fields.pop("args", None)
    args: object = raw
    if isinstance(raw, str) and raw:
        try:
            args = json.loads(raw)
        except ValueError:
            pass  # not JSON: shown as the text it is
    elif not raw:
        args = {}
    return EventDetail(int(event_id), label, fields, args, neighbours(store, event_id, label))
