"""`query`: ad-hoc or canned Cypher, read-only, with typed parameters."""

from __future__ import annotations

import argparse
import json
import math
import sys

from .. import options
from .common import INT64_MAX, INT64_MIN, INTEGER, UsageError, open_reading


def add_parser(sub: options.Subcommands) -> None:
    """`query DB CYPHER` or `query DB --canned NAME`, with parameters and limits."""
    p = sub.add_parser("query", help="run ad-hoc or canned Cypher")
    options.database(p)
    p.add_argument("cypher", nargs="?", help="a Cypher statement")
    p.add_argument("--canned", metavar="NAME", help="a canned query (see `tracegraph queries`)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="query parameter; in ad-hoc Cypher integers, floats, true/false and JSON lists are "
        "typed, anything else is a string, and a value in double quotes is the string inside "
        """(--param 'run="2024"'); a canned query types them by its header""",
    )
    options.output_format(p)
    options.width(p)
    p.add_argument("--timeout-s", type=float, default=60.0, help="query timeout (0: none)")
    p.add_argument(
        "--allow-files",
        action="store_true",
        help="allow LOAD FROM, which reads host files (queries are read-only and confined "
        "to the database otherwise)",
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="print the first N rows only (stderr says so)"
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run the statement (refused unless read-only) and print its rows; stderr says how many."""
    from tracegraph.ingest.store import unused_parameters
    from tracegraph.queries.catalog import canned_query, check_run, coerce_params
    from tracegraph.queries.guard import QueryRefused, check_read_only

    from .. import output
    from ..cancellable import run_cancellable

    raw = _raw_params(args.param)
    if args.canned and args.cypher:
        raise UsageError("give either a Cypher statement or --canned NAME, not both")
    if args.canned:
        canned = canned_query(args.canned)
        texts = {key: _unquoted(text) for key, text in raw.items()}
        cypher, params = canned.cypher, coerce_params(canned, texts)
    elif args.cypher:
        cypher = args.cypher
        params = {key: _param_value(key, text) for key, text in raw.items()}
        for name in unused_parameters(cypher, params):
            print(f"tracegraph: ignoring --param {name}: the query does not use ${name}",
                  file=sys.stderr)  # fmt: skip
            del params[name]
        try:
            check_read_only(cypher, allow_files=args.allow_files, params=params)
        except QueryRefused as exc:
            raise UsageError(str(exc)) from exc
    else:
        raise UsageError("query needs a Cypher statement or --canned NAME")
    if not (args.timeout_s >= 0 and math.isfinite(args.timeout_s)):
        raise UsageError(f"--timeout-s {args.timeout_s}: expected seconds >= 0")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: at least 1")
    timeout_ms = int(args.timeout_s * 1000)
    with open_reading(args.db, timeout_ms, allow_files=bool(args.allow_files)) as store:
        if args.canned:
            check_run(store, params)
        result = run_cancellable(store, cypher, params, args.timeout_s, args.limit)
    output.write(sys.stdout, result.table, args.format, max_width=options.max_width(args))
    rows = result.table.num_rows
    shown = (
        f"the first {rows} row(s) (--limit; there are more)"
        if result.truncated
        else (f"{rows} row(s)")
    )
    print(f"{shown} in {result.elapsed_s * 1000:.0f} ms", file=sys.stderr)
    return 0


def _raw_params(items: list[str]) -> dict[str, str]:
    """`--param K=V` items as text, by name (a canned query types them by its header)."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--param {item}: expected NAME=VALUE")
        if not key.isidentifier():
            raise UsageError(f"--param {item}: '{key}' is not a parameter name")
        params[key] = raw
    return params


def _param_value(key: str, raw: str) -> object:
    """Integers (64-bit), finite floats, true/false and JSON lists of one type as such, a JSON
    string (`"2024"`) as the string it holds; anything else as a string (so text such as
    `[param|...]` that is no JSON stays text)."""
    text = raw.strip()
    string = _json_string(text)
    if string is not None:
        return string
    if INTEGER.fullmatch(text):
        value = int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise UsageError(f"--param {key}={raw}: integer out of the 64-bit range")
        return value
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(number):
            return number
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return raw
        problem = _list_problem(value)
        if problem:
            raise UsageError(f"--param {key}={raw}: {problem}")
        return value
    return raw


def _json_string(text: str) -> str | None:
    """The string a `--param` value in double quotes spells as JSON (`"2024"` → 2024, so a
    number can be passed as text); None for anything else."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, str) else None


def _unquoted(raw: str) -> str:
    """A `--param` value for a canned query, whose header types it: the text of a JSON string
    (`"2024"`), anything else as given."""
    string = _json_string(raw)
    return raw if string is None else string


def _list_problem(value: object) -> str | None:
    """Why Kuzu cannot take this JSON list as a parameter (None: it can)."""
    if not isinstance(value, list):
        return None
    items = [v for v in value if v is not None]
    if not items:
        return "an empty list (or one of nulls) has no type; give at least one value"
    kinds = set()
    for item in items:
        if isinstance(item, bool):
            kinds.add("true/false")
        elif isinstance(item, int | float):
            if isinstance(item, int) and not INT64_MIN <= item <= INT64_MAX:
                return f"{item} is out of the 64-bit range"
            kinds.add("number")
        elif isinstance(item, str):
            kinds.add("string")
        elif isinstance(item, list):
            problem = _list_problem(item)
            if problem:
                return problem
            kinds.add("list")
        else:
            return "lists hold numbers, strings, true/false or lists, not objects"
    if len(kinds) > 1:
        return f"a list mixes {', '.join(sorted(kinds))}; its values must be of one type"
    return None
