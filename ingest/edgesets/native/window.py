"""Analysis windows: HTA's annotation lookup and its clipping of a rank's frame.

HTA (`CriticalPathAnalysis.critical_path_analysis`): the annotation matches every event whose
name *contains* it; `instance` picks a positional slice of those events in frame order (an int,
an inclusive (first, last) pair, or None for 0); the window is the slice's earliest start to its
latest end. An empty annotation is the whole trace. The clip keeps CPU rows (stream -1) that start
inside the window with a positive duration, GPU rows whose launching call does, and every
`Stream Wait Event` row, in label order (tracegraph's own rules: in the frame's order).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .frame import Frame

STEP_ANNOTATION = "ProfilerStep"


@dataclass(frozen=True)
class Window:
    """An annotation and instance (HTA's semantics), or the whole trace (annotation "")."""

    annotation: str = ""
    instance: int | tuple[int, int] | None = None

    @property
    def whole_trace(self) -> bool:
        return self.annotation == ""

    def label(self) -> str:
        if self.whole_trace:
            return "whole trace"
        return f"{self.annotation}[{self.instance if self.instance is not None else 0}]"


class WindowError(Exception):
    """HTA's analysis of this window fails (the message is the one HTA gives)."""


def window_bounds(frame: Frame, window: Window) -> tuple[float, float]:
    """[start, end] of the window in frame units; WindowError where HTA finds nothing."""
    if window.whole_trace:
        return float(frame.ts.min(initial=0)), float("inf")
    if not any(window.annotation in s for s in frame.symbols):
        raise WindowError(f"Could not find annotation {window.annotation} in the trace.")
    first, last = _instances(window.instance)
    rows = np.nonzero(_mask_contains(frame, window.annotation))[0]
    chosen = rows[first : last + 1]
    if len(chosen) == 0:
        # HTA formats a NaN window into a pandas query, which then fails with this message.
        raise WindowError("UndefinedVariableError: name 'nan' is not defined")
    return float(frame.ts[chosen].min()), float(frame.end[chosen].max())


def _instances(instance: int | tuple[int, int] | None) -> tuple[int, int]:
    if instance is None:
        return 0, 0
    if isinstance(instance, tuple):
        return instance
    return instance, instance


def _mask_contains(frame: Frame, text: str) -> np.ndarray:
    return frame.name.contains(text)


def step_instances(frame: Frame, annotation: str = STEP_ANNOTATION) -> int:
    """How many events' names contain the annotation (instances 0..n-1)."""
    return int(_mask_contains(frame, annotation).sum())


def clip(frame: Frame, bounds: tuple[float, float], hta: bool = True) -> Frame:
    """HTA's clipped frame: rows inside the window, in label order.

    With tracegraph's rules (`hta` False) a GPU row no call launched is kept when it starts
    inside the window (HTA drops it), the rows stay in the frame's order, which does not
    depend on the file (`frame.canonical_order`), and a CPU row that runs past the window's end
    (a gloo worker's all-reduce, a python frame) is cut there: every CPU thread's graph lies
    inside the window. GPU rows keep their times: the work a step launched is the step's, however
    long the device takes to run it.
    """
    start, end = bounds
    cpu = frame.stream == -1
    inside = (frame.ts >= start) & (frame.ts <= end) & (frame.dur > 0)
    keep = cpu & inside
    gpu_rows = np.nonzero(~cpu)[0]
    if not hta:
        # tracegraph: a GPU row goes with the call that launched it (its own link), or, with no
        # such call, by its own start
        launcher = frame.position_of(frame.index_correlation[gpu_rows])
        linked = launcher >= 0
        linked[linked] = cpu[launcher[linked]]
        own = (frame.ts[gpu_rows] >= start) & (frame.ts[gpu_rows] <= end)
        keep[gpu_rows[np.where(linked, inside[np.maximum(launcher, 0)], own)]] = True
        kept = frame.take(np.nonzero(keep)[0])  # the frame's (canonical) order
        past = (kept.stream == -1) & (kept.end > end)
        if not past.any():
            return kept
        return replace(kept, dur=np.where(past, int(end) - kept.ts, kept.dur))
    launcher_rows = np.nonzero(cpu)[0]
    # The CPU row whose index_correlation names this GPU row (HTA joins on that label).
    targets = frame.index_correlation[launcher_rows]
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    at = np.searchsorted(sorted_targets, frame.ev_idx[gpu_rows])
    at_c = np.minimum(at, max(len(sorted_targets) - 1, 0))
    found = (at < len(sorted_targets)) & (sorted_targets[at_c] == frame.ev_idx[gpu_rows])
    runtime = launcher_rows[order[at_c]]
    launched_inside = found & inside[runtime]
    swe = _mask_name(frame, "Stream Wait Event")[gpu_rows]
    keep[gpu_rows[launched_inside | swe]] = True
    rows = np.nonzero(keep)[0]
    return frame.take(rows[np.argsort(frame.ev_idx[rows], kind="stable")])


def _mask_name(frame: Frame, name: str) -> np.ndarray:
    return frame.name_in((name,))
