"""The `tracegraph` command: assembles the commands (`commands/`, one module each), and turns
their errors into one line on stderr and exit code 2.

Results go to stdout, progress and errors to stderr. Parsing imports nothing heavy: a command's
module defines its arguments with light imports only, and its handler imports the layers it
drives when it runs, so `--help` and `--version` start at once and each command pays only for
the modules it uses.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from tracegraph.ingest.errors import TraceFormatError, TracegraphError

# The commands, in the order `--help` lists them: each the module of commands/ of its name,
# whose `add_parser(sub)` adds its arguments and sets its handler (`handle(args)`).
COMMANDS = (
    "ingest", "runs", "info", "query", "edges", "whatif", "path", "diff", "report", "export",
    "explore", "serve", "queries", "demo",
)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names; the exit code (2: a one-line error on stderr)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TracegraphError as exc:
        db = _database_named(args)
        # a build refused because ranks gave nothing: first what each of them gave, one line each
        for line in getattr(exc, "rank_lines", ()):
            print(f"tracegraph: error: {_error_line(TracegraphError(line), db)}", file=sys.stderr)
        print(f"tracegraph: error: {_error_line(exc, db)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tracegraph: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # Leave now: a Ctrl-C can land while Kuzu objects are half set up, and tearing those
        # down at interpreter exit can crash. Writes are staged (a kill leaves the database as
        # it was), so there is nothing to finish.
        os._exit(130)
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: stop quietly, as other CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _database_named(args: argparse.Namespace) -> Path | None:
    """The database an error is about: the command's (once `commands/traces.py` has set it), or
    the one path it was given."""
    db = getattr(args, "db", None)
    inputs = getattr(args, "inputs", None)
    if db is None and inputs is not None and len(inputs) == 1:
        return Path(inputs[0])
    return db if db is None else Path(db)


def _error_line(exc: Exception, db: Path | None) -> str:
    """`<file or db>: <problem>` on one line: messages that name no file get the database's."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if db is None or isinstance(exc, TraceFormatError):
        return message
    head = message.split(": ", 1)[0]
    if head == str(db) or os.sep in head or head.endswith((".kuzu", ".json", ".gz")):
        return message
    return f"{db}: {message}"


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one-line errors (exit code 2), pointing at --help for usage."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("tracegraph").strip()
        line = " ".join(f"{where + ': ' if where else ''}{message}".split())
        self.exit(2, f"tracegraph: error: {line} (see {self.prog} --help)\n")


class _VersionAction(argparse.Action):
    """--version: the version is read (package metadata, ~40 ms) only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        print(f"tracegraph {_version()}")
        parser.exit(0)


def _version() -> str:
    """The installed distribution's version (package metadata), with Kuzu's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{version('tracegraph')} (kuzu {version('kuzu')})"
    except PackageNotFoundError:
        return "(not installed)"


def _parser() -> argparse.ArgumentParser:
    """The parser of every command, each added by its module (`COMMANDS`)."""
    parser = _Parser(
        prog="tracegraph",
        description="PyTorch profiler traces of distributed training as a graph database.",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").add_parser(sub)
    return parser


if __name__ == "__main__":
    sys.exit(main())
