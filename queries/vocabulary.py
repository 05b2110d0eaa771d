"""Names a Cypher editor can complete: node and relationship labels and their properties."""

from __future__ import annotations

from tracegraph.ingest import schema

KEYWORDS = (
    "MATCH",
    "OPTIONAL MATCH",
    "WHERE",
    "RETURN",
    "WITH",
    "ORDER BY",
    "LIMIT",
    "SKIP",
    "DISTINCT",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS NULL",
    "IS NOT NULL",
    "STARTS WITH",
    "ENDS WITH",
    "CONTAINS",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "UNION ALL",
    "UNWIND",
    "DESC",
    "ASC",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "collect",
    "label",
    "size",
    "CAST",
)


def node_labels() -> list[str]:
    return [t.label for t in schema.NODE_TABLES]


def rel_labels() -> list[str]:
    return [t.label for t in schema.REL_TABLES]


def properties(label: str | None = None) -> list[str]:
    """Properties of one node or relationship label, or of all of them (sorted, unique)."""
    tables = [*schema.NODE_TABLES, *schema.REL_TABLES]
    chosen = [t for t in tables if label is None or t.label == label]
    return sorted({c.name for t in chosen for c in t.columns})
