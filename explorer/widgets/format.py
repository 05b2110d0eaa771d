"""Display formatting of values for tables and status lines (display strings never go back)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import groupby

from rich.text import Text

SPARK = "▁▂▃▄▅▆▇█"
MAX_CELL = 120  # the table columns cut what their width cannot show


def ms(ns: int | float | None, digits: int = 2) -> str:
    return "" if ns is None else f"{ns / 1e6:,.{digits}f}"


def us(ns: int | float | None) -> str:
    return "" if ns is None else f"{ns / 1e3:,.1f}"


def percent(share: float | None) -> str:
    return "" if share is None or math.isnan(share) else f"{share * 100:.1f}%"


def sparkline(counts: list[int]) -> str:
    """Counts as a row of block characters, highest = full block."""
    top = max(counts) if counts else 0
    if not top:
        return ""
    return "".join(
        SPARK[min(len(SPARK) - 1, round(c / top * (len(SPARK) - 1)))] if c else " " for c in counts
    )


def cell(value: object) -> str:
    """A result value as a table cell: floats rounded, long text cut."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def duration(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def append_runs(out: Text, cells: Iterable[tuple[str, str]]) -> None:
    """Append (character, style) cells to `out`, one span per run of equal style: what the
    terminal shows is the same, and rendering costs per span (a chart of one span per cell took
    hundreds of ms to draw)."""
    for style, run in groupby(cells, key=lambda c: c[1]):
        out.append("".join(char for char, _ in run), style=style)
