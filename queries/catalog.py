"""Canned Cypher queries: one `.cypher` file each, described by its header comment.

Header format (the first comment lines of the file):
    // Kernels by total GPU time on one rank.
    // params: run (string), rank (int)
    // columns: kernel, launches, total_us
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import GraphStore, query_parameters


@dataclass(frozen=True)
class CannedQuery:
    name: str
    description: str
    params: dict[str, str]
    columns: list[str]
    cypher: str


class CatalogError(TracegraphError):
    """A canned query that does not exist or whose file is malformed."""


class ParamError(CatalogError, ValueError):
    """A parameter value that is not of the type the query's header declares (one line)."""


# The parameter types a header may declare.
PARAM_TYPES = ("string", "int", "float", "bool")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


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
        if params[pname] not in PARAM_TYPES:
            raise CatalogError(
                f"{name}.cypher: parameter {pname} has type '{params[pname]}' "
                f"(types: {', '.join(PARAM_TYPES)})"
            )
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


def coerce_params(query: CannedQuery, given: Mapping[str, object]) -> dict[str, object]:
    """Cast parameter values (text as typed, or values already typed) to the types the query's
    header declares; a value that is not of that type, or a parameter the query does not
    declare, is a ParamError naming the parameter, the value and the type."""
    out: dict[str, object] = {}
    for key, value in given.items():
        kind = query.params.get(key)
        if kind is None:
            declared = ", ".join(f"{p} ({t})" for p, t in query.params.items()) or "none"
            raise ParamError(
                f"canned query '{query.name}' has no parameter '{key}' (params: {declared})"
            )
        out[key] = _coerce(query.name, key, kind, value)
    return out


def _coerce(name: str, key: str, kind: str, value: object) -> object:
    text = value if isinstance(value, str) else json.dumps(value)
    converted: object = None
    if kind == "string":
        converted = value if isinstance(value, str) else text
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            converted = value
        elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            converted = int(value)
        if isinstance(converted, int) and not INT64_MIN <= converted <= INT64_MAX:
            raise ParamError(
                f"parameter {key}={text}: out of the 64-bit integer range "
                f"(canned query '{name}' declares {key} (int))"
            )
    elif kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            converted = float(value)
        elif isinstance(value, str):
            try:
                converted = float(value)
            except ValueError:
                converted = None
        if isinstance(converted, float) and not math.isfinite(converted):
            converted = None
    elif kind == "bool":
        if isinstance(value, bool):
            converted = value
        elif isinstance(value, str) and value.strip().lower() in ("true", "false"):
            converted = value.strip().lower() == "true"
    if converted is None:
        article = "an" if kind == "int" else "a"
        raise ParamError(
            f"parameter {key}={text}: not {article} {kind} "
            f"(canned query '{name}' declares {key} ({kind}))"
        )
    return converted


def check_run(store: GraphStore, params: Mapping[str, object]) -> None:
    """A canned query's `run` must be a run of the database: a misspelt name is an error that
    lists the runs, not an empty result."""
    if "run" in params:
        resolve_run(store, str(params["run"]))
