"""One rank's traces → its window graphs under given options (no database involved).

Everything that does not depend on the window (the frame, launch lookups, queue lengths,
inferred syncs) is computed once per rank; each window (one annotation instance, every
`ProfilerStep`, or the whole trace) then costs one clip and one graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...parse import RankTrace
from .callstack import StackRules
from .frame import Frame, FrameSource, NotEmulable, rank_frame
from .graph import Rules, WindowGraph, build_window
from .kernels import HtaFails, KernelLookups, KernelRules
from .lookups import (
    LAUNCH_CALLS,
    LAUNCH_CALLS_061,
    hta_queues,
    launches,
    native_queues,
    next_launch_of_stream_waits,
    previous_launch_of_records,
)
from .options import NativeOptions
from .syncs import InferredSyncs, infer_syncs
from .window import STEP_ANNOTATION, Window, WindowError

OLDER = "hta-0.5.0"


@dataclass(frozen=True)
class WindowResult:
    """One window of one rank: its graph, or why there is none."""

    rank: int
    window: Window
    step: str  # the ProfilerStep's name for --all-steps windows, else ""
    graph: WindowGraph | None
    message: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.graph is not None


@dataclass(frozen=True)
class RankBuild:
    """All windows of one rank, and the syncs inferred for it."""

    rank: int
    windows: tuple[WindowResult, ...]
    inferred: InferredSyncs | None
    frame: Frame | None
    message: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


def rules_for(options: NativeOptions, unit_ns: int) -> Rules:
    """The passes' rules for these options, in frame units."""
    quirks = options.hta_quirks
    cutoff = options.kernel_gap_cutoff_ns
    return Rules(
        StackRules(
            options.merge_backward_thread,
            options.runtime_lock,
            exact_ties=quirks is not None,
            time_chain=quirks is None,
        ),
        KernelRules(
            kernel_gap_cutoff=None if cutoff is None else cutoff / unit_ns,
            int_cast_after_record_merge=quirks == OLDER,
            skip_missing_runtime=quirks != OLDER,
            hta=quirks is not None,
        ),
        negative_floor=max(1000 // unit_ns, 1) if options.hta_times else 1,
    )


def lookups_for(full: Frame, options: NativeOptions) -> KernelLookups:
    """Queue lengths and launch lookups over the rank's full frame."""
    quirks = options.hta_quirks
    if quirks is None:
        runs = launches(full, None, None)
        return KernelLookups(
            native_queues(full),
            previous_launch_of_records(full, runs, None),
            next_launch_of_stream_waits(full, runs, None),
        )
    names = LAUNCH_CALLS if quirks == OLDER else LAUNCH_CALLS_061
    runs = launches(full, names, full.ts_dtype)
    return KernelLookups(
        hta_queues(full, names),
        previous_launch_of_records(full, runs, full.ts_dtype),
        next_launch_of_stream_waits(full, runs, full.ts_dtype),
    )


def step_windows(full: Frame) -> list[tuple[Window, str]]:
    """One window per ProfilerStep annotation, by HTA's positional instance numbering."""
    rows = np.nonzero(full.name.contains(STEP_ANNOTATION))[0]
    is_step = full.cat_in(("user_annotation", "Operator"))[rows]
    names = [full.name.at(int(r)) for r in rows]
    return [
        (Window(STEP_ANNOTATION, i), names[i])
        for i in range(len(rows))
        if is_step[i] and names[i].startswith(f"{STEP_ANNOTATION}#")
    ]


def build_rank(
    trace: FrameSource | RankTrace,
    options: NativeOptions,
    window: Window,
    all_steps: bool = False,
) -> RankBuild:
    """The rank's window graphs (a failed window records HTA's or our reason)."""
    import time

    began = time.perf_counter()
    try:
        full = rank_frame(
            trace, hta_times=options.hta_times, hta_quirks=options.hta_quirks is not None
        )
        look = lookups_for(full, options)
    except NotEmulable as exc:
        return RankBuild(trace.rank, (), None, None, f"not emulable: {exc}")
    rules = rules_for(options, full.unit_ns)
    has_sync_events = bool(full.cat_in(("cuda_sync",)).any())
    inferred = infer_syncs(full) if options.infer_syncs and not has_sync_events else None
    prepared = time.perf_counter()
    chosen = step_windows(full) if all_steps else [(window, "")]
    results = []
    for w, step in chosen:
        t0 = time.perf_counter()
        try:
            graph: WindowGraph | None = build_window(full, w, look, rules, inferred)
            message = ""
        except (HtaFails, WindowError, NotEmulable) as exc:
            graph, message = None, str(exc)
        results.append(WindowResult(trace.rank, w, step, graph, message, time.perf_counter() - t0))
    seconds = {"prepare": prepared - began, "windows": time.perf_counter() - prepared}
    message = "" if chosen else f"no {STEP_ANNOTATION}#N annotation in the trace"
    return RankBuild(trace.rank, tuple(results), inferred, full, message, seconds)
