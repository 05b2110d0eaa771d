"""The cross-rank path of each step as stored on a native edge set, in words.

`edges --native` stores, per step, the job's path across ranks in the EdgeSet's window JSON
(`cross_rank`): its length, the rank and op that bound the step, the straggler with its lateness
and the wait it caused, each rank's collective wait and clock offset. The CLI, the demo and the
explorer show it through `describe`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tracegraph.ingest.edgesets.native.segments import Segment
from tracegraph.ingest.python_frames import readable
from tracegraph.ingest.store import GraphStore


@dataclass(frozen=True)
class StepVerdict:
    """What bound one step across ranks, as stored."""

    step: str
    length_ns: int
    bound_by_rank: int
    bound_by_op: str
    straggler: dict[str, object] | None
    wait_ns: dict[int, int]
    clock_offset_ns: dict[int, int]
    segments: tuple[Segment, ...] = ()
    hotspot: str = ""  # the innermost range with the most path time on the bound rank
    hotspot_ns: int = 0
    summarised: tuple[int, ...] = ()  # ranks joined as summaries (their arrivals only)

    @staticmethod
    def of(summary: dict[str, object]) -> StepVerdict:
        def ints(key: str) -> dict[int, int]:
            raw = summary.get(key) or {}
            assert isinstance(raw, dict)
            return {int(r): int(v) for r, v in raw.items()}

        straggler = summary.get("straggler")
        return StepVerdict(
            str(summary["step"]),
            int(summary["length_ns"]),  # type: ignore[call-overload]
            int(summary["bound_by_rank"]),  # type: ignore[call-overload]
            str(summary.get("bound_by_op") or ""),
            straggler if isinstance(straggler, dict) else None,
            ints("wait_ns"),
            ints("clock_offset_ns"),
            tuple(Segment.of_json(x) for x in summary.get("segments") or ()),  # type: ignore[attr-defined]
            str(summary.get("hotspot") or ""),
            int(summary.get("hotspot_ns") or 0),  # type: ignore[call-overload]
            tuple(int(r) for r in summary.get("summary_ranks") or ()),  # type: ignore[attr-defined]
        )


def describe(v: StepVerdict) -> str:
    """One line: the path, what bound it, the straggler and the wait it caused."""
    text = f"  {v.step}: across ranks {v.length_ns / 1e3:,.0f} µs, bound by rank {v.bound_by_rank}"
    if v.bound_by_rank in v.summarised:
        text += (
            " (a summary: its path time is an estimate from its arrivals, its elapsed time "
            f"less its waits; its events: `ingest --db DB --full-ranks {v.bound_by_rank}`)"
        )
    elif v.bound_by_op:
        text += f" in {readable(v.bound_by_op)}"
    if v.bound_by_rank not in v.summarised and (
        v.hotspot
        and v.hotspot_ns
        and v.length_ns
        and readable(v.hotspot) != readable(v.bound_by_op)
    ):
        text += f" (mostly {v.hotspot}: {v.hotspot_ns / v.length_ns:.0%} of the path)"
    s = v.straggler
    if s is None:
        text += "; no rank arrived late at a collective"
    else:
        text += (
            f"; straggler rank {s['rank']}: last at {s['last_at']} of {s['collectives']} "
            f"collectives, {int(s['lateness_ns']) / 1e3:,.0f} µs after the others' median "  # type: ignore[call-overload]
            f"arrival at {s['at']}, {int(s['caused_wait_ns']) / 1e3:,.0f} µs of wait caused "  # type: ignore[call-overload]
            "on the others"
        )
    return text + f"; {clocks(v.clock_offset_ns)}"


def describe_short(v: StepVerdict, op_width: int = 40) -> str:
    """The verdict in a line or two (the TUI at 80 columns): the path's length, what bound
    it, and the straggler with its lateness and the wait it caused, said first."""
    op = readable(v.bound_by_op) if v.bound_by_op else ""
    if len(op) > op_width:
        op = op[: op_width - 1] + "…"
    s = v.straggler
    late = (
        "no rank arrived late"
        if s is None
        else f"straggler rank {s['rank']}: +{int(s['lateness_ns']) / 1e6:,.2f} ms late, "  # type: ignore[call-overload]
        f"{int(s['caused_wait_ns']) / 1e6:,.2f} ms of the others' wait"  # type: ignore[call-overload]
    )
    bound = f"bound by rank {v.bound_by_rank}" + (f" in {op}" if op else "")
    return f"{v.step}: {late}; across ranks {v.length_ns / 1e6:,.2f} ms, {bound}"


def clocks(offsets: dict[int, int]) -> str:
    """Which ranks' clocks were shifted to align them, and by how much."""
    shifted = {r: ns for r, ns in sorted(offsets.items()) if ns}
    if not shifted:
        return "clocks not shifted (one host, or already aligned)"
    parts = ", ".join(f"rank {r} {-ns / 1e3:+,.0f} µs" for r, ns in shifted.items())
    return f"clocks aligned from the collectives' ends: {parts}"


def step_verdicts(store: GraphStore, run: str, edge_set: str = "native") -> list[StepVerdict]:
    """The stored per-step cross-rank verdicts of a native edge set ([] where there are none)."""
    table = store.run(
        "MATCH (e:EdgeSet) WHERE e.run = $run AND e.name = $name RETURN e.window AS window",
        {"run": run, "name": edge_set},
    ).table
    if table.num_rows == 0:
        return []
    window = json.loads(table["window"][0].as_py() or "{}")
    return [StepVerdict.of(s) for s in window.get("cross_rank", [])]
