"""`queries`: the canned queries, with their parameters and columns."""

from __future__ import annotations

import argparse

from .. import options


def add_parser(sub: options.Subcommands) -> None:
    """`queries` (no arguments)."""
    p = sub.add_parser("queries", help="list canned queries with their parameters")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Each canned query: its name, what it answers, its parameters and columns."""
    from tracegraph.queries.catalog import canned_queries

    for name, query in canned_queries().items():
        params = ", ".join(f"{p} ({t})" for p, t in query.params.items()) or "none"
        print(f"{name}\n  {query.description}\n  params: {params}")
        if query.columns:
            print(f"  columns: {', '.join(query.columns)}")
    return 0
