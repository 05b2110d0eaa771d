"""The summary tier (`ingest --summary`): what a worker keeps of each rank in place of its
events, and how the report reads it back.

A worker computes the rank's share of the report with the very function the full report uses
(`rank_facts`), over every step, and sends it back as rows (the per-rank tables' rows, its
findings and its memory copies: `SummaryTier.facts`); the ingest makes each name's rows of
many ranks one table (`SummaryTier.table`), which the run's archive holds as
`table-<name>.parquet`. The report of a run with
summary ranks reads those rows for them; their collective arrivals (`CollectiveArrival`, loaded
for every rank) give the stragglers, each rank's lateness and the spread across ranks. What
needs a rank's events is not there for a summary rank: the critical path, what-if savings,
`--step` and `--hta-compatible`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.archive import RunArchive, read_table

from . import memory
from .findings import Finding
from .rank_facts import RANK_TABLES, summarise
from .tables import TABLES

SUMMARY_TOP = 10  # top kernels kept per rank (`report --top` shows at most these)
FINDINGS, MEMORY = "findings", "memory"
FINDINGS_SCHEMA = pa.schema(
    [("kind", pa.string()), ("rank", pa.int64()), ("title", pa.string()),
     ("cost_ns_per_step", pa.int64()), ("events", pa.int64()), ("detail", pa.string()),
     ("evidence_ids", pa.list_(pa.int64())), ("evidence_cypher", pa.string()),
     ("fix", pa.string()), ("step", pa.int64())]
)  # fmt: skip


class SummaryTier:
    """The summary tier's two halves (`ingest.prepare.Summariser`): a worker's facts of one rank
    as rows of the per-rank tables, its findings and its memory copies; and, in the ingest's
    main process, those rows of many ranks as one of the archive's tables (one conversion for
    many ranks, not one per rank and table)."""

    def facts(
        self, rank: int, rows: pa.Table, events: pa.Table, steps: pa.Table, run_idx: int
    ) -> dict[str, list[dict]]:
        facts = summarise(rank, rows, events, steps, run_idx, SUMMARY_TOP)
        out = {name: facts.rows[name] for name in RANK_TABLES}
        out[FINDINGS] = findings_rows(facts.findings)
        out[MEMORY] = memory.event_rows(events)
        return out

    def table(self, name: str, rows: list[dict]) -> pa.Table:
        return rows_table(rows, FINDINGS_SCHEMA if name == FINDINGS else TABLES[name])


SUMMARY_TIER = SummaryTier()


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as a table of `schema` (a key it has not is null), converted as one struct array:
    a conversion per table rather than per column."""
    if not rows:
        return schema.empty_table()
    return pa.Table.from_struct_array(pa.array(rows, pa.struct(list(schema))))


def findings_rows(findings: Iterable[Finding]) -> list[dict]:
    return [
        {
            "kind": f.kind,
            "rank": f.rank,
            "title": f.title,
            "cost_ns_per_step": f.cost_ns_per_step,
            "events": f.events,
            "detail": f.detail,
            "evidence_ids": list(f.evidence_ids),
            "evidence_cypher": f.evidence_cypher,
            "fix": f.fix,
            "step": f.step,
        }
        for f in findings
    ]


def findings_of(table: pa.Table) -> list[Finding]:
    return [
        Finding(
            r["kind"],
            r["rank"],
            r["title"],
            r["cost_ns_per_step"],
            r["events"],
            r["detail"],
            tuple(r["evidence_ids"]),
            r["evidence_cypher"],
            r["fix"],
            r["step"],
        )  # fmt: skip
        for r in table.to_pylist()
    ]


def summary_rows(
    archive: RunArchive, ranks: Sequence[int]
) -> tuple[dict[str, list[dict]], list[Finding]]:
    """The per-rank tables' rows and the findings of these summary ranks, from the archive."""
    keep = pa.array([int(r) for r in ranks], pa.int64())
    rows: dict[str, list[dict]] = {}
    for name in (*RANK_TABLES, MEMORY):
        table = read_table(archive, name)
        if table is None:
            rows[name] = []
            continue
        rows[name] = table.filter(pc.is_in(table["rank"], value_set=keep)).to_pylist()
    found = read_table(archive, FINDINGS)
    findings = (
        [] if found is None else findings_of(found.filter(pc.is_in(found["rank"], value_set=keep)))
    )
    return rows, findings


def standing_out(tables: Mapping[str, pa.Table]) -> set[int]:
    """The ranks a report points at: those that stand out in a step (`spread`) and each
    step's straggler."""
    named: set[int] = set()
    for row in tables["spread"].to_pylist():
        named.update(int(r) for r in row["outliers"].split())
    named.update(int(r) for r in tables["stragglers"]["rank"].to_pylist())
    return named


def typical_rank(tables: Mapping[str, pa.Table]) -> int | None:
    """A rank to read the others against: the median GPU compute time of the first step
    (ties: the lower rank); None without steps."""
    steps = tables["steps"]
    if not steps.num_rows:
        return None
    first = steps.filter(pc.equal(steps["step"], pc.min(steps["step"])))
    order = np.lexsort((first["rank"].to_numpy(), first["compute_ns"].to_numpy()))
    return int(first["rank"][int(order[(len(order) - 1) // 2])].as_py())


def auto_full_ranks(tables: Mapping[str, pa.Table], ranks: Sequence[int]) -> list[int]:
    """The ranks `--full-ranks auto` loads: those the report points at (`standing_out`) and a
    typical one as a baseline (the first rank where there are no steps)."""
    baseline = typical_rank(tables)
    chosen = standing_out(tables) | {ranks[0] if baseline is None else baseline}
    return sorted(chosen & set(ranks))
