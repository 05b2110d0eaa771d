"""A table that shows an Arrow table one page at a time (large results stay in Arrow)."""

from __future__ import annotations

import pyarrow as pa
from textual.reactive import reactive

from .fit_table import FitTable
from .format import cell

PAGE_SIZE = 100


class PagedTable(FitTable):
    """Rows of `table` in pages of `page_size`; `row_dict()` is the row under the cursor.

    Columns are fitted to each page (see FitTable); `keep` names how many lead.
    """

    page: reactive[int] = reactive(0)

    def __init__(self, *, page_size: int = PAGE_SIZE, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.page_size = page_size
        self.data: pa.Table | None = None
        self.headers: list[str] = []

    @property
    def pages(self) -> int:
        if self.data is None or self.data.num_rows == 0:
            return 1
        return (self.data.num_rows + self.page_size - 1) // self.page_size

    def show(self, data: pa.Table, headers: list[str] | None = None) -> None:
        """Replace the content with `data` (column headers default to its column names)."""
        self.data = data
        self.headers = headers or list(data.column_names)
        if self.page == 0:
            self._fill()
        else:
            self.page = 0

    def watch_page(self) -> None:
        if self.data is not None:
            self._fill()

    def _fill(self) -> None:
        assert self.data is not None
        page = self.data.slice(self.page * self.page_size, self.page_size)
        columns = [[cell(v) for v in page.column(i).to_pylist()] for i in range(page.num_columns)]
        self.fill(self.headers, [list(r) for r in zip(*columns, strict=True)])

    def next_page(self) -> None:
        self.page = min(self.page + 1, self.pages - 1)

    def previous_page(self) -> None:
        self.page = max(self.page - 1, 0)

    def row_index(self) -> int | None:
        """Index in `data` of the row under the cursor (None when empty)."""
        if self.data is None or self.row_count == 0:
            return None
        index = self.page * self.page_size + self.cursor_row
        return index if index < self.data.num_rows else None

    def row_dict(self) -> dict[str, object] | None:
        """The Arrow row under the cursor, as a dict (None when empty)."""
        index = self.row_index()
        if index is None or self.data is None:
            return None
        return self.data.slice(index, 1).to_pylist()[0]

    def status(self) -> str:
        if self.data is None:
            return ""
        n = self.data.num_rows
        if n == 0:
            return "no rows"
        first = self.page * self.page_size + 1
        last = min(n, first + self.page_size - 1)
        return f"rows {first:,}–{last:,} of {n:,} (page {self.page + 1}/{self.pages})"
