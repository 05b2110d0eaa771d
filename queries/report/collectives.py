"""Collectives across ranks: per instance the arrival skew, each rank's wait, the latency, the
message size and bandwidth where the trace records sizes; per rank how often it arrived last and
the wait it caused; per step the straggler, and each rank's lateness (its largest arrival after
the median of the other participants', at the step's collectives: the straggler's measure).

Arrival is a participant's start (the NCCL/RCCL kernel's on a GPU rank, the `gloo:*` range's on
a CPU rank), on clocks aligned as the native cross-rank path aligns them (ingest/clocks.py: from
the collectives' ends; ranks of one named host are not shifted). A rank waits at
a collective from its arrival to the last participant's; the last arriver caused that wait. A
step's straggler is the rank that caused the most wait per other participant at any one of the
step's collectives (a step's collectives overlap, so the same lateness shows at each: not
summed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tracegraph.ingest.clocks import offsets_from_ends
from tracegraph.ingest.store import GraphStore

from .analyses import Row
from .steps import StepWindow

# element sizes by the spellings traces use: Kineto's NCCL `dtype` ("Float", "BFloat16"),
# record_function input types ("float", "c10::Half"), numpy-like names
_DTYPE_BYTES = {
    **dict.fromkeys(("Float", "float", "float32", "Int", "int", "int32", "UInt32"), 4),
    **dict.fromkeys(
        (
            "Double",
            "double",
            "float64",
            "Long",
            "long",
            "long int",
            "int64",
            "UInt64",
            "ComplexFloat",
        ),
        8,
    ),  # fmt: skip
    **dict.fromkeys(
        ("Half", "half", "float16", "BFloat16", "bfloat16", "Short", "short", "int16"), 2
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "Byte",
            "Char",
            "Bool",
            "bool",
            "int8",
            "int8_t",
            "uint8",
            "unsigned char",
            "Float8_e4m3fn",
            "Float8_e5m2",
        ),
        1,
    ),  # fmt: skip
}
# NCCL's bus-bandwidth factor by collective, n participants (nccl-tests' PERFORMANCE.md)
_BUS_FACTOR = (
    (re.compile(r"all_?reduce", re.I), lambda n: 2 * (n - 1) / n),
    (re.compile(r"all_?gather|reduce_?scatter|all_?to_?all|alltoall", re.I), lambda n: (n - 1) / n),
    (re.compile(r"broadcast|reduce|send|recv", re.I), lambda n: 1.0),
)


@dataclass(frozen=True)
class Participants:
    """Every participant of the run's collective instances, as columns."""

    instance: np.ndarray  # index into `names`
    names: list[tuple[str, str, int]]  # (collective, process group, seq) per instance
    rank: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    args: list[str]
    event: np.ndarray  # the participant's event id
    anchor: np.ndarray  # places it in a step (see `participants`)

    @property
    def n(self) -> int:
        return len(self.rank)


def participants(store: GraphStore, run: str) -> Participants:
    """Every participant, grouped by instance; `anchor` the time that places it in a step: a
    kernel's launching call's start (the GPU runs behind the CPU), a range's own start. Read
    from the run's CollectiveArrival rows (every rank's, summary or full), or where a run
    ingested before them has none, from its events."""
    if not store.has_table("CollectiveArrival"):  # a database an older tracegraph made
        return _participants(_from_events(store, run))
    table = store.run(
        "MATCH (a:CollectiveArrival), (c:Collective) WHERE a.run = $run AND c.run = $run "
        "AND a.collective = c.id RETURN c.id AS id, c.name AS name, c.process_group AS pg, "
        "c.seq AS seq, a.rank AS rank, a.ts AS ts, a.dur AS dur, a.args AS args, "
        "a.id AS event, a.anchor AS anchor",
        {"run": run},
    ).table
    if table.num_rows == 0:
        table = _from_events(store, run)
    return _participants(table)


def _from_events(store: GraphStore, run: str) -> pa.Table:
    columns = (
        "c.id AS id, c.name AS name, c.process_group AS pg, c.seq AS seq, k.rank AS rank, "
        "k.ts AS ts, k.dur AS dur, k.args AS args, k.id AS event"
    )
    ops = store.run(
        f"MATCH (k:Op)-[:PART_OF]->(c:Collective) WHERE c.run = $run RETURN {columns}, "
        "k.ts AS anchor",
        {"run": run},
    ).table
    kernels = store.run(
        f"MATCH (k:Kernel)-[:PART_OF]->(c:Collective) WHERE c.run = $run "
        f"OPTIONAL MATCH (r:Runtime)-[:LAUNCHES]->(k) RETURN {columns}, "
        "coalesce(min(r.ts), k.ts) AS anchor",
        {"run": run},
    ).table
    return pa.concat_tables([ops, kernels.cast(ops.schema)])


def _participants(table: pa.Table) -> Participants:
    table = table.sort_by([("id", "ascending"), ("rank", "ascending"), ("ts", "ascending")])
    ids = table["id"].to_numpy()
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    names = [
        (str(table["name"][i]), str(table["pg"][i] or ""), int(table["seq"][i].as_py() or 0))
        for i in first.tolist()
    ]
    ts = table["ts"].to_numpy().astype(np.int64)
    dur = np.nan_to_num(table["dur"].to_numpy(zero_copy_only=False).astype(np.float64))
    return Participants(
        inverse.ravel().astype(np.int64),
        names,
        table["rank"].to_numpy().astype(np.int64),
        ts,
        ts + dur.astype(np.int64),
        [a or "" for a in table["args"].to_pylist()],
        table["event"].to_numpy().astype(np.int64),
        table["anchor"].to_numpy().astype(np.int64),
    )


def _groups(p: Participants) -> list[np.ndarray]:
    """Each instance's participant rows (the rows are sorted by instance)."""
    if p.n == 0:
        return []
    bounds = np.nonzero(np.diff(p.instance))[0] + 1
    return [g for g in np.split(np.arange(p.n), bounds) if len(np.unique(p.rank[g])) >= 2]


def clock_offsets(p: Participants, hosts: dict[int, str | None] | None = None) -> dict[int, int]:
    """Per rank, as the cross-rank path aligns clocks (ingest/clocks.py)."""
    ends: dict[int, dict[int, int]] = {}
    for i, sel in enumerate(_groups(p)):
        ends[i] = {int(r): int(e) for r, e in zip(p.rank[sel], p.end[sel], strict=True)}
    return offsets_from_ends(ends, hosts)


def collective_rows(
    p: Participants,
    windows: dict[int, list[StepWindow]],
    step: int | None = None,
    hosts: dict[int, str | None] | None = None,
    hung: frozenset[int] = frozenset(),
    ahead: Mapping[int, frozenset[int]] | None = None,
) -> tuple[list[Row], list[Row], list[Row], dict[tuple[int, int], int]]:
    """(per instance, per rank, per step) rows and (step, rank) → lateness: see the module
    docstring; with `step`, only the instances of that step (and the per-rank figures over
    them). Unmatched collectives (`unmatched.py`): an instance in `hung` never completed and
    is no lateness; in one that crosses steps, the ranks of `ahead` took part from a later step:
    where one of them came last it is no lateness, else lateness is among the others."""
    ahead = ahead or {}
    offsets = clock_offsets(p, hosts)
    shift = np.array([offsets.get(int(r), 0) for r in p.rank], np.int64)
    arrive, leave = p.ts - shift, p.end - shift
    instances: list[Row] = []
    caused: dict[int, int] = {}
    last_count: dict[int, int] = {}
    waited: dict[int, int] = {}
    # (step, rank) → the instance where that rank, last, made each other rank wait longest:
    # (wait per other rank, lateness, collective, the late participant's event)
    worst: dict[tuple[int, int], tuple[int, int, str, int]] = {}
    lateness: dict[tuple[int, int], int] = {}
    for sel in _groups(p):
        last = sel[np.lexsort((p.rank[sel], arrive[sel]))[-1]]
        at_step = step_of(int(p.rank[last]), int(p.anchor[last]), windows)
        if step is not None and at_step != step:
            continue
        waits = arrive[last] - arrive[sel]
        cause = int(waits.sum())
        last_rank = int(p.rank[last])
        inst = int(p.instance[sel[0]])
        later = ahead.get(inst, frozenset())
        diverged = inst in hung or last_rank in later  # the wait is no late rank's doing
        if not diverged:
            caused[last_rank] = caused.get(last_rank, 0) + cause
            last_count[last_rank] = last_count.get(last_rank, 0) + 1
        for j, w in zip(sel.tolist(), waits.tolist(), strict=True):
            waited[int(p.rank[j])] = waited.get(int(p.rank[j]), 0) + int(w)
        name, group, seq = p.names[inst]
        own = sel[~np.isin(p.rank[sel], list(later))] if later else sel
        if at_step is not None and not diverged and len(own) > 1:
            # collectives of one step overlap (DDP's buckets): the same lateness shows at each,
            # so a step counts its largest, per waiting rank, not their sum
            each = cause // (len(sel) - 1)
            late = int(arrive[last] - np.median(arrive[own][own != last]))
            if each > worst.get((at_step, last_rank), (-1, 0, "", -1))[0]:
                worst[(at_step, last_rank)] = (each, late, f"{name} #{seq}", int(p.event[last]))
            afters = arrive[own] - median_of_others(arrive[own])
            for j, after in zip(own.tolist(), afters.tolist(), strict=True):
                key = (at_step, int(p.rank[j]))
                if key not in lateness or after > lateness[key]:
                    lateness[key] = int(after)
        latency = int(leave[sel].min() - arrive[last])
        size = _message_bytes(name, p.args[last])
        instances.append(
            {
                "collective": name,
                "process_group": group,
                "seq": seq,
                "step": at_step,
                "participants": len(sel),
                "skew_ns": int(arrive[sel].max() - arrive[sel].min()),
                "last_rank": last_rank,
                "wait_caused_ns": cause,
                "latency_ns": latency,
                "bytes": size,
                "bus_gbps": _bus_gbps(name, size, latency, len(sel)),
                "waits_ns": json.dumps(
                    {
                        str(int(p.rank[j])): int(w)
                        for j, w in zip(sel.tolist(), waits.tolist(), strict=True)
                    }
                ),
            }  # fmt: skip
        )
    ranks = sorted(set(int(r) for r in p.rank))
    per_rank = [
        {
            "rank": r,
            "arrived_last": last_count.get(r, 0),
            "wait_caused_ns": caused.get(r, 0),
            "waited_ns": waited.get(r, 0),
            "clock_offset_ns": offsets.get(r, 0),
        }  # fmt: skip
        for r in ranks
    ]
    stragglers = []
    for number in sorted({s for s, _ in worst}):
        rank, (each, late, at, event) = max(
            ((r, v) for (s, r), v in worst.items() if s == number),
            key=lambda rv: (rv[1][0], -rv[0]),
        )
        stragglers.append({"step": number, "rank": rank, "wait_caused_ns": each,
                           "late_ns": late, "collective": at, "event": event})  # fmt: skip
    return instances, per_rank, stragglers, lateness


def median_of_others(values: np.ndarray) -> np.ndarray:
    """Per value, the median of all the others (as np.median of the array without it)."""
    n = len(values)
    if n < 2:
        return np.zeros(n)
    order = np.argsort(values, kind="stable")
    ranked = values[order].astype(np.float64)
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)

    def kth_without(k: int) -> np.ndarray:  # the k-th smallest of the others, per value
        return np.where(k < position, ranked[k], ranked[min(k + 1, n - 1)])

    m = n - 1  # the others' count
    if m % 2:
        return kth_without(m // 2)
    return (kth_without(m // 2 - 1) + kth_without(m // 2)) / 2


def step_of(rank: int, ts: int, windows: dict[int, list[StepWindow]]) -> int | None:
    """The step of `rank` whose window holds `ts` (None: none does)."""
    for w in windows.get(rank, []):
        if w.ts <= ts < w.end:
            return w.step
    return None


def _message_bytes(name: str, args: str) -> int | None:
    """The message size the trace records (nccl-tests' S): NCCL's `In msg nelems` × dtype
    (`Out msg nelems` for gathers, whose output is the whole message), else the input's dims ×
    type (gloo ranges); None when it records neither."""
    try:
        data: dict[str, Any] = json.loads(args) if args else {}
    except ValueError:
        return None
    gather = bool(re.search(r"all_?gather", name, re.I))
    nelems = data.get("Out msg nelems" if gather else "In msg nelems")
    dtype = data.get("dtype")
    if nelems is None:
        dims = data.get("Input Dims")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and dims[0]:
            nelems = int(np.prod(dims[0]))
        types = data.get("Input type")
        dtype = types[0] if isinstance(types, list) and types else dtype
    size = _DTYPE_BYTES.get(str(dtype).removeprefix("c10::")) if dtype is not None else None
    if not isinstance(nelems, int | float) or size is None:
        return None
    return int(nelems) * size


def _bus_gbps(name: str, size: int | None, latency_ns: int, n: int) -> float | None:
    if size is None or latency_ns <= 0 or n < 2:
        return None
    for pattern, factor in _BUS_FACTOR:
        if pattern.search(name):
            return round(size / latency_ns * factor(n), 3)  # bytes/ns = GB/s
    return None


SCHEMAS = {
    "collectives": pa.schema(
        [("collective", pa.string()), ("process_group", pa.string()), ("seq", pa.int64()),
         ("step", pa.int64()), ("participants", pa.int64()), ("skew_ns", pa.int64()),
         ("last_rank", pa.int64()), ("wait_caused_ns", pa.int64()), ("latency_ns", pa.int64()),
         ("bytes", pa.int64()), ("bus_gbps", pa.float64()), ("waits_ns", pa.string())]
    ),
    "collective_ranks": pa.schema(
        [("rank", pa.int64()), ("arrived_last", pa.int64()), ("wait_caused_ns", pa.int64()),
         ("waited_ns", pa.int64()), ("clock_offset_ns", pa.int64())]
    ),
    "stragglers": pa.schema(
        [("step", pa.int64()), ("rank", pa.int64()), ("wait_caused_ns", pa.int64()),
         ("late_ns", pa.int64()), ("collective", pa.string()), ("event", pa.int64())]
    ),
}  # fmt: skip
