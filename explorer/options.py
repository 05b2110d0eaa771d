"""The command-line options several subcommands share, defined once (their names, help and
choices stay the same everywhere)."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import output


def database(p: argparse.ArgumentParser) -> None:
    """The positional DB: a tracegraph database file."""
    p.add_argument("db", type=Path, metavar="DB", help="a tracegraph database file")


def run(p: argparse.ArgumentParser, needed_when: str) -> None:
    """--run NAME, needed `needed_when` (e.g. "the database holds several")."""
    p.add_argument("--run", metavar="NAME", help=f"the run (needed when {needed_when})")


def output_format(p: argparse.ArgumentParser, choices: tuple[str, ...] = output.FORMATS) -> None:
    """--format, one of `choices` (default table)."""
    p.add_argument("--format", choices=choices, default="table", help="output format")
