"""The report (`tracegraph report`) of the focused run: findings first, each opening its evidence
in the inspector, then the per-step, temporal, kernel, operator (shapes, roofline, nn.Module
tree), idle, collective and allocator tables."""

from __future__ import annotations

import time

import pyarrow as pa
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Header, Static, TabbedContent, TabPane

from tracegraph.queries.report import Report, build_report
from tracegraph.queries.report.ranks import rank_ranges

from .. import keymap
from ..messages import EventChosen, QueryFailed, ReportLoaded
from ..report_view import TEXT_HIDES, finding_figures, finding_where, module_outline
from ..widgets.fit_table import FitTable
from ..widgets.footer import StableFooter
from ..widgets.format import cell, duration
from ..widgets.fresh import StatusLine
from .base import ExplorerScreen

FINDING_HEADERS = ["saves µs/step", "cost µs/step", "ranks", "step", "kind", "what"]
# the tabs after Findings: report table → tab title
TABS = {
    "steps": "Steps",
    "temporal": "Temporal",
    "top_kernels": "Kernels",
    "op_shapes": "Operators",
    "op_perf": "Roofline",
    "module_tree": "Modules",
    "idle": "Idle",
    "collectives": "Collectives",
    "stragglers": "Stragglers",
    "allocator": "Memory",
}


class ReportScreen(ExplorerScreen):
    SCOPE = "report"
    BINDINGS = keymap.bindings("report")

    def __init__(self) -> None:
        super().__init__()
        self.report: Report | None = None
        self.run_name: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusLine("loading the report…", id="report-note", classes="status")
        with TabbedContent(id="report-tabs"):
            with TabPane("Findings", id="tab-findings"):
                yield FitTable(id="findings", cursor_type="row", zebra_stripes=True)
                yield StatusLine("", id="finding-detail")
            for name, title in TABS.items():
                with TabPane(title, id=f"tab-{name}"):
                    yield FitTable(id=name, zebra_stripes=True, keep=1)
        yield StableFooter()

    def sync(self) -> None:
        run = self.explorer.focus_state.run
        if self.report is None or (run is not None and run != self.run_name):
            self.load(run)

    def action_reload(self) -> None:
        self.load(self.explorer.focus_state.run, reopen=True)

    @work(thread=True, exclusive=True, exit_on_error=False, group="report")
    def load(self, run_name: str | None, reopen: bool = False) -> None:
        started = time.perf_counter()
        try:
            if reopen:
                self.explorer.reopen_if_replaced()
            run = self.explorer.run_ref(run_name)
            if run is None:
                raise LookupError("the database holds no runs")
            report = build_report(self.explorer.db, self.explorer.store, run.name)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed("the report", str(exc)))
            return
        self.post_message(ReportLoaded(report, time.perf_counter() - started))

    def on_report_loaded(self, message: ReportLoaded) -> None:
        report = self.report = message.report
        self.run_name = report.run
        rows = [
            [
                "" if f.saving_ns_per_step is None else f"{f.saving_ns_per_step / 1e3:,.0f}",
                f"{f.cost_ns_per_step / 1e3:,.0f}",
                rank_ranges(f.all_ranks),
                _step(f.step),
                f.kind,
                f.title,
            ]
            for f in report.findings
        ]
        self.query_one("#findings", FitTable).fill(FINDING_HEADERS, rows)
        for name in TABS:
            _fill(self.query_one(f"#{name}", FitTable), report.tables[name])
        self.query_one("#report-note", Static).update(
            Text(
                f"run '{report.run}' · {len(report.ranks)} rank(s) · {len(report.findings)} "
                f"finding(s) · {duration(message.elapsed_s)} · Enter opens a finding's evidence"
            )
        )
        self._show_detail(0)
        self.query_one("#findings", FitTable).focus()  # the arrow keys move in the table

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The table of the tab shown takes the focus (its arrow keys work at once)."""
        pane = event.pane
        if pane is not None:
            tables = pane.query(FitTable)
            if tables:
                tables.first().focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "findings":
            self._show_detail(event.cursor_row)

    def _show_detail(self, row: int) -> None:
        detail = self.query_one("#finding-detail", Static)
        if self.report is None or not self.report.findings:
            detail.update("No findings: every rule is below its threshold (docs/report.md).")
            return
        f = self.report.findings[min(row, len(self.report.findings) - 1)]
        detail.update(
            Text(
                f"{f.title} ({finding_where(f)}; {finding_figures(f)})\n{f.detail}\n"
                f"fix: {f.fix}\n"
                f"evidence: {len(f.evidence_ids)} event(s) · {f.evidence_cypher}"
            )
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "findings":
            event.stop()
            self.action_open_evidence()

    def action_open_evidence(self) -> None:
        if self.report is None or not self.report.findings:
            self.notify("no finding to open")
            return
        row = self.query_one("#findings", DataTable).cursor_row
        finding = self.report.findings[min(max(row, 0), len(self.report.findings) - 1)]
        if not finding.evidence_ids:
            self.notify("this finding names no single event (see its query)")
            return
        self.post_message(EventChosen(finding.evidence_ids[0]))


def _step(step: int | None) -> str:
    return "all" if step is None else str(step)


def _fill(table: FitTable, data: pa.Table) -> None:
    if "module" in data.column_names:  # the tree as an outline: each module under its parent
        data = module_outline(data)
    shown = data.drop_columns([c for c in data.column_names if c in TEXT_HIDES])
    columns = [[cell(v) for v in shown.column(i).to_pylist()] for i in range(shown.num_columns)]
    table.fill(shown.column_names, [list(r) for r in zip(*columns, strict=True)])
