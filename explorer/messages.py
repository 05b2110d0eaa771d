"""Explorer messages, in the past tense: workers post what they found, screens what was chosen.

Workers run in threads and never touch widgets; they post one of these and a handler on the
screen (or the app) updates the UI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from textual.message import Message

from tracegraph.ingest.edgesets.native.segments import Segment
from tracegraph.ingest.store import ResultSet
from tracegraph.queries.diff import EdgeSetDiff
from tracegraph.queries.neighbours import EventDetail
from tracegraph.queries.overview import RunOverview
from tracegraph.queries.report import Report
from tracegraph.queries.runs import RunRef
from tracegraph.queries.step import CriticalPath, StepWindow
from tracegraph.queries.timeline import Timeline

if TYPE_CHECKING:  # the widget module posts messages of this one
    from .widgets.timeline import LaneShapes


@dataclass
class RanksListed(Message):
    """The run's ranks, before its step times are known."""

    run: RunRef
    runs: list[RunRef]


@dataclass
class OverviewLoaded(Message):
    overview: RunOverview
    runs: list[RunRef]
    edge_sets: list[str]
    elapsed_s: float


@dataclass
class GpuBusyLoaded(Message):
    run: str
    busy: pa.Table  # rank, step, busy_ns, share
    elapsed_s: float


@dataclass
class StepsListed(Message):
    """The step windows of one rank and the edge sets of its run; the worker goes on loading
    `step` (or the first) with `edge_set` (None: the run has none)."""

    windows: list[StepWindow]
    edge_sets: list[str]
    step: int | None = None
    edge_set: str | None = None


@dataclass
class CriticalPathLoaded(Message):
    path: CriticalPath | None  # None: the run has no edge set
    window: StepWindow
    verdict: str = ""  # the step across ranks (native edge set), in words; "" when not built
    rows: pa.Table | None = None  # the path's edges as shown (formatted by the worker); None
    # only when there is no path
    segments: tuple[Segment, ...] = ()  # the rank's own path in segments (native sets)
    across: tuple[Segment, ...] = ()  # the step's path across ranks in segments


@dataclass
class TimelineLoaded(Message):
    timeline: Timeline
    window: StepWindow
    shapes: LaneShapes


@dataclass
class EventLoaded(Message):
    detail: EventDetail
    elapsed_s: float


@dataclass
class EdgeSetsListed(Message):
    run: str
    names: list[str]


@dataclass
class DiffComputed(Message):
    diff: EdgeSetDiff
    chakra: pa.Table
    elapsed_s: float


@dataclass
class QueryFinished(Message):
    cypher: str
    result: ResultSet


@dataclass
class QueryFailed(Message):
    """A query or load failed; `interrupted` when it was stopped (Esc or the timeout)."""

    cypher: str
    error: str
    interrupted: bool = False
    by_user: bool = False


@dataclass
class CsvExported(Message):
    path: str
    rows: int


@dataclass
class StepChosen(Message):
    """Show this rank's step on the Step screen."""

    run: str
    rank: int
    step: int | None = None


@dataclass
class EventChosen(Message):
    """Show this event in the inspector."""

    event_id: int


@dataclass
class ReportLoaded(Message):
    report: Report
    elapsed_s: float
