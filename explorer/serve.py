"""`tracegraph serve`: the explorer in a browser, through textual-serve (the `serve` extra).

textual-serve starts one `tracegraph explore DB --served` process per browser tab and relays its
terminal over a websocket, so the served explorer is the terminal one, read-only: a served
explorer writes no file on the server (a console export downloads to the browser, the query
history stays in the tab). Who may connect is explorer/serve_access.py's: a token, this server's
host names, its own origin, at most `max_clients` tabs at once. What can be refused (no extra, a
database that cannot be explored, a bad keymap, a host beyond loopback without
`allow_remote`, a port in use) is refused here, before serving, as one TracegraphError line.
"""

from __future__ import annotations

import errno
import shlex
import socket
import sys
from pathlib import Path

import tracegraph
from tracegraph.ingest.errors import TracegraphError

from .keymap import load_keymap
from .options import DEFAULT_MAX_CLIENTS
from .serve_access import Access, is_loopback

EXTRA_HINT = "pip install 'tracegraph[serve]'"


class ServeError(TracegraphError):
    """The explorer cannot be served: a missing extra, a bad database, a taken port."""


def explore_command(db: Path, keymap_file: Path | None = None) -> str:
    """The shell command textual-serve runs per browser tab: this Python's `tracegraph explore`."""
    argv = [
        sys.executable,
        "-m",
        "tracegraph.explorer.cli",
        "explore",
        str(db.resolve()),
        "--served",
    ]
    if keymap_file is not None:
        argv += ["--keymap", str(keymap_file.resolve())]
    return shlex.join(argv)


def serve(
    db: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    keymap_file: Path | None = None,
    public_url: str | None = None,
    allow_remote: bool = False,
    max_clients: int = DEFAULT_MAX_CLIENTS,
) -> int:
    """Serve the explorer on `db` at http://host:port until interrupted; the exit code.
    `public_url` is the address browsers reach it by, where that is not host:port (listening
    on 0.0.0.0, behind a proxy); a host other than loopback needs `allow_remote`."""
    try:
        from .serve_server import GuardedServer
    except ImportError as exc:
        raise ServeError(f"serve needs the optional textual-serve package: {EXTRA_HINT}") from exc
    with tracegraph.open(db).reading():
        pass  # each tab's explorer opens it again; refused here, not in the browser
    if keymap_file is not None:
        load_keymap(keymap_file)
    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise ServeError(
            f"--host {host} listens beyond this machine: add --allow-remote to serve the "
            "database to anyone who reaches the port with the printed URL (plain HTTP)"
        )
    check_port(host, port)
    if remote:
        print(
            f"tracegraph: warning: serving {db} on {host}:{port} beyond this machine: whoever "
            "reaches it with the URL's token reads the database, over plain HTTP (put TLS in "
            "front, e.g. a proxy with --public-url https://...)",
            file=sys.stderr,
        )
    server = GuardedServer(
        explore_command(db, keymap_file),
        access=Access.create(host, port, public_url, allow_remote=remote),
        max_clients=max_clients,
        host=host,
        port=port,
        title=f"tracegraph — {Path(db).name}",  # the tab's title: not the server's path
        public_url=public_url,
    )
    try:
        server.serve()
    except OSError as exc:  # taken between check_port and the bind
        raise ServeError(_listen_problem(host, port, exc)) from exc
    return 0


def check_port(host: str, port: int) -> None:
    """Refuse a host that does not resolve, or a port another process listens on."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ServeError(_listen_problem(host, port, exc)) from exc
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            # as aiohttp binds: SO_REUSEADDR, so a closed server's TIME_WAIT does not count
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise ServeError(_listen_problem(host, port, exc)) from exc


def _listen_problem(host: str, port: int, exc: OSError) -> str:
    where = f"cannot serve on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"{where}: the port is in use (choose another with --port)"
    return f"{where}: {exc.strerror or exc}"
