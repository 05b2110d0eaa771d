"""The command-line options several subcommands share, defined once (their names, help and
choices stay the same everywhere), and the argument types they share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

FORMATS = ("table", "csv", "json")
DEFAULT_WIDTH = 60
FULL = 1 << 30  # --full-names: no cell is shortened
DEFAULT_MAX_CLIENTS = 4  # serve: each browser tab runs its own explorer process (~100 MB)

# what `add_subparsers` returns: each command's module adds its parser to it (`commands/`)
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def database(p: argparse.ArgumentParser) -> None:
    """The positional DB: a tracegraph database file."""
    p.add_argument("db", type=Path, metavar="DB", help="a tracegraph database file")


def database_or_traces(p: argparse.ArgumentParser) -> None:
    """The positional DB, or trace files and folders with --db: `commands/traces.py` turns
    them into `args.db`."""
    p.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="DB|TRACES",
        help="a tracegraph database file, or trace files or folders: ingested first (into --db, "
        "else a cache database for exactly these files) unless already there",
    )
    p.add_argument(
        "--db",
        dest="into",
        type=Path,
        metavar="DB",
        help="with traces: the database to ingest them into (default: the cache's, "
        "~/.cache/tracegraph/traces)",
    )


def run(p: argparse.ArgumentParser, needed_when: str) -> None:
    """--run NAME, needed `needed_when` (e.g. "the database holds several")."""
    p.add_argument("--run", metavar="NAME", help=f"the run (needed when {needed_when})")


def output_format(p: argparse.ArgumentParser, choices: tuple[str, ...] = FORMATS) -> None:
    """--format, one of `choices` (default table)."""
    p.add_argument("--format", choices=choices, default="table", help="output format")


def width(p: argparse.ArgumentParser) -> None:
    """--width N and --full-names: how wide a table cell may be before names are shortened."""
    p.add_argument(
        "--width",
        type=_cell_width,
        default=DEFAULT_WIDTH,
        metavar="N",
        help=f"table cells up to N characters; longer names are shortened by their structure "
        f"(default {DEFAULT_WIDTH})",
    )
    p.add_argument("--full-names", action="store_true", help="never shorten a name")


def max_width(args: argparse.Namespace) -> int:
    return FULL if args.full_names else int(args.width)


def positive(text: str) -> int:
    """An argument type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return int(text)


def _cell_width(text: str) -> int:
    if not text.isdigit() or int(text) < 8:
        raise argparse.ArgumentTypeError(f"{text!r}: a width of at least 8 characters")
    return int(text)
