"""Step times per rank as a chart: a row per rank, a histogram of its step times on one axis.

All ranks share the axis (the run's fastest to slowest step) and the bar scale, so a rank whose
steps sit to the right is the slow one; a bar is red where the rank was the slowest of a step
in it. The axis takes the widget's width: a wider terminal bins the times more finely.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from rich.text import Text
from textual.geometry import Size

from .format import append_runs, ms
from .fresh import FreshLayout

BARS = "▁▂▃▄▅▆▇█"
RANK_WIDTH = 6  # "rank 12" right-aligned in this many cells, then a space
STATS_WIDTH = 11  # " median ms" column after the bars
MIN_BINS = 8


@dataclass(frozen=True)
class RankSteps:
    """One rank's step times (ns) and, per step, whether it was the slowest rank of it."""

    rank: int
    durs: tuple[int, ...]
    slowest: tuple[bool, ...]


def rank_steps(step_times: pa.Table, steps: pa.Table) -> list[RankSteps]:
    """Per rank, from the overview's step times (rank, step, dur) and spread (step, slowest)."""
    slowest = {s["step"]: s["slowest_rank"] for s in steps.to_pylist()}
    by_rank: dict[int, list[tuple[int, bool]]] = {}
    for r in step_times.to_pylist():
        by_rank.setdefault(r["rank"], []).append((r["dur"], slowest.get(r["step"]) == r["rank"]))
    return [
        RankSteps(rank, tuple(d for d, _ in rows), tuple(s for _, s in rows))
        for rank, rows in sorted(by_rank.items())
    ]


def chart(ranks: list[RankSteps], width: int) -> Text:
    """The axis line, then a line per rank, each `width` cells wide."""
    bins = max(MIN_BINS, width - RANK_WIDTH - 1 - STATS_WIDTH)
    every = np.array([d for r in ranks for d in r.durs], dtype=np.float64)
    out = Text(no_wrap=True, overflow="crop")
    if every.size == 0:
        out.append("no step times", style="italic")
        return out
    lo, hi = float(every.min()), float(every.max())
    left, right = f"{ms(lo)} ms", f"{ms(hi)} ms" if hi > lo else ""
    axis = left + right.rjust(bins - len(left)) if bins > len(left) + len(right) else left
    out.append("rank".rjust(RANK_WIDTH) + " ", style="bold")
    out.append(axis[:bins].ljust(bins), style="dim")
    out.append(" median ms".rjust(STATS_WIDTH), style="bold")
    counts = [_bin_counts(r, lo, hi, bins) for r in ranks]
    top = max((int(c.max()) for c, _ in counts), default=1) or 1
    marked = len(ranks) > 1
    for r, (count, slow) in zip(ranks, counts, strict=True):
        out.append("\n" + str(r.rank).rjust(RANK_WIDTH) + " ", style="bold")
        append_runs(out, _bars(count.tolist(), slow.tolist(), top, marked))
        out.append(ms(float(np.median(r.durs))).rjust(STATS_WIDTH))
    return out


def _bars(counts: list[int], slow: list[bool], top: int, marked: bool) -> Iterator[tuple[str, str]]:
    """(character, style) per bin: a bar as high as its count, red where a step was slowest."""
    for n, is_slow in zip(counts, slow, strict=True):
        if n == 0:
            yield "·", "dim"
        else:
            bar = BARS[min(len(BARS), math.ceil(n / top * len(BARS))) - 1]
            yield bar, "bold red" if marked and is_slow else "cyan"


def _bin_counts(r: RankSteps, lo: float, hi: float, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps per bin, and whether the rank was the slowest of a step in the bin."""
    durs = np.array(r.durs, dtype=np.float64)
    at = np.zeros(len(durs), dtype=np.int64)
    if hi > lo:
        at = np.minimum(((durs - lo) / (hi - lo) * bins).astype(np.int64), bins - 1)
    count = np.bincount(at, minlength=bins)
    slow = np.bincount(at, weights=np.array(r.slowest, dtype=np.float64), minlength=bins) > 0
    return count, slow


class StepChart(FreshLayout):
    """The chart of `show(rank_steps(...))`; one line per rank under the axis."""

    DEFAULT_CSS = "StepChart { height: auto; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.ranks: list[RankSteps] = []

    def show(self, ranks: list[RankSteps]) -> None:
        self.ranks = ranks
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 + len(self.ranks) if self.ranks else 1

    def render(self) -> Text:
        if not self.ranks:
            return Text("loading…", style="italic")
        return chart(self.ranks, self.size.width)
