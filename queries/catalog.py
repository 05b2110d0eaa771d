"""Canned Cypher queries: one `.cypher` file each, described by its header comment.

Header format (the first comment lines of the file):
    // Kernels by total GPU time on one rank.
    // params: run (string), rank (int)
    // columns: kernel, launches, total_us
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from tracegraph.ingest.store import query_parameters


@dataclass(frozen=True)
class CannedQuery:
    name: str
    description: str
    params: dict[str, str]
    columns: list[str]
    cypher: str


class CatalogError(Exception):
    """A canned query that does not exist or whose file is malformed."""


def _parse(name: str, text: str) -> CannedQuery:
    header = [line[2:].strip() for line in text.splitlines() if line.startswith("//")]
    if not header:
        raise CatalogError(f"{name}.cypher has no header comment")
    fields: dict[str, str] = {}
    for line in header[1:]:
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in fields.get("params", "").split(","))):
        pname, _, ptype = item.partition(" ")
        params[pname] = ptype.strip("() ") or "string"
    cypher = "\n".join(line for line in text.splitlines() if not line.startswith("//")).strip()
    used = query_parameters(cypher)
    if used != set(params):
        raise CatalogError(f"{name}.cypher: header params {sorted(params)} != used {sorted(used)}")
    columns = [c.strip() for c in fields.get("columns", "").split(",") if c.strip()]
    return CannedQuery(name, header[0], params, columns, cypher)


def canned_queries() -> dict[str, CannedQuery]:
    """Every canned query shipped with tracegraph, by name."""
    folder = resources.files("tracegraph.queries")
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".cypher"):
            name = entry.name.removesuffix(".cypher")
            out[name] = _parse(name, entry.read_text(encoding="utf-8"))
    return out


def canned_query(name: str) -> CannedQuery:
    queries = canned_queries()
    if name not in queries:
        raise CatalogError(
            f"no canned query '{name}'; see `tracegraph queries` ({', '.join(queries)})"
        )
    return queries[name]


def coerce_params(query: CannedQuery, given: dict[str, object]) -> dict[str, object]:
    """Cast CLI parameter values to the types the query's header declares."""
    out: dict[str, object] = {}
    for key, value in given.items():
        kind = query.params.get(key)
        if kind == "int":
            out[key] = int(str(value))
        elif kind == "float":
            out[key] = float(str(value))
        elif kind == "string":
            out[key] = str(value)
        else:
            out[key] = value
    return out
