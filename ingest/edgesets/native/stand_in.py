"""Summary ranks in a step's cross-rank join: each a stand-in graph of its arrivals.

A rank ingested as a summary (`ingest --summary`) has no events, but the database keeps its
steps (`Step`) and its collective arrivals (`CollectiveArrival`). Where a run's path joins the
ranks with events, each summary rank takes part through a stand-in: one thread whose rows are
the step (named `SUMMARY_WORK`) and the arrivals placed in it (by their launching call's start,
as a rank graph clips its kernels), with edges

- each arrival's predecessor → it: of the arrivals before it, the one that ended last at or
  before its start (the rank's work between them: opaque), else the step's start,
- each arrival's own span (weighed by the join as any participant's: a wait counts only what
  remains after the last arrival),
- each arrival that is no arrival's predecessor → the step's end (at least the last arrival's).

The join takes the rank's known waits (the time it waited in collectives for a later rank) off
these edges, as a wait weighs nothing on a rank with events. What remains is the rank's elapsed
time less its waits: an upper bound of its own path (its events would show idle time, and work
on a stream no arrival waits for). So a late summary rank bounds the step as a loaded one would,
its work before the arrival one segment, and a summary rank that bounds a step is a verdict to
confirm by loading its events. Rows have no graph label: no edge of theirs is stored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ... import schema
from ...critical_path import longest_path
from ...store import GraphStore
from .crossrank import SUMMARY_CATEGORY, Instance
from .edges import DEPENDENCY, OPERATOR_KERNEL, Edges
from .frame import KIND_OTHER, Frame, Strings
from .graph import WindowGraph
from .window import STEP_ANNOTATION, Window

SUMMARY_WORK = "(summary: events not loaded)"


@dataclass(frozen=True)
class StandInFrame(Frame):
    """A summary rank's rows: its steps and arrivals (ev_idx sparse: looked up by search)."""

    def position_of(self, ev_idx: np.ndarray) -> np.ndarray:
        order = np.argsort(self.ev_idx, kind="stable")
        keys = self.ev_idx[order]
        ev = np.asarray(ev_idx, np.int64)
        at = np.minimum(np.searchsorted(keys, ev), max(len(keys) - 1, 0))
        found = (len(keys) > 0) & (keys[at] == ev) if len(keys) else np.zeros(len(ev), bool)
        return np.where(found, order[at], -1)


@dataclass(frozen=True)
class StandIn:
    """One summary rank: its frame and, per step name, its graph of that step."""

    rank: int
    frame: StandInFrame
    graphs: dict[str, WindowGraph]


def summary_ranks(
    store: GraphStore, run: str, ranks: tuple[int, ...]
) -> tuple[list[StandIn], dict[int, Instance]]:
    """The stand-ins of `ranks` (summary ranks of `run`), and their collective participants
    as `Instance`s (members: (rank, ev_idx))."""
    if not ranks:
        return [], {}
    params = {"run": run, "ranks": list(ranks)}
    steps = store.run(
        "MATCH (s:Step) WHERE s.run = $run AND s.rank IN $ranks AND s.step >= 0 "
        "RETURN s.rank AS rank, s.id AS id, s.name AS name, s.ts AS ts, s.dur AS dur",
        params,
    ).table
    arrivals = store.run(
        "MATCH (a:CollectiveArrival) WHERE a.run = $run AND a.rank IN $ranks RETURN a.rank AS "
        "rank, a.id AS id, a.collective AS collective, a.ts AS ts, a.dur AS dur, "
        "a.anchor AS anchor",
        params,
    ).table
    labels = store.run(
        "MATCH (c:Collective) WHERE c.run = $run "
        "RETURN c.id AS id, c.name AS name, c.seq AS seq, c.process_group AS pg",
        {"run": run},
    ).table
    label_of = {
        int(i): f"{n} #{s}"
        for i, n, s in zip(*(labels[c].to_pylist() for c in ("id", "name", "seq")), strict=True)
    }
    ids, pgs = labels["id"].to_pylist(), labels["pg"].to_pylist()
    group_of = {int(i): pg or "" for i, pg in zip(ids, pgs, strict=True)}
    members: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r, key, c in zip(
        *(arrivals[c].to_pylist() for c in ("rank", "id", "collective")), strict=True
    ):
        members[int(c)].append((int(r), int(key) & schema.MAX_EV))
    instances = {
        c: Instance(label_of.get(c, f"collective {c}"), tuple(sorted(m)), group_of.get(c, ""))
        for c, m in members.items()
    }
    steps_of, arrivals_of = _by_rank(steps), _by_rank(arrivals)
    stand_ins = [stand_in(rank, steps_of(rank), arrivals_of(rank), label_of) for rank in ranks]
    return [s for s in stand_ins if s.graphs], instances


def _by_rank(table: pa.Table) -> Callable[[int], dict[str, np.ndarray]]:
    """One rank's columns of `table`, the table sorted by rank once (not scanned per rank)."""
    rank = np.asarray(table["rank"].to_numpy(zero_copy_only=False))
    order = np.argsort(rank, kind="stable")
    ranks = rank[order]
    columns = {
        c: np.asarray(table[c].to_numpy(zero_copy_only=False))[order] for c in table.column_names
    }

    def of(r: int) -> dict[str, np.ndarray]:
        lo, hi = np.searchsorted(ranks, r, "left"), np.searchsorted(ranks, r, "right")
        return {c: values[lo:hi] for c, values in columns.items()}

    return of


def stand_in(
    rank: int,
    steps: dict[str, np.ndarray],
    arrivals: dict[str, np.ndarray],
    labels: dict[int, str],
) -> StandIn:
    """One summary rank's frame (its steps, then its arrivals) and its graph of each step."""
    if len(steps["ts"]) == 0:  # no ProfilerStep: nothing to join per step
        frame = _frame(
            rank, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), []
        )
        return StandIn(rank, frame, {})
    order = np.argsort(steps["ts"], kind="stable")
    s_ts, s_dur = steps["ts"][order].astype(np.int64), steps["dur"][order].astype(np.int64)
    s_names = [str(steps["name"][i]) for i in order]
    a_order = np.lexsort((arrivals["id"], arrivals["ts"]))
    a_ts, a_dur = (
        arrivals["ts"][a_order].astype(np.int64),
        arrivals["dur"][a_order].astype(np.int64),
    )
    a_anchor = arrivals["anchor"][a_order].astype(np.int64)
    # each arrival's step: the last step starting at or before its anchor, if it ends after it
    at = np.searchsorted(s_ts, a_anchor, side="right") - 1
    inside = (at >= 0) & (a_anchor < (s_ts + s_dur)[np.maximum(at, 0)])
    a_names = [labels.get(int(c), f"collective {c}") for c in arrivals["collective"][a_order]]
    n_steps = len(s_ts)
    # a step row lasts at least to its last arrival's end (a GPU kernel may end after it)
    last_end = np.full(n_steps, np.iinfo(np.int64).min)
    np.maximum.at(last_end, at[inside], (a_ts + np.maximum(a_dur, 0))[inside])
    s_end = np.maximum(s_ts + s_dur, last_end)
    ts = np.concatenate([s_ts, a_ts])
    dur = np.concatenate([s_end - s_ts, a_dur])
    ev_idx = np.concatenate([steps["id"][order], arrivals["id"][a_order]]).astype(np.int64)
    ev_idx &= schema.MAX_EV
    names = [SUMMARY_WORK] * n_steps + a_names
    frame = _frame(rank, ev_idx, ts, dur, names)
    graphs = {}
    for i, name in enumerate(s_names):
        mine = np.nonzero(inside & (at == i))[0] + n_steps
        if len(mine):
            graphs[name] = _step_graph(frame, i, mine)
    return StandIn(rank, frame, graphs)


def _frame(
    rank: int, ev_idx: np.ndarray, ts: np.ndarray, dur: np.ndarray, names: list[str]
) -> StandInFrame:
    n = len(ev_idx)
    values = tuple(dict.fromkeys(names))
    code = {v: i for i, v in enumerate(values)}
    minus = np.full(n, -1, np.int64)
    return StandInFrame(
        rank=rank,
        ev_idx=ev_idx,
        seq=np.arange(n, dtype=np.int64),
        kind=np.full(n, KIND_OTHER, np.int8),
        cat=Strings(np.zeros(n, np.int32), (SUMMARY_CATEGORY,)),
        name=Strings(np.array([code[v] for v in names], np.int32), values),
        pid=np.zeros(n, np.int64),
        tid=np.zeros(n, np.int64),
        ts=ts,
        dur=dur,
        stream=minus,
        correlation=minus,
        wait_on_stream=minus,
        wait_corr=minus,
        index_correlation=minus,
        unit_ns=1,
        origin=0,
        ts_dtype=np.dtype(np.int64),
        gpu_first=False,
        symbols=frozenset(values),
    )


def _step_graph(frame: StandInFrame, step_row: int, rows: np.ndarray) -> WindowGraph:
    """The stand-in's graph of one step: its step row (local row 0) and arrivals (see the
    module docstring); rows in time order."""
    clip = frame.take(np.concatenate([[step_row], rows]))
    start, end = clip.ts, clip.ts + np.maximum(clip.dur, 0)
    arrivals = np.arange(1, clip.n)
    src: list[int] = []
    dst: list[int] = []
    followed = np.zeros(clip.n, bool)
    for j in arrivals.tolist():
        # its predecessor: of the arrivals before it (time, then id order), the one that ended
        # last at or before it started (so equal 0 ns arrivals chain, never loop)
        earlier = np.arange(1, j)
        done = earlier[end[earlier] <= start[j]]
        before = 0
        if len(done):
            latest = end[done].max()
            before = int(done[end[done] == latest][-1])
        src.append(2 * before + 1 if before else 0)
        dst.append(2 * j)
        followed[before] = True
    for j in arrivals.tolist():
        src.append(2 * j)
        dst.append(2 * j + 1)
    for j in arrivals[~followed[arrivals]].tolist():
        src.append(2 * j + 1)
        dst.append(1)
    s, d = np.array(src, np.int64), np.array(dst, np.int64)
    times = np.empty(2 * clip.n, np.int64)
    times[0::2], times[1::2] = start, end
    kind = np.where(d == s + 1, OPERATOR_KERNEL, DEPENDENCY).astype(np.int8)
    edges = Edges(s, d, kind, times[d] - times[s])
    path = longest_path(s, d, edges.weight, 2 * clip.n)
    bounds = (float(start[0]), float(end[0]))
    window = Window(STEP_ANNOTATION)
    return WindowGraph(frame.rank, window, bounds, clip, edges, edges.weight, path)
