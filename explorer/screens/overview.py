"""Overview: the runs, and per rank and step the step time; stragglers and the spread per step,
and each rank's step times as a chart."""

from __future__ import annotations

import time

import pyarrow as pa
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Header, Label, Static
from textual.worker import get_current_worker

from tracegraph.queries.crossrank import StepVerdict
from tracegraph.queries.overview import RunOverview, gpu_busy, run_overview
from tracegraph.queries.report.ranks import ranks_phrase
from tracegraph.queries.step import edge_set_names

from .. import keymap
from ..messages import GpuBusyLoaded, OverviewLoaded, QueryFailed, RanksListed, StepChosen
from ..widgets.fit_table import Cell, FitTable
from ..widgets.footer import StableFooter
from ..widgets.format import duration, ms, percent, sparkline
from ..widgets.fresh import StatusLine
from ..widgets.step_chart import StepChart, rank_steps
from .base import DatabaseUnusable, ExplorerScreen


def _step_header(step: dict[str, object]) -> str:
    return str(step["name"]).replace("ProfilerStep", "step")


def _straggler_cell(verdict: StepVerdict | None) -> str | Text:
    """ "rank 2 +40.0" (ms after the others' median arrival), from the native edge set."""
    if verdict is None:
        return "—"
    s = verdict.straggler
    if s is None:
        return "none"
    return Text(f"rank {s['rank']} +{ms(int(s['lateness_ns']))}", style="bold red")  # type: ignore[call-overload]


class OverviewScreen(ExplorerScreen):
    SCOPE = "overview"
    BINDINGS = keymap.bindings("overview")

    def __init__(self) -> None:
        super().__init__()
        self.run_name: str | None = None
        self.loaded: OverviewLoaded | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusLine("loading…", id="run-line", classes="status")
        yield Label("Steps across ranks: spread = (max − min) / median", classes="section")
        yield FitTable(id="steps", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="by-rank"):  # side by side on a wide terminal, stacked otherwise
            with Vertical(id="ranks-pane"):
                yield Label("Step time per rank (ms), slowest per step in red", classes="section")
                yield FitTable(id="ranks", cursor_type="cell", zebra_stripes=True, fixed_columns=1)
            with Vertical(id="chart-pane"):
                yield Label(
                    "Step-time distribution per rank, the slowest of a step in red",
                    classes="section",
                )
                with VerticalScroll(id="chart-scroll"):
                    yield StepChart(id="chart")
        yield Label(
            "Start offset vs the earliest rank / wait in collectives (ms), per rank and step",
            classes="section",
        )
        yield FitTable(id="waits", cursor_type="cell", zebra_stripes=True, fixed_columns=1)
        yield StableFooter()

    def sync(self) -> None:
        wanted = self.explorer.focus_state.run
        if self.loaded is None or (wanted and wanted != self.run_name):
            self.load(wanted)

    @work(thread=True, exclusive=True, exit_on_error=False, group="overview")
    def load(self, run_name: str | None, reopen: bool = False) -> None:
        """Runs, step times and edge sets, then GPU busy shares (two messages); with `reopen`,
        from the database a write put in place of the one read so far."""
        started = time.perf_counter()
        try:
            if reopen:
                self.explorer.reopen_if_replaced()
            runs = self.explorer.runs()
            run = self.explorer.run_ref(run_name)
            if run is None:
                # the database cannot be explored: the app explains why, once (not a QueryFailed,
                # whose dialog would reload the overview, fail again and reopen when closed)
                why = self.explorer.database_problem() or "the database holds no runs"
                self.post_message(DatabaseUnusable(why))
                return
            self.post_message(RanksListed(run, runs))
            overview = run_overview(self.explorer.store, run)
            edge_sets = edge_set_names(self.explorer.store, run.name)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog, the app stays up
            self.post_message(QueryFailed("the overview", str(exc)))
            return
        if get_current_worker().is_cancelled:
            return
        self.post_message(OverviewLoaded(overview, runs, edge_sets, time.perf_counter() - started))
        started = time.perf_counter()
        try:
            busy = gpu_busy(self.explorer.store, run, overview.step_times)
        except Exception as exc:  # noqa: BLE001
            self.post_message(QueryFailed("GPU busy time", str(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(GpuBusyLoaded(run.name, busy, time.perf_counter() - started))

    def on_ranks_listed(self, message: RanksListed) -> None:
        if self.loaded is not None and self.loaded.overview.run == message.run:
            return
        run = message.run
        self.query_one("#run-line", Static).update(
            f"run [b]{run.name}[/b] · {len(run.ranks)} rank(s) of world {run.world_size}"
            f" · {run.events:,} events · loading step times…"
        )
        self.query_one("#ranks", FitTable).fill(
            ["rank", "step times"],
            [[str(rank), "…"] for rank in run.ranks],
            column_keys=["rank", "pending"],
            row_keys=[str(rank) for rank in run.ranks],
        )

    def on_overview_loaded(self, message: OverviewLoaded) -> None:
        self.loaded = message
        ov = message.overview
        self.run_name = ov.run.name
        if self.explorer.focus_state.run is None:
            self.explorer.update_focus(run=ov.run.name)
        sets = ", ".join(message.edge_sets) or "none"
        others = (
            f" · run {message.runs.index(ov.run) + 1} of {len(message.runs)} (r: next)"
            if (len(message.runs) > 1)
            else ""
        )
        self.query_one("#run-line", Static).update(
            f"run [b]{ov.run.name}[/b] · {len(ov.run.ranks)} rank(s) of world {ov.run.world_size}"
            f" · {ov.run.events:,} events{_summaries(ov.run.summarised)} · "
            f"{ov.steps.num_rows} step(s) · edge sets: {sets}"
            f"{others} · {duration(message.elapsed_s)}"
        )
        self._fill_steps(ov.steps, ov.verdicts)
        self._fill_ranks(ov.step_times, ov.steps)
        self._fill_waits(ov)
        self.query_one(StepChart).show(rank_steps(ov.step_times, ov.steps))

    def _fill_steps(self, steps: pa.Table, verdicts: dict[str, StepVerdict]) -> None:
        # the straggler (who the others waited for) first: in a synchronous job the step
        # times are alike, and at 80 columns the later columns are what gets cut
        headers = [
            "step",
            "ranks",
            "straggler, late ms",
            "median ms",
            "spread",
            "min ms",
            "max ms",
            "slowest",
            "distribution",
        ]
        rows: list[list[Cell]] = [
            [
                row["name"],
                str(row["ranks"]),
                _straggler_cell(verdicts.get(row["name"])),
                ms(row["median_ns"]),
                percent(row["spread"]),
                ms(row["min_ns"]),
                Text(ms(row["max_ns"]), style="bold red"),
                Text(f"rank {row['slowest_rank']}", style="bold red"),
                sparkline(row["histogram"]),
            ]
            for row in steps.to_pylist()
        ]
        keys = [str(s) for s in steps["step"].to_pylist()]
        self.query_one("#steps", FitTable).fill(headers, rows, row_keys=keys)

    def _fill_waits(self, ov: RunOverview) -> None:
        """Per rank and step: how late it started, and how long it waited in collectives."""
        steps = ov.steps.to_pylist()
        offsets = ov.start_offsets()
        rows: list[list[Cell]] = []
        for rank in ov.run.ranks:
            cells: list[Cell] = [str(rank)]
            for s in steps:
                verdict = ov.verdicts.get(s["name"])
                wait = verdict.wait_ns.get(rank) if verdict else None
                late = (
                    verdict is not None
                    and verdict.straggler is not None
                    and (verdict.straggler["rank"] == rank)
                )
                waited = ms(wait) if wait is not None else "—"
                text = f"+{ms(offsets.get((rank, s['step'])))} / {waited}"
                cells.append(Text(text, style="bold red" if late else ""))
            rows.append(cells)
        self.query_one("#waits", FitTable).fill(
            ["rank", *(_step_header(s) for s in steps)],
            rows,
            column_keys=["rank", *(f"step{s['step']}" for s in steps)],
            row_keys=[str(rank) for rank in ov.run.ranks],
        )

    def _fill_ranks(self, times: pa.Table, steps: pa.Table) -> None:
        step_rows = steps.to_pylist()
        slowest = {s["step"]: s["slowest_rank"] for s in step_rows}
        fastest = {s["step"]: s["fastest_rank"] for s in step_rows}
        by_rank: dict[int, dict[int, int]] = {}
        for r in times.to_pylist():
            by_rank.setdefault(r["rank"], {})[r["step"]] = r["dur"]
        rows: list[list[Cell]] = []
        for rank, durs in sorted(by_rank.items()):
            cells: list[Cell] = [str(rank)]
            for s in step_rows:
                value = ms(durs.get(s["step"]))
                style = (
                    "bold red"
                    if slowest[s["step"]] == rank
                    else "green"
                    if fastest[s["step"]] == rank
                    else ""
                )
                cells.append(Text(value, style=style))
            cells.append(ms(sum(durs.values()) / max(1, len(durs))))
            cells.append("…")
            rows.append(cells)
        self.query_one("#ranks", FitTable).fill(
            ["rank", *(_step_header(s) for s in step_rows), "mean ms", "GPU busy"],
            rows,
            column_keys=["rank", *(f"step{s['step']}" for s in step_rows), "mean", "busy"],
            row_keys=[str(rank) for rank in sorted(by_rank)],
        )

    def on_gpu_busy_loaded(self, message: GpuBusyLoaded) -> None:
        if message.run != self.run_name:
            return
        table = self.query_one("#ranks", FitTable)
        per_rank: dict[int, list[int]] = {}
        assert self.loaded is not None
        times = self.loaded.overview.step_times.to_pylist()
        durs = {(r["rank"], r["step"]): r["dur"] for r in times}
        for r in message.busy.to_pylist():
            acc = per_rank.setdefault(r["rank"], [0, 0])
            acc[0] += r["busy_ns"]
            acc[1] += durs.get((r["rank"], r["step"]), 0)
        no_gpu = not any(busy for busy, _ in per_rank.values())  # a CPU-only run
        for rank, (busy, total) in per_rank.items():
            if str(rank) in table.rows:
                shown = "no GPU" if no_gpu else percent(busy / total if total else None)
                table.update_cell(str(rank), "busy", shown)

    # ---- navigation ----------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "steps" and self.loaded is not None:
            step = int(str(event.row_key.value))
            steps = self.loaded.overview.steps.to_pylist()
            slowest = next(s["slowest_rank"] for s in steps if s["step"] == step)
            self.post_message(StepChosen(self.loaded.overview.run.name, slowest, step))

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        if event.data_table.id == "ranks" and self.loaded is not None:
            column = str(event.cell_key.column_key.value)
            step = int(column[4:]) if column.startswith("step") else None
            rank = int(str(event.cell_key.row_key.value))
            self.post_message(StepChosen(self.loaded.overview.run.name, rank, step))

    def action_open_step(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable):
            focused.action_select_cursor()

    def action_next_run(self) -> None:
        if self.loaded is None or len(self.loaded.runs) < 2:
            self.notify("this database holds one run")
            return
        names = [r.name for r in self.loaded.runs]
        following = names[(names.index(self.run_name or names[0]) + 1) % len(names)]
        self.explorer.update_focus(run=following, rank=None, step=None)
        self.load(following)

    def action_reload(self) -> None:
        self.load(self.run_name, reopen=True)

    def action_load_full_ranks(self) -> None:
        """A summary run (`ingest --summary`): load the events of the ranks its report points
        at, and a typical one (`ingest --full-ranks auto`), then show the run again."""
        run = self.loaded.overview.run if self.loaded is not None else None
        if run is None or not run.summarised:
            self.notify("every rank of this run has its events loaded")
            return
        if self.explorer.served:
            self.notify("a served explorer writes nothing: run `tracegraph ingest --db DB "
                        "--full-ranks auto` on the server")  # fmt: skip
            return
        self.notify(f"loading the ranks run {run.name}'s summary points at…")
        self._load_full_ranks(run.name)

    @work(thread=True, exclusive=True, exit_on_error=False, group="full-ranks")
    def _load_full_ranks(self, run: str) -> None:
        import tracegraph

        try:
            full = tracegraph.open(self.explorer.db).load_full_ranks("auto", run=run)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog, the app stays up
            self.post_message(QueryFailed("loading full ranks", str(exc)))
            return
        self.app.call_from_thread(
            self.notify, f"loaded {ranks_phrase(full.ranks)} in full: {full.events:,} events"
        )
        self.app.call_from_thread(self.load, run, True)


def _summaries(ranks: tuple[int, ...]) -> str:
    """What a header says of a run's summary ranks (`ingest --summary`)."""
    if not ranks:
        return ""
    return f" (+ {len(ranks):,} summary rank(s), events not loaded; f: load those that matter)"
