"""The rows of a text timeline of one rank's time window: CPU threads and GPU streams as lanes.

Events are selected by literal id and ts bounds (zone-map pruning; see queries.runs): those that
start inside the window. GPU work launched late in a step and running past its end is kept whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.store import GraphStore

from .runs import CPU_LABELS, id_filter


@dataclass(frozen=True)
class Lane:
    """One row of the strip: a CPU thread or a GPU stream, with its events sorted by start."""

    key: str  # "CPU tid 1000" / "GPU 0 s7"
    kind: str  # "cpu" | "gpu"
    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    names: list[str]

    def at(self, time_ns: int) -> int | None:
        """Index of the innermost (latest-starting) event covering `time_ns`, if any."""
        hit = np.flatnonzero((self.starts <= time_ns) & (self.ends > time_ns))
        return int(hit[-1]) if len(hit) else None


@dataclass(frozen=True)
class Timeline:
    rank: int
    start_ns: int
    end_ns: int
    lanes: list[Lane]
    critical_ids: frozenset[int] = field(default_factory=frozenset)


def rank_timeline(
    store: GraphStore,
    run_idx: int,
    rank: int,
    start_ns: int,
    end_ns: int,
    critical_ids: frozenset[int] = frozenset(),
) -> Timeline:
    """Every CPU range and GPU activity of the rank starting in [start_ns, end_ns), as lanes."""
    start_ns, end_ns = int(start_ns), int(end_ns)
    in_window = f"e.ts >= {start_ns} AND e.ts < {end_ns}"
    cpu = store.run(
        f"MATCH (e:{CPU_LABELS}) WHERE {id_filter('e', run_idx, rank)} AND {in_window} "
        "RETURN e.id AS id, e.name AS name, e.ts AS ts, e.dur AS dur, e.pid AS pid, e.tid AS tid"
    ).table
    gpu = store.run(
        f"MATCH (e:Kernel) WHERE {id_filter('e', run_idx, rank)} AND {in_window} "
        "RETURN e.id AS id, e.name AS name, e.ts AS ts, e.dur AS dur, e.device AS device, "
        "e.stream AS stream"
    ).table
    lanes = _lanes(cpu, ("pid", "tid"), "cpu") + _lanes(gpu, ("device", "stream"), "gpu")
    return Timeline(rank, start_ns, end_ns, lanes, frozenset(critical_ids))


def _lanes(table: pa.Table, keys: tuple[str, str], kind: str) -> list[Lane]:
    if table.num_rows == 0:
        return []
    # longer first on equal starts, so that a parent precedes the child it starts with
    table = table.sort_by(
        [(keys[0], "ascending"), (keys[1], "ascending"), ("ts", "ascending"), ("dur", "descending")]
    )
    first = pc.fill_null(table[keys[0]], -1).to_numpy()
    second = pc.fill_null(table[keys[1]], -1).to_numpy()
    ids = table["id"].to_numpy()
    starts = table["ts"].to_numpy()
    ends = starts + pc.fill_null(table["dur"], 0).to_numpy()
    names = table["name"].to_pylist()
    pids = np.unique(first)
    lanes = []
    cut = np.flatnonzero(np.r_[True, (first[1:] != first[:-1]) | (second[1:] != second[:-1])])
    bounds = list(cut) + [len(ids)]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        a, b = first[lo], second[lo]
        if kind == "cpu":
            key = f"CPU {b}" if len(pids) == 1 else f"CPU {a}/{b}"
        else:
            key = f"GPU{a} s{b}"
        lanes.append(Lane(key, kind, ids[lo:hi], starts[lo:hi], ends[lo:hi], names[lo:hi]))
    return lanes
