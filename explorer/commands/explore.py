"""`explore`: the TUI in the terminal (textual loads only when it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import options
from .common import UsageError


def add_parser(sub: options.Subcommands) -> None:
    """`explore DB` with --keymap."""
    p = sub.add_parser("explore", help="the TUI: overview, steps, inspector, diff, console, report")
    options.database(p)
    p.add_argument(
        "--keymap",
        type=Path,
        metavar="FILE",
        help='your keys, JSON or TOML: {"console.run_query": "ctrl+j"} (ids: docs/tui.md)',
    )
    # what `serve` runs per browser tab: exports download to the browser, no history file
    p.add_argument("--served", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run the app on the database until it quits."""
    from tracegraph.queries.usable import file_problem

    from ..app import run_app  # textual loads only for the TUI
    from ..keymap import load_keymap

    db = args.db
    # refused before the app starts (one line, exit 2): no such path, a directory, an empty or
    # non-Kuzu file;
    # a Kuzu database without tracegraph tables or runs is explained in the app
    problem = file_problem(db)
    if problem is not None:
        raise UsageError(problem)
    if args.keymap is not None:
        load_keymap(args.keymap)  # a bad file is one line, before the app starts
    return run_app(db, keymap_file=args.keymap, served=bool(getattr(args, "served", False)))
