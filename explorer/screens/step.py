"""Step: one rank's step — the critical path of an edge set, and a text timeline.

With a native edge set the path shows as segments (what a person acts on: consecutive path time
under one range, with what fixing it would save), this rank's own path or, `a`, the step's path
across ranks; `w` sorts them by path time, `t` shows the path's edges one by one instead. An
HTA edge set shows its edges.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.widgets import Header, Static
from textual.worker import get_current_worker

from tracegraph.ingest.edgesets.native.report import CROSS_RANK_SUFFIX
from tracegraph.ingest.edgesets.native.segments import Segment
from tracegraph.ingest.python_frames import readable
from tracegraph.ingest.schema import event_key
from tracegraph.queries.crossrank import describe_short, step_verdicts
from tracegraph.queries.step import (
    CriticalPath,
    StepWindow,
    critical_path,
    edge_set_names,
    step_windows,
    stored_segments,
)
from tracegraph.queries.timeline import rank_timeline

from .. import keymap
from ..messages import (
    CriticalPathLoaded,
    EventChosen,
    QueryFailed,
    StepsListed,
    TimelineLoaded,
)
from ..widgets.footer import StableFooter
from ..widgets.format import ms, percent, us
from ..widgets.fresh import StatusLine
from ..widgets.paged_table import PagedTable
from ..widgets.timeline import TimelineStrip, lane_shapes
from .base import ExplorerScreen
from .dialogs import PromptDialog

PATH_HEADERS = ["#", "from", "to", "µs", "share", "type"]
SEGMENT_HEADERS = ["µs", "share", "saves µs", "rank", "segment"]
NO_EDGE_SET = (
    "No edge set in run '{run}', so no critical path: build one with "
    "`tracegraph edges DB --hta HolisticTraceAnalysis==0.5.0` (or --native)."
)


class StepScreen(ExplorerScreen):
    SCOPE = "step"
    BINDINGS = keymap.bindings("step")

    def __init__(self) -> None:
        super().__init__()
        self.shown: tuple[str | None, int | None] = (None, None)  # (run, rank) listed
        self.windows: list[StepWindow] = []
        self.edge_sets: list[str] = []
        self.window: StepWindow | None = None
        self.path: CriticalPath | None = None
        self.loaded: CriticalPathLoaded | None = None
        self.show_edges = False  # `t`: the path's edges instead of its segments
        self.by_weight = False  # `w`: segments by path time, not in path order
        self.across = False  # `a`: the step's path across ranks, not this rank's own
        self.segment_events: list[int | None] = []  # each segment row's range event

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusLine("loading…", id="step-line", classes="status")
        yield StatusLine("", id="path-note", classes="note")
        yield PagedTable(id="path", page_size=200, keep=5)  # the edge type scrolls in last
        yield TimelineStrip(id="timeline")
        yield StableFooter()

    def sync(self) -> None:
        focus = self.explorer.focus_state
        if self.window is None or (focus.run, focus.rank) != self.shown:
            self.list_steps(focus.run, focus.rank, focus.step, focus.edge_set)
        elif focus.step is not None and focus.step != self.window.step:
            self._choose(focus.step)

    @work(thread=True, exclusive=True, exit_on_error=False, group="step-list")
    def list_steps(
        self, run_name: str | None, rank: int | None, step: int | None, edge_set: str | None
    ) -> None:
        """The rank's steps and the run's edge sets, then the chosen step as `load_step` loads
        it, in the same worker (no round trip through a busy UI thread in between)."""
        try:
            run = self.explorer.run_ref(run_name)
            if run is None or not run.ranks:
                self.post_message(QueryFailed("the step", "the database holds no ranks"))
                return
            rank = rank if rank in run.ranks else run.ranks[0]
            windows = step_windows(self.explorer.store, run, rank)
            edge_sets = edge_set_names(self.explorer.store, run.name)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed("the steps", str(exc)))
            return
        if get_current_worker().is_cancelled:
            return
        if edge_set not in edge_sets:
            edge_set = preferred_edge_set(edge_sets)
        self.post_message(StepsListed(windows, edge_sets, step, edge_set))
        if windows:
            self._load_step(_pick(windows, step), edge_set)

    def on_steps_listed(self, message: StepsListed) -> None:
        self.windows, self.edge_sets = message.windows, message.edge_sets
        if not self.windows:
            self.query_one("#step-line", Static).update("this rank has no events")
            return
        first = self.windows[0]
        self.shown = (first.run, first.rank)
        wanted = self.explorer.focus_state.edge_set
        edge_set = wanted if wanted in self.edge_sets else message.edge_set
        self.explorer.update_focus(run=first.run, rank=first.rank, edge_set=edge_set)
        if edge_set == message.edge_set:
            self._choose(message.step, load=False)  # the listing worker goes on loading it
        else:  # another edge set was chosen meanwhile
            self._choose(message.step)

    def _choose(self, step: int | None, load: bool = True) -> None:
        window = _pick(self.windows, step)
        self.window = window
        self.explorer.update_focus(step=window.step)
        self._describe()
        self.query_one("#path-note", Static).update("loading…")
        if load:
            # the listing worker may still be loading its first step (another edge set's path)
            self.workers.cancel_group(self, "step-list")
            self.load_step(window, self.explorer.focus_state.edge_set)

    def _describe(self) -> None:
        w = self.window
        if w is None:
            return
        at = self.windows.index(w) + 1
        edge_set = self.explorer.focus_state.edge_set or "none"
        self.query_one("#step-line", Static).update(
            f"run [b]{w.run}[/b] · rank [b]{w.rank}[/b] · [b]{w.name}[/b]"
            f" ({at}/{len(self.windows)}) · {ms(w.dur)} ms · edge set [b]{edge_set}[/b]"
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="step")
    def load_step(self, window: StepWindow, edge_set: str | None) -> None:
        self._load_step(window, edge_set)

    def _load_step(self, window: StepWindow, edge_set: str | None) -> None:
        """The critical path (when an edge set exists), then the timeline marked with it
        (workers only)."""
        store = self.explorer.store
        try:
            path = critical_path(store, window, edge_set) if edge_set else None
            verdicts = step_verdicts(store, window.run)
            found = next((v for v in verdicts if v.step == window.name), None)
            verdict = describe_short(found) if found is not None else ""
            rows = _path_rows(path.edges) if path is not None else None
            segments = (
                stored_segments(store, window.run, edge_set, window.rank, window.name)
                if edge_set
                else ()
            )
            across = found.segments if found is not None else ()
            if get_current_worker().is_cancelled:
                return
            self.post_message(CriticalPathLoaded(path, window, verdict, rows, segments, across))
            marks: set[int] = set()
            if path is not None:
                marks = set(path.edges["src_id"].to_pylist())
                marks |= set(path.edges["dst_id"].to_pylist())
            timeline = rank_timeline(
                store, window.run_idx, window.rank, window.ts, window.end, frozenset(marks)
            )
            shapes = lane_shapes(timeline)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog
            self.post_message(QueryFailed("the step", str(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(TimelineLoaded(timeline, window, shapes))

    def on_critical_path_loaded(self, message: CriticalPathLoaded) -> None:
        if message.window != self.window:
            return
        self.path = message.path
        note = self.query_one("#path-note", Static)
        table = self.query_one("#path", PagedTable)
        table.display = message.path is not None  # without a path the timeline takes the room
        if message.path is None:
            note.update(NO_EDGE_SET.format(run=message.window.run))
            table.show(pa.table({"critical path": pa.array([], pa.string())}))
            return
        edges = message.path.edges
        if edges.num_rows == 0:
            note.update(
                f"No critical-path edges of {message.path.edge_set} in this step: its analysis "
                "window may be another step (see `tracegraph info`)."
            )
        else:
            note.update(
                f"critical path of [b]{message.path.edge_set}[/b]: {edges.num_rows} edges, "
                f"{ms(message.path.length_ns)} ms = "
                f"{percent(message.path.length_ns / (message.window.dur or 1))} of the step"
                + (f"\n{escape(message.verdict)}" if message.verdict else "")
            )
        assert message.rows is not None  # formatted by the worker with the path
        self.loaded = message
        self._show_path()

    def _show_path(self) -> None:
        """The loaded path as segments (native sets), or as edges."""
        message = self.loaded
        if message is None or message.rows is None:
            return
        table = self.query_one("#path", PagedTable)
        segments = message.across if self.across else message.segments
        total = sum(seg.ns for seg in segments)
        if self.show_edges or not segments:
            table.show(message.rows, PATH_HEADERS)
            return
        rows, self.segment_events = _segment_rows(
            segments, total, self.by_weight, message.window.run_idx
        )
        table.show(rows, SEGMENT_HEADERS)

    def on_timeline_loaded(self, message: TimelineLoaded) -> None:
        if message.window == self.window:
            self.query_one(TimelineStrip).show(message.timeline, message.shapes)

    # ---- actions -------------------------------------------------------------------------------
    def action_previous_step(self) -> None:
        self._move(-1)

    def action_next_step(self) -> None:
        self._move(1)

    def _move(self, delta: int) -> None:
        if self.window is None:
            return
        at = self.windows.index(self.window) + delta
        if 0 <= at < len(self.windows):
            self._choose(self.windows[at].step)

    def action_next_edge_set(self) -> None:
        if not self.edge_sets:
            self.notify("this run has no edge sets")
            return
        current = self.explorer.focus_state.edge_set
        at = self.edge_sets.index(current) + 1 if current in self.edge_sets else 0
        self.explorer.update_focus(edge_set=self.edge_sets[at % len(self.edge_sets)])
        if self.window is not None:
            self._choose(self.window.step)

    def action_toggle_edges(self) -> None:
        self.show_edges = not self.show_edges
        self._show_path()

    def action_sort_by_weight(self) -> None:
        self.by_weight = not self.by_weight
        self.notify("segments by path time" if self.by_weight else "segments in path order")
        self._show_path()

    def action_toggle_across(self) -> None:
        if self.loaded is None or not self.loaded.across:
            self.notify("no path across ranks for this step (build `edges --native --all-steps`)")
            return
        self.across = not self.across
        self.notify(
            "the step's path across ranks"
            if self.across
            else f"rank {self.loaded.window.rank}'s own path"
        )
        self._show_path()

    def action_choose_rank(self) -> None:
        def chosen(value: str | None) -> None:
            if value is None:
                return
            if not value.strip().isdigit():
                self.notify(f"not a rank: {value!r}", severity="error")
                return
            self.explorer.update_focus(rank=int(value))
            step = self.window.step if self.window else None
            focus = self.explorer.focus_state
            self.list_steps(focus.run, int(value), step, focus.edge_set)

        current = "" if self.window is None else str(self.window.rank)
        self.app.push_screen(PromptDialog("Show rank", current, "a rank number"), chosen)

    def action_inspect(self) -> None:
        focused = self.focused
        if isinstance(focused, TimelineStrip):
            focused.action_inspect()
            return
        self._inspect_path_row()

    def on_data_table_row_selected(self, event: PagedTable.RowSelected) -> None:
        event.stop()
        self._inspect_path_row()

    def _inspect_path_row(self) -> None:
        table = self.query_one("#path", PagedTable)
        index = table.row_index()
        if self.path is None or index is None or self.window is None:
            return
        if table.headers == SEGMENT_HEADERS:  # a segment: its range's event
            event = self.segment_events[index] if index < len(self.segment_events) else None
            if event is not None:
                self.post_message(EventChosen(event))
            return
        if index >= self.path.edges.num_rows:
            return
        self.post_message(EventChosen(int(self.path.edges["src_id"][index].as_py())))

    def action_zoom_in(self) -> None:
        self.query_one(TimelineStrip).action_zoom_in()

    def action_zoom_out(self) -> None:
        self.query_one(TimelineStrip).action_zoom_out()

    def action_pan_left(self) -> None:
        self.query_one(TimelineStrip).action_pan_left()

    def action_pan_right(self) -> None:
        self.query_one(TimelineStrip).action_pan_right()

    def action_reset_zoom(self) -> None:
        self.query_one(TimelineStrip).action_reset_zoom()


def preferred_edge_set(edge_sets: list[str]) -> str | None:
    """The set the screen opens on (where the user chose none): tracegraph's own native set,
    else another per-rank native set, else the first (a cross-rank set holds only the steps'
    paths across ranks)."""
    per_rank = [s for s in edge_sets if not s.endswith(CROSS_RANK_SUFFIX)]
    for chosen in (
        [s for s in per_rank if s == "native"],
        [s for s in per_rank if s.startswith("native")],
        per_rank,
        edge_sets,
    ):
        if chosen:
            return chosen[0]
    return None


def _pick(windows: list[StepWindow], step: int | None) -> StepWindow:
    """The window of `step`, or the first."""
    return next((w for w in windows if w.step == step), windows[0])


def _segment_rows(
    segments: tuple[Segment, ...], total: int, by_weight: bool, run_idx: int
) -> tuple[pa.Table, list[int | None]]:
    """Two levels of segments, parts indented under their segment (by path time with
    `by_weight`, else in path order), and each row's range event (None: no range)."""
    out: dict[str, list[str]] = {k: [] for k in ("µs", "share", "saves", "rank", "segment")}
    events: list[int | None] = []

    def add(seg: Segment, level: int) -> None:
        out["µs"].append(us(seg.ns))
        out["share"].append(percent(seg.ns / total) if total else "")
        out["saves"].append("" if seg.saving_ns is None else us(seg.saving_ns))
        out["rank"].append("" if seg.rank < 0 else str(seg.rank))
        out["segment"].append("  " * level + readable(seg.name))
        known = seg.ev_idx is not None and seg.rank >= 0
        events.append(int(event_key(run_idx, seg.rank, seg.ev_idx)) if known else None)  # type: ignore[arg-type]

    def ordered(items: tuple[Segment, ...]) -> list[Segment]:
        return sorted(items, key=lambda x: -x.ns) if by_weight else list(items)

    for seg in ordered(segments):
        add(seg, 0)
        for part in ordered(seg.children):
            add(part, 1)
    return pa.table({k: pa.array(v, pa.string()) for k, v in out.items()}), events


def _path_rows(edges: pa.Table) -> pa.Table:
    """Display columns of the critical-path edges (same row order as `edges`), built column by
    column (thousands of edges: a worker's tens of ms row by row, holding the UI's GIL)."""

    def text(column: str) -> pa.ChunkedArray:
        return pc.fill_null(edges[column], "None")  # as str() writes a missing value

    def end(side: str) -> pa.ChunkedArray:
        # label initial and boundary first: a narrow column cuts the end of the name only
        initial = pc.utf8_slice_codeunits(text(f"{side}_label"), 0, 1)
        boundary = pc.utf8_rpad(text(f"{side}_boundary"), 5)
        return pc.binary_join_element_wise(initial, boundary, text(f"{side}_name"), " ")

    return pa.table(
        {
            "order": pc.cast(edges["path_order"], pa.int64()),
            "from": end("src"),
            "to": end("dst"),
            "weight": pa.array([us(v) for v in edges["weight_ns"].to_pylist()], pa.string()),
            "share": pa.array([percent(v) for v in edges["share"].to_pylist()], pa.string()),
            "type": pc.cast(edges["type"], pa.string()),
        }
    )
