"""A text timeline of one rank's step: CPU threads and GPU streams as rows, zoomed with keys.

CPU rows show nesting depth as block height (deeper ranges are taller), GPU rows show busy time.
Events on the critical path are drawn in the accent colour. The cursor sits at the middle of the
view; the status line names the event under it on the selected row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from tracegraph.queries.timeline import Lane, Timeline

from .. import keymap
from ..messages import EventChosen
from .format import append_runs, ms

LABEL_WIDTH = 10
BLOCKS = "▁▂▃▄▅▆▇█"
MIN_SPAN_NS = 1_000


@dataclass(frozen=True)
class LaneShapes:
    """Per lane of a timeline: each event's nesting depth, and whether it is on the critical
    path."""

    depths: list[np.ndarray]
    critical: list[np.ndarray]


def lane_shapes(timeline: Timeline) -> LaneShapes:
    """What drawing `timeline` needs beyond its events (workers: tens of ms on a big step)."""
    marks = np.fromiter(timeline.critical_ids, dtype=np.int64, count=len(timeline.critical_ids))
    return LaneShapes(
        [_nesting_depth(lane) for lane in timeline.lanes],
        [np.isin(lane.ids, marks) for lane in timeline.lanes],
    )


class TimelineStrip(Widget, can_focus=True):
    """Lanes of one time window; `+`/`-` zoom, arrows pan and pick a lane, Enter inspects."""

    BINDINGS = keymap.bindings("timeline")

    view_start: reactive[int] = reactive(0)
    view_end: reactive[int] = reactive(1)
    lane: reactive[int] = reactive(0)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.timeline: Timeline | None = None
        self._depths: list[np.ndarray] = []
        self._critical: list[np.ndarray] = []
        self.message = "no step loaded"

    def show(self, timeline: Timeline, shapes: LaneShapes | None = None) -> None:
        """Show a new window, zoomed out to all of it; `shapes` are `lane_shapes(timeline)`
        (computed here if not given: a worker should, they take tens of ms)."""
        self.timeline = timeline
        shapes = shapes or lane_shapes(timeline)
        self._depths, self._critical = shapes.depths, shapes.critical
        self.lane = 0
        self.view_start = timeline.start_ns
        self.view_end = max(timeline.end_ns, timeline.start_ns + 1)
        self.refresh(layout=True)

    def show_message(self, message: str) -> None:
        self.timeline = None
        self.message = message
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        lanes = len(self.timeline.lanes) if self.timeline else 0
        return lanes + 2

    # ---- actions ---------------------------------------------------------------------------
    def _set_view(self, start: int, end: int) -> None:
        if self.timeline is None:
            return
        lo, hi = self.timeline.start_ns, max(self.timeline.end_ns, self.timeline.start_ns + 1)
        span = max(MIN_SPAN_NS, min(end - start, hi - lo))
        start = min(max(start, lo), hi - span)
        self.view_start, self.view_end = int(start), int(start + span)

    def action_zoom_in(self) -> None:
        quarter = (self.view_end - self.view_start) // 4
        self._set_view(self.view_start + quarter, self.view_end - quarter)

    def action_zoom_out(self) -> None:
        half = (self.view_end - self.view_start) // 2
        self._set_view(self.view_start - half, self.view_end + half)

    def action_pan_left(self) -> None:
        step = (self.view_end - self.view_start) // 4
        self._set_view(self.view_start - step, self.view_end - step)

    def action_pan_right(self) -> None:
        step = (self.view_end - self.view_start) // 4
        self._set_view(self.view_start + step, self.view_end + step)

    def action_reset_zoom(self) -> None:
        if self.timeline is not None:
            self._set_view(self.timeline.start_ns, self.timeline.end_ns)

    def action_lane_up(self) -> None:
        self.lane = max(0, self.lane - 1)

    def action_lane_down(self) -> None:
        if self.timeline is not None:
            self.lane = min(len(self.timeline.lanes) - 1, self.lane + 1)

    def action_inspect(self) -> None:
        hit = self.event_at_cursor()
        if hit is not None:
            self.post_message(EventChosen(hit[0]))

    # ---- rendering -------------------------------------------------------------------------
    @property
    def cursor_ns(self) -> int:
        return (self.view_start + self.view_end) // 2

    def event_at_cursor(self) -> tuple[int, str] | None:
        """(id, name) of the innermost event under the cursor on the selected lane."""
        if self.timeline is None or not self.timeline.lanes:
            return None
        lane = self.timeline.lanes[self.lane]
        at = lane.at(self.cursor_ns)
        return None if at is None else (int(lane.ids[at]), lane.names[at])

    def render(self) -> Text:
        if self.timeline is None:
            return Text(self.message, style="italic")
        # lane names get more room on a wide terminal (up to an eighth of it)
        longest = max((len(lane.key) for lane in self.timeline.lanes), default=0)
        label_width = max(LABEL_WIDTH, min(longest, self.size.width // 8))
        width = max(10, self.size.width - label_width - 1)
        t0 = self.timeline.start_ns
        out = Text(no_wrap=True, overflow="crop")
        end = f"{ms(self.view_end - t0, 3)} ms"
        axis = f"{ms(self.view_start - t0, 3)} ms".ljust(width // 2)
        axis += f"│ {ms(self.cursor_ns - t0, 3)}".ljust(width - width // 2 - len(end)) + end
        out.append(" " * (label_width + 1) + axis[:width] + "\n", style="dim")
        for index, lane in enumerate(self.timeline.lanes):
            label_style = "reverse" if index == self.lane and self.has_focus else "bold"
            out.append(lane.key[:label_width].ljust(label_width), style=label_style)
            out.append(" ")
            self._render_lane(out, index, width)
            out.append("\n")
        hit = self.event_at_cursor()
        lane_key = self.timeline.lanes[self.lane].key if self.timeline.lanes else "-"
        where = f"{lane_key}: {hit[1]}" if hit else f"{lane_key}: idle"
        out.append(
            f"cursor {ms(self.cursor_ns - t0, 3)} ms · {where}"[: self.size.width], style="italic"
        )
        return out

    def _render_lane(self, out: Text, index: int, width: int) -> None:
        lane = self.timeline.lanes[index]  # type: ignore[union-attr]
        depth, critical = self._depths[index], self._critical[index]
        height = _column_max(lane, depth + 1, self.view_start, self.view_end, width)
        marked = _column_max(lane, critical.astype(np.int64), self.view_start, self.view_end, width)
        append_runs(out, _cells(lane.kind, height.tolist(), marked.tolist(), width // 2))


def _cells(
    kind: str, heights: list[int], marked: list[int], centre: int
) -> Iterator[tuple[str, str]]:
    """(character, style) per column of a lane: its block, red on the critical path, the
    cursor's column underlined."""
    colour = "cyan" if kind == "gpu" else "green"
    for col, (level, mark) in enumerate(zip(heights, marked, strict=True)):
        if level == 0:
            char = "·" if col == centre else " "
        elif kind == "gpu":
            char = "█"
        else:
            char = BLOCKS[min(level, len(BLOCKS)) - 1]
        style = "bold red" if mark else colour
        yield char, (style + " underline" if col == centre else style)


def _column_max(lane: Lane, values: np.ndarray, start: int, end: int, width: int) -> np.ndarray:
    """Per column of the view, the max of `values` over the events covering it (0 if none)."""
    out = np.zeros(width, dtype=np.int64)
    visible = (lane.ends > start) & (lane.starts < end) & (values > 0)
    if not visible.any():
        return out
    scale = width / max(1, end - start)
    c0 = np.clip(((lane.starts[visible] - start) * scale).astype(np.int64), 0, width - 1)
    c1 = np.clip(np.ceil((lane.ends[visible] - start) * scale).astype(np.int64), 1, width)
    c1 = np.maximum(c1, c0 + 1)
    vals = values[visible]
    for level in np.unique(vals):
        pick = vals == level
        diff = np.zeros(width + 1, dtype=np.int64)
        np.add.at(diff, c0[pick], 1)
        np.add.at(diff, c1[pick], -1)
        covered = np.cumsum(diff[:-1]) > 0
        out[covered] = np.maximum(out[covered], level)
    return out


def _nesting_depth(lane: Lane) -> np.ndarray:
    """Depth of each event in its lane (0 = top level), from time nesting of sorted starts."""
    stack: list[int] = []
    push, pop = stack.append, stack.pop
    depths: list[int] = []
    for start, end in zip(lane.starts.tolist(), lane.ends.tolist(), strict=True):
        while stack and stack[-1] <= start:
            pop()
        depths.append(len(stack))
        push(end)
    return np.array(depths, dtype=np.int64)
