"""A DataTable whose column widths are fitted to its width: numbers whole, long text cut first.

Widths are set explicitly when the table is filled and again when its width changes. Textual's
automatic widths are measured on idle, after a first render may already have cached cells at
the header's width (a table could show 4-character columns until something redrew it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from .fresh import FreshLayout

FLOOR = 16  # text columns are not cut below this (shorter ones keep their width)
COMFORT = 24  # below this, the leading `keep` columns get the room and the others scroll
PADDING = 2  # DataTable's cell_padding on each side of a column
_NUMBER = re.compile(r"[\s0-9.,:%+\-–—/…]*")

Cell = str | Text


def fit_widths(
    natural: Sequence[int], shrinkable: Sequence[bool], room: int, keep: int
) -> list[int]:
    """Column widths (without padding) for `room` cells.

    Every column fits when cutting the shrinkable (text) ones to no less than COMFORT is
    enough; otherwise the first `keep` columns fit, their text cut to no less than FLOOR, and
    the rest scroll into view. Numbers are never cut.
    """
    budget = room - PADDING * len(natural)
    if sum(natural) <= budget:
        return list(natural)

    def cap_fitting(count: int) -> int | None:
        head = range(min(count, len(natural)))
        fixed = sum(natural[i] for i in head if not shrinkable[i])
        return _cap([natural[i] for i in head if shrinkable[i]], budget - fixed)

    cap = cap_fitting(len(natural))
    if cap is None or cap < COMFORT:
        cap = max(cap or FLOOR, cap_fitting(keep) or FLOOR)
    return [min(w, cap) if s else w for w, s in zip(natural, shrinkable, strict=True)]


def _cap(widths: list[int], budget: int) -> int | None:
    """The largest cap ≥ FLOOR with sum(min(w, cap)) ≤ budget; None if FLOOR is too wide."""
    if sum(min(w, FLOOR) for w in widths) > budget:
        return None
    lo, hi = FLOOR, max(widths, default=FLOOR)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(w, mid) for w in widths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _plain(value: Cell) -> str:
    return value.plain if isinstance(value, Text) else value


class FitTable(DataTable[Cell], FreshLayout):
    """`fill()` it with headers and rows; the first `keep` columns stay on screen if they can."""

    def __init__(self, *, keep: int | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.keep = keep
        self._headers: list[str] = []
        self._column_keys: list[str | None] = []
        self._rows: list[list[Cell]] = []
        self._row_keys: list[str | None] = []
        self._natural: list[int] = []  # per column, its widest cell or header
        self._shrinkable: list[bool] = []  # per column, whether it holds text (not numbers)
        self._widths: list[int] = []

    def fill(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[Cell]],
        *,
        column_keys: Sequence[str | None] | None = None,
        row_keys: Sequence[str | None] | None = None,
    ) -> None:
        """Replace columns and rows; text cells are shown as text (never parsed as markup)."""
        self._headers = list(headers)
        self._column_keys = list(column_keys or [None] * len(headers))
        self._rows = [list(r) for r in rows]
        self._row_keys = list(row_keys or [None] * len(rows))
        measured = [self._measure(i) for i in range(len(self._headers))]
        self._natural = [n for n, _ in measured]
        self._shrinkable = [s for _, s in measured]
        self._rebuild(keep_cursor=False)

    def update_cell(
        self, row_key: object, column_key: object, value: Cell, *, update_width: bool = False
    ) -> None:
        """Update a cell (by keys), refitting the columns if it no longer fits."""
        row_at = _index(self._row_keys, row_key)
        column_at = _index(self._column_keys, column_key)
        if row_at is None or column_at is None:
            super().update_cell(row_key, column_key, value, update_width=update_width)  # type: ignore[arg-type]
            return
        self._rows[row_at][column_at] = value
        self._natural[column_at], self._shrinkable[column_at] = self._measure(column_at)
        if self._fit() != self._widths:
            self._rebuild()
        else:
            super().update_cell(row_key, column_key, _text(value))  # type: ignore[arg-type]

    def on_resize(self, _: events.Resize) -> None:
        if self._headers and self._fit() != self._widths:
            self._rebuild()

    def _room(self) -> int:
        width = self.size.width or self.app.size.width
        return width - self.styles.scrollbar_size_vertical

    def _measure(self, column: int) -> tuple[int, bool]:
        """The column's natural width, and whether any of its cells is text."""
        texts = [_plain(row[column]) for row in self._rows]
        width = max([cell_len(self._headers[column]), *(cell_len(t) for t in texts)])
        return width, any(not _NUMBER.fullmatch(t) for t in texts)

    def _fit(self) -> list[int]:
        keep = len(self._natural) if self.keep is None else self.keep
        return fit_widths(self._natural, self._shrinkable, self._room(), keep)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable measures every new cell for its automatic column widths; ours are set
        (tens of ms for a page of rows on the UI thread), so only the size is updated."""
        if any(column.auto_width for column in self.columns.values()):
            super()._update_dimensions(new_rows)
        else:
            super()._update_dimensions(())

    def _rebuild(self, keep_cursor: bool = True) -> None:
        cursor, scroll = self.cursor_coordinate, self.scroll_offset
        self._widths = self._fit()
        self.clear(columns=True)
        for header, key, width in zip(self._headers, self._column_keys, self._widths, strict=True):
            self.add_column(_text(header), width=width, key=key)
        for row, key in zip(self._rows, self._row_keys, strict=True):
            self.add_row(*(_text(v) for v in row), key=key)
        if keep_cursor and self.row_count:
            self.cursor_coordinate = Coordinate(
                min(cursor.row, self.row_count - 1), min(cursor.column, len(self.columns) - 1)
            )
            self.scroll_to(scroll.x, scroll.y, animate=False, immediate=True)


def _index(keys: list[str | None], key: object) -> int | None:
    wanted = str(getattr(key, "value", key))
    return keys.index(wanted) if wanted in keys else None


def _text(value: Cell) -> Text:
    """A cell cut with an ellipsis where its column is narrower."""
    text = value.copy() if isinstance(value, Text) else Text(value)
    text.overflow = "ellipsis"
    text.no_wrap = True
    return text
