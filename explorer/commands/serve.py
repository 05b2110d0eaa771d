"""`serve`: the TUI in browsers, read-only, behind a token (textual-serve loads only when it
runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import options


def add_parser(sub: options.Subcommands) -> None:
    """`serve DB` with where to listen, for how many tabs, and --keymap."""
    p = sub.add_parser(
        "serve",
        help="the TUI in a browser (needs tracegraph[serve]); read-only, behind a token",
        description="Serve the explorer to browsers at the printed URL, which carries a random "
        "token every request needs. Clients read, never write: a console export downloads to "
        "the browser. Requests from another web origin or to another host name are refused.",
    )
    options.database(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than loopback: anyone who reaches the port with the URL's "
        "token reads the database, over plain HTTP",
    )
    p.add_argument(
        "--max-clients",
        type=options.positive,
        default=options.DEFAULT_MAX_CLIENTS,
        metavar="N",
        help=f"browser tabs served at once, each its own explorer of ~100 MB "
        f"(default {options.DEFAULT_MAX_CLIENTS})",
    )
    p.add_argument("--keymap", type=Path, metavar="FILE", help="your keys, as for explore")
    p.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers reach the server by, where that is not http://HOST:PORT "
        "(e.g. --host 0.0.0.0, or behind a proxy)",
    )
    p.set_defaults(handler=handle)


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is 1..65535")
    return int(text)


def handle(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
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
