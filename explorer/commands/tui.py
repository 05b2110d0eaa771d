"""`explore` and `serve`: the TUI in a terminal or a browser (textual loads only here)."""

from __future__ import annotations

import argparse

from tracegraph.queries.usable import file_problem

from .common import UsageError


def explore_command(args: argparse.Namespace) -> int:
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


def serve_command(args: argparse.Namespace) -> int:
    from ..serve import serve  # textual-serve loads only for serving

    return serve(
        args.db,
        host=args.host,
        port=args.port,
        keymap_file=args.keymap,
        public_url=args.public_url,
        allow_remote=args.allow_remote,
        max_clients=args.max_clients,
    )
