"""Query console: a Cypher editor, the canned queries with their parameters, paged results.

Queries run in a thread worker; Esc interrupts from another worker group (the store's
`interrupt()`), and the store's timeout stops runaways. Results stay in Arrow, shown by pages.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Header, Static
from textual.worker import get_current_worker

from tracegraph.ingest import outputs
from tracegraph.ingest.store import GraphStore, QueryError, query_parameters
from tracegraph.queries.catalog import CannedQuery, canned_queries, coerce_params
from tracegraph.queries.guard import QueryRefused, check_read_only

from .. import keymap
from ..messages import CsvExported, EventChosen, QueryFailed, QueryFinished
from ..widgets.cypher_editor import CypherEditor
from ..widgets.footer import StableFooter
from ..widgets.format import duration
from ..widgets.fresh import StatusLine
from ..widgets.paged_table import PagedTable
from .base import ExplorerScreen
from .dialogs import CannedPicker, ParamsDialog, PromptDialog

ROW_LIMIT = 200_000
EXPORT_NAME = "tracegraph-result.csv"
INTERRUPT_EVERY_S = 0.05
INTERRUPT_FOR_S = 5.0
STARTER = """MATCH (k:Kernel) WHERE k.run = $run
RETURN k.rank AS rank, count(*) AS kernels, sum(k.dur) / 1e6 AS gpu_ms
ORDER BY rank;"""


class ConsoleScreen(ExplorerScreen):
    SCOPE = "console"
    BINDINGS = keymap.bindings("console")

    def __init__(self) -> None:
        super().__init__()
        self.canned: CannedQuery | None = None  # the canned query loaded in the editor, if any
        self.param_values: dict[str, str] = {}
        self.result: pa.Table | None = None
        self.running = False
        self.running_on: GraphStore | None = None  # the store the running query uses
        self.stop_requested = False
        self._done = threading.Event()
        self._done.set()

    def compose(self) -> ComposeResult:
        yield Header()
        keep = not self.explorer.served  # a browser client's queries stay its own
        yield CypherEditor("", keep_history=keep, id="editor", language=None)
        yield StatusLine("", id="console-status", classes="status")
        yield PagedTable(id="results")
        yield StableFooter()

    def on_mount(self) -> None:
        self._status("ready")
        self.query_one(CypherEditor).focus()

    def _status(self, text: str) -> None:
        self.query_one("#console-status", Static).update(
            f"{text} · timeout {self.explorer.timeout_s:g} s · Ctrl+R run, Esc interrupt, "
            "Ctrl+T an example, Ctrl+L clear, Ctrl+O canned queries"
        )

    def action_example(self) -> None:
        """The example query in the editor (it starts empty: what is typed is the query)."""
        editor = self.query_one(CypherEditor)
        editor.load_text(STARTER)
        editor.focus()

    def action_clear(self) -> None:
        editor = self.query_one(CypherEditor)
        editor.load_text("")
        self.canned = None
        editor.focus()

    # ---- running -----------------------------------------------------------------------------
    def action_run_query(self) -> None:
        editor = self.query_one(CypherEditor)
        cypher = editor.text.strip()
        if not cypher:
            return
        if self.canned is not None and self.canned.cypher.strip() != cypher:
            self.canned = None  # edited: parameters are typed by guessing from now on
        used = query_parameters(cypher)
        names = list(self.canned.params) if self.canned else sorted(used)
        if not names:
            self.start(cypher, {})
            return
        kinds = self.canned.params if self.canned else {n: "int, float or string" for n in names}
        defaults = self._defaults()

        def chosen(values: dict[str, str] | None) -> None:
            if values is None:
                return
            self.param_values.update(values)
            try:
                params = (
                    coerce_params(self.canned, dict(values))
                    if self.canned
                    else {k: _guess(v) for k, v in values.items()}
                )
            except ValueError as exc:
                self.show_error("Bad parameter", str(exc))
                return
            self.start(cypher, params)

        title = f"Parameters of {self.canned.name}" if self.canned else "Query parameters"
        self.app.push_screen(
            ParamsDialog(title, {n: kinds.get(n, "string") for n in names}, defaults), chosen
        )

    def _defaults(self) -> dict[str, str]:
        focus = self.explorer.focus_state
        out = {"run": focus.run or "", "rank": "" if focus.rank is None else str(focus.rank)}
        out.update(self.param_values)
        if focus.run:
            out["run"] = self.param_values.get("run", focus.run)
        return out

    def start(self, cypher: str, params: dict[str, object]) -> None:
        try:
            check_read_only(cypher, params=params)  # before Kuzu sees it: the db may be shared
        except QueryRefused as exc:
            self.show_error("Query refused", str(exc))
            return
        self.query_one(CypherEditor).remember(cypher)
        self.running, self.stop_requested = True, False
        self._done.clear()
        self._status("running…")
        self.execute(cypher, params)

    @work(thread=True, exclusive=True, exit_on_error=False, group="console-query")
    def execute(self, cypher: str, params: dict[str, object]) -> None:
        self.running_on = store = self.explorer.store  # Ctrl+L may put another in its place
        try:
            result = store.run(cypher, params, limit=ROW_LIMIT)
        except QueryError as exc:
            stopped = "Interrupted" in str(exc)
            self.post_message(QueryFailed(cypher, str(exc), stopped, self.stop_requested))
            return
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed(cypher, repr(exc)))
            return
        finally:
            self._done.set()
        if not get_current_worker().is_cancelled:
            self.post_message(QueryFinished(cypher, result))

    def action_interrupt(self) -> None:
        if not self.running:
            return
        self.stop_requested = True
        self._status("interrupting…")
        self.interrupt_query()

    @work(thread=True, exit_on_error=False, group="console-interrupt")
    def interrupt_query(self) -> None:
        """Interrupt until the query worker is done (it may not have reached Kuzu yet)."""
        deadline = time.monotonic() + INTERRUPT_FOR_S
        while not self._done.is_set() and time.monotonic() < deadline:
            (self.running_on or self.explorer.store).interrupt()
            self._done.wait(INTERRUPT_EVERY_S)

    def on_query_finished(self, message: QueryFinished) -> None:
        self.running = False
        result = message.result
        self.result = result.table
        table = self.query_one("#results", PagedTable)
        table.show(result.table)
        more = f" (first {ROW_LIMIT:,}: more were cut)" if result.truncated else ""
        self._status(f"{result.table.num_rows:,} rows{more} in {duration(result.elapsed_s)}")
        self.notify(f"{result.table.num_rows:,} rows in {duration(result.elapsed_s)}")

    def query_failed(self, message: QueryFailed) -> None:
        self.running = False
        if message.interrupted and message.by_user:
            self._status("query interrupted")
            self.notify("query interrupted", severity="warning")
            return
        if message.interrupted:
            self._status("query timed out")
            self.show_error(
                "Query timed out",
                f"Stopped by the {self.explorer.timeout_s:g} s timeout.\n\n{message.cypher}",
            )
            return
        self._status("query failed")
        self.show_error("Query failed", f"{message.error}\n\n{message.cypher}")

    # ---- canned queries, history, pages ----------------------------------------------------------
    def action_canned(self) -> None:
        def chosen(query: CannedQuery | None) -> None:
            if query is None:
                return
            editor = self.query_one(CypherEditor)
            editor.load_text(query.cypher)
            self.canned = query
            self.action_run_query()

        self.app.push_screen(CannedPicker(canned_queries()), chosen)

    def action_history_previous(self) -> None:
        self.query_one(CypherEditor).history_step(-1)

    def action_history_next(self) -> None:
        self.query_one(CypherEditor).history_step(1)

    def action_next_page(self) -> None:
        table = self.query_one("#results", PagedTable)
        table.next_page()
        self._status(table.status())

    def action_previous_page(self) -> None:
        table = self.query_one("#results", PagedTable)
        table.previous_page()
        self._status(table.status())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_inspect_row()

    def action_inspect_row(self) -> None:
        row = self.query_one("#results", PagedTable).row_dict()
        if not row:
            return
        ids = [
            v
            for k, v in row.items()
            if isinstance(v, int) and (k == "id" or k.endswith((".id", "_id")))
        ]
        if not ids:
            self.notify("no id column in this result (return e.g. `k.id`)", severity="warning")
            return
        self.post_message(EventChosen(ids[0]))

    # ---- export ----------------------------------------------------------------------------
    def action_export_csv(self) -> None:
        if self.result is None:
            self.notify("no result to export", severity="warning")
            return
        if self.explorer.served:
            self.deliver(self.result)
            return

        def chosen(path: str | None) -> None:
            if path:
                self.export(Path(path).expanduser(), self.result)  # type: ignore[arg-type]

        self.app.push_screen(PromptDialog("Export result to CSV", EXPORT_NAME), chosen)

    @work(thread=True, exclusive=True, exit_on_error=False, group="console-export")
    def export(self, path: Path, table: pa.Table) -> None:
        try:
            with outputs.written(path, binary=True) as f:
                pacsv.write_csv(table, f)
        except (OSError, pa.ArrowException) as exc:
            self.post_message(QueryFailed(f"the export to {path}", str(exc)))
            return
        self.post_message(CsvExported(str(path), table.num_rows))

    def deliver(self, table: pa.Table) -> None:
        """To a browser client the CSV is a download: no file is written on the server."""
        data = io.BytesIO()
        pacsv.write_csv(table, data)
        data.seek(0)
        self.app.deliver_binary(data, save_filename=EXPORT_NAME, mime_type="text/csv")
        self.notify(f"sent {table.num_rows:,} rows to the browser as {EXPORT_NAME}")
        self._status(f"downloaded {table.num_rows:,} rows as {EXPORT_NAME}")

    def on_csv_exported(self, message: CsvExported) -> None:
        self.notify(f"wrote {message.rows:,} rows to {message.path}")
        self._status(f"exported {message.rows:,} rows to {message.path}")


def _guess(raw: str) -> object:
    """A parameter typed from its text: integers and floats as such, anything else a string."""
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw
