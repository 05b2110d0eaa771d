"""Event inspector: an event's fields and args, and its neighbours by edge type.

Enter follows the edge under the cursor; Backspace returns along the back stack.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Header, Static
from textual.worker import get_current_worker

from tracegraph.queries.neighbours import EventDetail, event_detail, event_id_of
from tracegraph.queries.runs import ev_idx_of_id, rank_of_id

from .. import keymap
from ..messages import EventLoaded, QueryFailed
from ..widgets.fit_table import Cell, FitTable
from ..widgets.footer import StableFooter
from ..widgets.format import cell, duration, us
from ..widgets.fresh import StatusLine
from .base import ExplorerScreen
from .dialogs import PromptDialog

EMPTY = (
    "No event chosen. Open one from the Step screen (Enter on a critical-path edge or on the "
    "timeline), from the diff, or from a console result with an id column; or press g."
)
MAX_ARGS_LINES = 200
NEIGHBOUR_HEADERS = ["edge", "dir", "rank", "name", "Δt µs", "dur µs", "detail"]


class InspectorScreen(ExplorerScreen):
    SCOPE = "inspector"
    BINDINGS = keymap.bindings("inspector")

    def __init__(self) -> None:
        super().__init__()
        self.detail: EventDetail | None = None
        self.loading_id: int | None = None
        self.back_stack: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusLine(EMPTY, id="event-title", classes="status")
        with Horizontal(id="inspector-body"):
            with VerticalScroll(id="fields-pane"):
                yield StatusLine("", id="fields")
            # the name leads what scrolls: it is what Enter follows
            yield FitTable(id="neighbours", cursor_type="row", zebra_stripes=True, keep=4)
        yield StableFooter()

    def on_mount(self) -> None:
        self.query_one("#neighbours", FitTable).fill(NEIGHBOUR_HEADERS, [])

    def sync(self) -> None:
        wanted = self.explorer.focus_state.event_id
        current = self.detail.id if self.detail else None
        if wanted is not None and wanted != current and wanted != self.loading_id:
            if current is not None:
                self.back_stack.append(current)
            self.open(wanted)

    def open(self, event_id: int) -> None:
        self.loading_id = event_id
        self.query_one("#event-title", Static).update(f"loading event {event_id}…")
        self.load(event_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="inspector")
    def load(self, event_id: int) -> None:
        started = time.perf_counter()
        try:
            detail = event_detail(self.explorer.store, event_id)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed(f"event {event_id}", str(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(EventLoaded(detail, time.perf_counter() - started))

    def query_failed(self, message: QueryFailed) -> None:
        self.loading_id = None
        if self.detail is not None and self.back_stack and self.back_stack[-1] == self.detail.id:
            self.back_stack.pop()  # the failed move pushed the event still shown
        self._title()
        self.show_error(f"Could not load {message.cypher}", message.error)

    def on_event_loaded(self, message: EventLoaded) -> None:
        self.loading_id = None
        detail = message.detail
        ordered = grouped_by_edge_set(_in_order(detail.neighbours))
        self.detail = detail = replace(detail, neighbours=ordered)
        self.explorer.update_focus(event_id=detail.id)
        self._title(message.elapsed_s)
        self.query_one("#fields", Static).update(_fields_text(detail))
        table = self.query_one("#neighbours", FitTable)
        ts = int(detail.fields.get("ts") or 0)
        rows: list[list[Cell]] = [
            [
                n["relation"],
                n["direction"],
                cell(n["rank"]),
                cell(n["name"]),
                "" if n["ts"] is None else us(n["ts"] - ts),
                us(n["dur"]),
                cell(n["detail"]),
            ]
            for n in detail.neighbours.to_pylist()
        ]
        table.fill(NEIGHBOUR_HEADERS, rows, row_keys=[str(i) for i in range(len(rows))])
        if table.row_count:
            table.move_cursor(row=0)
            table.focus()

    def _title(self, elapsed_s: float | None = None) -> None:
        d = self.detail
        title = self.query_one("#event-title", Static)
        if d is None:
            title.update(EMPTY)
            return
        back = f" · back: {len(self.back_stack)}" if self.back_stack else ""
        took = f" · {duration(elapsed_s)}" if elapsed_s is not None else ""
        title.update(
            Text.assemble(
                (d.label, "bold"),
                " ",
                (cell(d.name), "bold"),
                f" · run {d.fields.get('run')} rank {rank_of_id(d.id)} ev_idx {ev_idx_of_id(d.id)}"
                f" · {d.neighbours.num_rows} neighbours{back}{took}",
            )
        )

    # ---- actions ---------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_follow()

    def action_follow(self) -> None:
        table = self.query_one("#neighbours", DataTable)
        if self.detail is None or table.row_count == 0:
            return
        row = self.detail.neighbours.slice(table.cursor_row, 1).to_pylist()[0]
        if row["label"] == "Collective":
            self.notify("a collective is not an event: its participants are listed as peers")
            return
        self.back_stack.append(self.detail.id)
        self.open(int(row["id"]))

    def action_back(self) -> None:
        if not self.back_stack:
            self.notify("back stack is empty")
            return
        self.open(self.back_stack.pop())

    def action_goto(self) -> None:
        def chosen(value: str | None) -> None:
            if not value:
                return
            if self.detail is not None:
                self.back_stack.append(self.detail.id)
            self.resolve_and_open(value, self.explorer.focus_state.run)

        self.app.push_screen(
            PromptDialog("Go to event", "", "an event id, or rank/ev_idx in the current run"),
            chosen,
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="inspector")
    def resolve_and_open(self, value: str, run_name: str | None) -> None:
        started = time.perf_counter()
        try:
            if "/" in value:
                rank, ev_idx = (int(p) for p in value.split("/", 1))
                run = self.explorer.run_ref(run_name)
                if run is None:
                    raise LookupError("the database holds no runs")
                event_id = event_id_of(self.explorer.store, run.name, rank, ev_idx)
            else:
                event_id = int(value)
            detail = event_detail(self.explorer.store, event_id)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed(f"event {value}", str(exc)))
            return
        self.post_message(EventLoaded(detail, time.perf_counter() - started))


def _in_order(neighbours: pa.Table) -> pa.Table:
    """Structural edges, then the edge sets' DEP edges; each group by time.

    Kuzu returns the branches of the neighbour query's UNION ALL in no fixed order.
    """
    dep = pc.starts_with(neighbours["relation"], "DEP ")
    keyed = neighbours.append_column("_dep", dep)
    keys = ["_dep", "relation", "direction", "ts", "id", "detail", "name", "rank", "dur"]
    return keyed.sort_by([(k, "ascending") for k in keys]).drop_columns(["_dep"])


def grouped_by_edge_set(neighbours: pa.Table) -> pa.Table:
    """One row per dependency edge that several edge sets hold alike (same neighbour, direction,
    type and boundaries, critical or not): its relation names them all (`DEP hta-0.5.0, native`),
    where the sets agree on an event's edges, as they mostly do."""
    rows = neighbours.to_pylist()
    out: list[dict] = []
    at: dict[tuple, int] = {}
    for row in rows:
        relation = row["relation"] or ""
        if not relation.startswith("DEP "):
            out.append(row)
            continue
        key = (row["direction"], row["id"], row["detail"])
        if key in at:
            first = out[at[key]]
            first["relation"] = f"{first['relation']}, {relation.removeprefix('DEP ')}"
        else:
            at[key] = len(out)
            out.append(dict(row))
    return pa.Table.from_pylist(out, schema=neighbours.schema)


def _fields_text(detail: EventDetail) -> Text:
    out = Text()
    for key, value in detail.fields.items():
        out.append(f"{key:<11} ", style="bold")
        out.append(f"{value}\n")
    out.append("args\n", style="bold")
    args = json.dumps(detail.args, indent=1, ensure_ascii=False) if detail.args else "{}"
    lines = args.splitlines()
    if len(lines) > MAX_ARGS_LINES:
        lines = lines[:MAX_ARGS_LINES] + [f"… {len(lines) - MAX_ARGS_LINES} more lines"]
    out.append("\n".join(lines))
    return out
