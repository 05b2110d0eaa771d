"""The Step table (one row per rank and ProfilerStep#N, written at ingest) against the raw JSON:
windows, GPU busy time (the union of kernel intervals inside the window) and kernel counts."""

from __future__ import annotations

import re
from pathlib import Path

from ..conftest import TracePool
from .oracle import Event

STEP = re.compile(r"ProfilerStep#(\d+)")
STEP_CATEGORIES = ("user_annotation", "Operator")  # Operator: the 2021 trace format


def _busy(kernels: list[Event], start: int, end: int, until: float) -> tuple[int, int]:
    """GPU busy time inside [start, end] (the union of every kernel interval, clipped), and the
    step's kernels: those starting in [start, until), until = the next step's start."""
    mine = [k for k in kernels if start <= k.ts < until]
    clipped = sorted(
        (max(k.ts, start), min(k.ts + (k.dur or 0), end))
        for k in kernels
        if k.ts < end and k.ts + (k.dur or 0) > start
    )
    total, reach = 0, start
    for a, b in clipped:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total, len(mine)


def test_step_rows_equal_the_json(traces: TracePool, shared_trace: Path) -> None:
    facts = traces.facts(shared_trace)
    if not facts.columns:
        return  # not a trace (run metadata)
    ingested = traces.db_of(shared_trace)
    rank = ingested.rank_of(shared_trace)
    expected = {
        int(m[1]): (e.ts, e.dur or 0)
        for e in facts.events("Op")
        if e.cat in STEP_CATEGORIES
        and isinstance(e.name, str)
        and (m := STEP.fullmatch(e.name)) is not None
    }
    rows = ingested.rows(
        "MATCH (s:Step) WHERE s.rank = $rank RETURN s.step AS step, s.ts AS ts, s.dur AS dur, "
        "s.gpu_busy_ns AS busy, s.kernel_count AS n ORDER BY step",
        {"rank": rank},
    )
    if not expected:
        assert [r["step"] for r in rows] == [-1]  # one whole-trace pseudo-step
        return
    assert {r["step"]: (r["ts"], r["dur"]) for r in rows} == expected
    kernels = facts.events("Kernel")
    starts = sorted(r["ts"] for r in rows)
    for r in rows:
        later = [t for t in starts if t > r["ts"]]
        until = later[0] if later else float("inf")
        busy, n = _busy(kernels, r["ts"], r["ts"] + r["dur"], until)
        assert (r["busy"], r["n"]) == (busy, n), r["step"]
