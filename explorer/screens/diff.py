"""Edge-set diff: pick two edge sets of the run; counts by rank and type, the differing edges
(filterable by type and rank, each opening in the inspector) and the Chakra view."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import (
    Button,
    DataTable,
    Header,
    Input,
    Label,
    Select,
    Static,
    TabbedContent,
    TabPane,
)
from textual.worker import get_current_worker

from tracegraph.queries.diff import EDGE_VIEW, chakra_view, diff_edge_sets
from tracegraph.queries.step import edge_set_names

from .. import keymap
from ..messages import DiffComputed, EdgeSetsListed, EventChosen, QueryFailed
from ..widgets.fit_table import FitTable
from ..widgets.footer import StableFooter
from ..widgets.format import cell, duration
from ..widgets.fresh import StatusLine
from ..widgets.paged_table import PagedTable
from .base import ExplorerScreen

EDGE_HEADERS = ["change", "from", "to", "type", "rank", "A ns", "B ns", "reason"]
ALL = "all types"


class DiffScreen(ExplorerScreen):
    SCOPE = "diff"
    BINDINGS = keymap.bindings("diff")

    def __init__(self) -> None:
        super().__init__()
        self.run_name: str | None = None
        self.listed = False
        self.edges: pa.Table | None = None  # the differing edges of the last diff
        self.shown_edges: pa.Table | None = None  # after the filters

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="diff-pick"):
            yield Label("A", classes="pick-label")
            yield Select[str]([], id="set-a", prompt="edge set A")
            yield Label("B", classes="pick-label")
            yield Select[str]([], id="set-b", prompt="edge set B")
            yield Button("Compare", id="compare", variant="primary")
        yield StatusLine("loading edge sets…", id="diff-note", classes="status")
        with TabbedContent(id="diff-tabs"):
            with TabPane("Counts", id="tab-counts"):
                with VerticalScroll():
                    yield FitTable(id="counts", zebra_stripes=True)
                    yield Label("critical path length per rank", classes="section")
                    yield FitTable(id="lengths", zebra_stripes=True)
            with TabPane("Edges", id="tab-edges"):
                with Horizontal(id="edge-filters"):
                    yield Select[str]([], id="type-filter", prompt=ALL)
                    yield Input(placeholder="rank (all)", id="rank-filter", type="integer")
                yield PagedTable(id="edges", page_size=200, keep=3)
            with TabPane("Chakra", id="tab-chakra"):
                yield Label("sync edges: whole graph vs on the critical path", classes="section")
                yield FitTable(id="chakra", zebra_stripes=True)
        yield StableFooter()

    def sync(self) -> None:
        run = self.explorer.focus_state.run
        if not self.listed or (run and run != self.run_name):
            self.list_edge_sets(run)

    @work(thread=True, exclusive=True, exit_on_error=False, group="diff-list")
    def list_edge_sets(self, run_name: str | None) -> None:
        try:
            run = self.explorer.run_ref(run_name)
            names = edge_set_names(self.explorer.store, run.name) if run else []
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed("the edge sets", str(exc)))
            return
        self.post_message(EdgeSetsListed(run.name if run else "", names))

    def on_edge_sets_listed(self, message: EdgeSetsListed) -> None:
        self.listed, self.run_name = True, message.run
        names = message.names
        options = [(n, n) for n in names]
        set_a, set_b = self.query_one("#set-a", Select), self.query_one("#set-b", Select)
        set_a.set_options(options)
        set_b.set_options(options)
        note = self.query_one("#diff-note", Static)
        if len(names) < 2:
            which = "no edge sets" if not names else f"only one edge set ({names[0]})"
            note.update(
                f"Run '{message.run}' has {which}: build two with `tracegraph edges DB --hta SPEC`"
                " (e.g. two HTA versions) to compare them."
            )
            return
        set_a.value, set_b.value = names[0], names[1]
        note.update(f"{len(names)} edge sets in run '{message.run}': choose A and B, press c.")

    # ---- compare ---------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "compare":
            self.action_compare()

    def action_compare(self) -> None:
        a, b = self.query_one("#set-a", Select).value, self.query_one("#set-b", Select).value
        if not isinstance(a, str) or not isinstance(b, str):
            self.notify("choose two edge sets first", severity="warning")
            return
        self.query_one("#diff-note", Static).update(f"comparing {a} and {b}…")
        self.compare(a, b, self.run_name)

    @work(thread=True, exclusive=True, exit_on_error=False, group="diff")
    def compare(self, a: str, b: str, run: str | None) -> None:
        started = time.perf_counter()
        try:
            diff = diff_edge_sets(self.explorer.store, a, b, run=run or None)
            chakra = chakra_view(self.explorer.store, diff.run, [a, b])
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed(f"the diff of {a} and {b}", str(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(DiffComputed(diff, chakra, time.perf_counter() - started))

    def on_diff_computed(self, message: DiffComputed) -> None:
        diff = message.diff
        self.edges = diff.edges
        _fill(self.query_one("#counts", FitTable), diff.counts)
        _fill(self.query_one("#lengths", FitTable), diff.path_lengths)
        _fill(self.query_one("#chakra", FitTable), message.chakra)
        types = sorted(set(diff.edges["type"].to_pylist()))
        self.query_one("#type-filter", Select).set_options([(t, t) for t in types])
        self.query_one("#diff-note", Static).update(
            f"A = [b]{diff.a}[/b], B = [b]{diff.b}[/b] · {diff.edges.num_rows:,} differing edges"
            f" · {duration(message.elapsed_s)}"
        )
        self._apply_filters()

    # ---- filters and navigation ----------------------------------------------------------------
    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "type-filter":
            self._apply_filters()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "rank-filter":
            self._apply_filters()

    def _apply_filters(self) -> None:
        if self.edges is None:
            return
        edges = self.edges
        kind = self.query_one("#type-filter", Select).value
        if isinstance(kind, str):
            edges = edges.filter(pc.equal(edges["type"], kind))
        rank = self.query_one("#rank-filter", Input).value.strip()
        if rank.lstrip("-").isdigit():
            edges = edges.filter(pc.equal(edges["rank"], int(rank)))
        self.shown_edges = edges
        self.query_one("#edges", PagedTable).show(_edge_rows(edges), EDGE_HEADERS)

    def action_filter(self) -> None:
        self.query_one(TabbedContent).active = "tab-edges"
        self.query_one("#type-filter", Select).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "edges":
            event.stop()
            self._open("src")

    def action_open_source(self) -> None:
        self._open("src")

    def action_open_target(self) -> None:
        self._open("dst")

    def _open(self, side: str) -> None:
        table = self.query_one("#edges", PagedTable)
        index = table.row_index()
        if self.shown_edges is None or index is None:
            self.notify("no differing edge selected (Edges tab)")
            return
        self.post_message(EventChosen(int(self.shown_edges[side][index].as_py())))


def _edge_rows(edges: pa.Table) -> pa.Table:
    """The differing edges as shown (same row order): the ends, "start name", lead."""
    view = edges.select(list(EDGE_VIEW))

    def text(column: str) -> pa.ChunkedArray:  # dictionary-encoded columns as plain strings
        return pc.fill_null(pc.cast(view[column], pa.string()), "")

    def end(side: str) -> pa.ChunkedArray:
        boundary = pc.utf8_rpad(text(f"{side}_boundary"), 5)
        return pc.binary_join_element_wise(boundary, text(f"{side}_name"), " ")

    return pa.table(
        [view["change"], end("src"), end("dst"), view["type"], view["rank"],
         view["a_weight_ns"], view["b_weight_ns"], view["reason"]],
        names=EDGE_HEADERS,
    )  # fmt: skip


def _fill(table: FitTable, data: pa.Table) -> None:
    columns = [[cell(v) for v in data.column(i).to_pylist()] for i in range(data.num_columns)]
    table.fill(data.column_names, [list(r) for r in zip(*columns, strict=True)])
