"""HTA's standard analyses over one rank's GPU activity, as Arrow rows, by whole-array sweeps.

Each function takes a `GpuActivity`, exact or HTA 0.5.0's reading; with HTA's, it follows HTA's
own arithmetic where that differs from the exact one (see each function). Times are integers in ns;
percentages are rounded as HTA rounds them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tracegraph.ingest.intervals import exclusive_shares, merged, overlap_length, union_length

from .activity import COMMUNICATION, COMPUTATION, MEMORY, NO_LAUNCH, TYPES, GpuActivity

KERNEL_WAIT_BELOW_NS = 30_000  # HTA's consecutive_kernel_delay: 30 (µs)
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
# the exclusive shares of the by-type breakdown, named by which types cover the time
_TYPE_BITS = ((COMPUTATION, 1), (COMMUNICATION, 2), (MEMORY, 4))
SHARE_NAMES = {
    1: "COMPUTATION",
    2: "COMMUNICATION",
    4: "MEMORY",
    3: "COMPUTATION overlapping COMMUNICATION",
    5: "COMPUTATION overlapping MEMORY",
    6: "COMMUNICATION overlapping MEMORY",
    7: "COMPUTATION overlapping COMMUNICATION overlapping MEMORY",
}

Row = dict[str, Any]


def _ns(value: int | float, unit_ns: int) -> int:
    return int(round(value * unit_ns))


def _pct(part: int | float, whole: int | float, digits: int = 2) -> float | None:
    return round(100 * part / whole, digits) if whole else None


def temporal_breakdown(gpu: GpuActivity) -> Row:
    """Idle, compute and non-compute time within the span from the first GPU start to the last
    GPU end (`kernel_time`, HTA's name): idle = span − |∪ GPU|, compute = |∪ computation|,
    non-compute = |∪ GPU| − compute (memory, communication and other GPU time not under
    compute)."""
    if gpu.n == 0:
        return {"rank": gpu.rank, "kernel_time_ns": 0, "idle_ns": 0, "compute_ns": 0,
                "non_compute_ns": 0}  # fmt: skip
    span = gpu.end.max() - gpu.ts.min()
    busy = union_length(gpu.ts, gpu.end)
    comp = gpu.kernel_type == COMPUTATION
    compute = union_length(gpu.ts[comp], gpu.end[comp])
    idle, non_compute = span - busy, busy - compute
    # HTA's rounding can give sub-µs events a negative duration; exact times never break this
    assert gpu.hta or (0 <= idle <= span and 0 <= compute <= busy), (gpu.rank, span, busy)
    u = gpu.unit_ns
    row = {
        "rank": gpu.rank,
        "kernel_time_ns": _ns(span, u),
        "idle_ns": _ns(idle, u),
        "compute_ns": _ns(compute, u),
        "non_compute_ns": _ns(non_compute, u),
        "idle_pct": _pct(idle, span),
        "compute_pct": _pct(compute, span),
        "non_compute_pct": _pct(non_compute, span),
    }
    if not gpu.hta:
        causes = gpu_idle_causes(gpu)
        assert sum(causes.values()) == idle, (gpu.rank, causes, idle)
        row.update({f"idle_{c}_ns": _ns(v, u) for c, v in causes.items()})
    return row


def gpu_idle_causes(gpu: GpuActivity) -> dict[str, int]:
    """The rank's GPU idle time (no stream busy) split by the cause of each gap: `host_wait`
    where the work that ends the gap was launched after the gap began (the CPU was late),
    `kernel_wait` where the gap is under 30 µs, else `other`. The three sum to the idle time."""
    lo, hi = merged(gpu.ts, gpu.end)
    gap_start, gap_end = hi[:-1], lo[1:]
    # the work that ends each gap: the GPU rows starting there, the earliest launched of them
    starting = np.isin(gpu.ts, gap_end)
    first_launch = np.full(len(gap_end), np.iinfo(np.int64).max, np.int64)
    at = np.searchsorted(gap_end, gpu.ts[starting])
    launch = gpu.launch_ts[starting]
    known = launch != NO_LAUNCH
    np.minimum.at(first_launch, at[known], launch[known])
    gap = gap_end - gap_start
    host = (first_launch > gap_start) & (first_launch != np.iinfo(np.int64).max)
    short = ~host & (gap * gpu.unit_ns < KERNEL_WAIT_BELOW_NS)
    return {
        "host_wait": int(gap[host].sum()),
        "kernel_wait": int(gap[short].sum()),
        "other": int(gap[~host & ~short].sum()),
    }


def comm_comp_overlap(gpu: GpuActivity) -> Row:
    """The share of communication time (∪ of NCCL/RCCL kernels) that compute overlaps."""
    comm = gpu.kernel_type == COMMUNICATION
    comp = gpu.kernel_type == COMPUTATION
    comm_len = union_length(gpu.ts[comm], gpu.end[comm])
    both = overlap_length((gpu.ts[comm], gpu.end[comm]), (gpu.ts[comp], gpu.end[comp]))
    return {
        "rank": gpu.rank,
        "communication_ns": _ns(comm_len, gpu.unit_ns),
        "overlapped_ns": _ns(both, gpu.unit_ns),
        "overlap_pct": _pct(both, comm_len),
    }


def kernel_type_shares(gpu: GpuActivity) -> list[Row]:
    """The union of computation, communication and memory time split into exclusive shares
    (e.g. "COMPUTATION overlapping COMMUNICATION"); other GPU time (syncs) is left out."""
    sets = [(gpu.ts[gpu.kernel_type == t], gpu.end[gpu.kernel_type == t]) for t, _ in _TYPE_BITS]
    shares = exclusive_shares(sets)
    total = sum(shares.values())
    return [
        {
            "rank": gpu.rank,
            "kernel_type": SHARE_NAMES[m],
            "total_ns": _ns(v, gpu.unit_ns),
            "pct": _pct(v, total, 1),
        }  # fmt: skip
        for m, v in sorted(shares.items(), key=lambda kv: -kv[1])
    ]


def top_kernels(gpu: GpuActivity, top: int) -> list[Row]:
    """Per kernel type, each name's count, total, max, min, mean and standard deviation, the
    `top` longest by total named and the rest as one `others` row.

    Exact: `others` aggregates the launches it holds. HTA's reading: where a type has more than
    `top` names, a name also goes to `others` when its running total passes the 80th percentile
    of the running totals, and every row's statistics are then over per-name totals (HTA's
    re-grouping: a named kernel's max = min = mean = total, std 0)."""
    rows: list[Row] = []
    for t in (COMPUTATION, COMMUNICATION, MEMORY):
        sel = np.nonzero(gpu.kernel_type == t)[0]
        if len(sel) == 0:
            continue
        codes = gpu.name.codes[sel]
        dur = gpu.dur[sel].astype(np.float64)
        names, inverse = np.unique(codes, return_inverse=True)
        inverse = inverse.ravel()
        count = np.bincount(inverse)
        total = np.bincount(inverse, weights=dur)
        order = _descending(total)
        many = len(names) > top
        hta = gpu.hta
        if many and hta:
            cum = np.cumsum(total[order])
            cut = np.quantile(cum, 0.8)
            other = (cum > cut) | (np.arange(len(order)) >= top)
        else:
            other = np.arange(len(order)) >= top
        kept = order[~other]
        for i in kept:
            mine = dur[inverse == i]
            if many and hta:
                stats = _stats(np.array([total[i]]))
                stats["count"] = int(count[i])
            else:
                stats = _stats(mine)
            rows.append(_kernel_row(gpu, t, _name(gpu, names[i]), stats))
        if other.any():
            gone = order[other]
            values = total[gone] if hta else dur[np.isin(inverse, gone)]
            stats = _stats(values)
            stats["count"] = int(count[gone].sum())
            rows.append(_kernel_row(gpu, t, "others", stats, names=len(gone)))
    return rows


def _descending(values: np.ndarray) -> np.ndarray:
    """pandas' descending sort (reverse, quicksort, reverse): HTA's order among equal totals."""
    idx = np.arange(len(values))[::-1]
    return idx[values[::-1].argsort(kind="quicksort")][::-1]


def _stats(values: np.ndarray) -> dict[str, float | int]:
    """count, total, max, min, mean and sample std of float64 `values`, as numpy's methods give
    them, by the ufuncs under them (the same pairwise sums): about 14 rows a rank, whose
    methods' wrappers cost more than their sums."""
    n = len(values)
    total = float(np.add.reduce(values))
    mean = total / n
    std = 0.0
    if n > 1:
        deviation = values - mean
        std = math.sqrt(float(np.add.reduce(deviation * deviation)) / (n - 1))
    return {"count": n, "total": total, "max": float(np.maximum.reduce(values)),
            "min": float(np.minimum.reduce(values)), "mean": mean, "std": std}  # fmt: skip


def _name(gpu: GpuActivity, code: int) -> str:
    return gpu.name.values[code] if code >= 0 else ""


def _kernel_row(gpu: GpuActivity, t: int, name: str, s: dict[str, Any], names: int = 1) -> Row:
    u = gpu.unit_ns
    return {
        "rank": gpu.rank,
        "kernel_type": TYPES[t],
        "name": name,
        "names": names,
        "count": int(s["count"]),
        "total_ns": _ns(s["total"], u),
        "mean_ns": s["mean"] * u,
        "min_ns": _ns(s["min"], u),
        "max_ns": _ns(s["max"], u),
        "std_ns": s["std"] * u,
    }


def idle_breakdown(gpu: GpuActivity) -> list[Row]:
    """Per stream, its idle gaps by cause: `host_wait` (the next kernel's launch call started
    after the stream had gone idle: the CPU was late), `kernel_wait` (a gap under 30 µs between
    kernels), `other`.

    Exact: a gap is the time from the end of all earlier work on the stream to the next start
    (overlapping kernels leave none); a kernel without a known launch is `other`. HTA: the gap
    from the previous kernel's end in start order (negative where kernels overlap), in HTA's
    row order and sort; kernels without a launch borrow the first event's start."""
    rows: list[Row] = []
    hta = gpu.hta
    ts, end, launch = gpu.ts, gpu.end, gpu.launch_ts
    lanes = gpu.lane[gpu.idle_row]
    if len(lanes) == 0:
        return rows
    _, first = np.unique(lanes, return_index=True)
    for lane in lanes[np.sort(first)]:  # streams in order of first appearance
        sel = np.nonzero(gpu.idle_row & (gpu.lane == lane))[0]
        if hta:
            sel = sel[np.argsort(ts[sel], kind="quicksort")]
            prev = end[sel][:-1]
        else:
            sel = sel[np.argsort(ts[sel], kind="stable")]
            prev = np.maximum.accumulate(end[sel])[:-1]
        gap = ts[sel][1:] - prev
        host = launch[sel][1:] > prev  # NO_LAUNCH never is
        if not hta:
            gap = np.maximum(gap, 0)
        kernel = ~host & (gap * gpu.unit_ns < KERNEL_WAIT_BELOW_NS)
        category = np.where(host, 0, np.where(kernel, 1, 2))
        sums = {c: gap[category == c].sum() for c in range(3) if (category == c).any() or c == 2}
        total = sum(sums.values())
        stream = int(gpu.stream[sel[0]])
        for c, value in sums.items():
            rows.append(
                {
                    "rank": gpu.rank,
                    "stream": stream,
                    "idle_category": IDLE_CATEGORIES[c],
                    "idle_ns": _ns(value, gpu.unit_ns),
                    "ratio": round(value / total, 2) if total else None,
                }  # fmt: skip
            )
    return rows


def launch_stats(gpu: GpuActivity) -> Row:
    """Kernel launches: the launching call's duration and the launch delay (kernel start − end of
    the call, 0 when the kernel starts first), count, mean, median, p95 and max."""
    pairs = gpu.launches
    u = gpu.unit_ns
    call = pairs["call_dur"].to_numpy().astype(np.float64) * u
    delay = np.maximum(
        (pairs["gpu_ts"].to_numpy() - pairs["call_ts"].to_numpy() - pairs["call_dur"].to_numpy())
        * u,
        0,
    ).astype(np.float64)
    row: Row = {"rank": gpu.rank, "launches": int(pairs.num_rows)}
    for prefix, values in (("call", call), ("delay", delay)):
        has = len(values) > 0
        row[f"{prefix}_mean_ns"] = float(values.mean()) if has else None
        row[f"{prefix}_p50_ns"] = float(np.median(values)) if has else None
        row[f"{prefix}_p95_ns"] = float(np.quantile(values, 0.95)) if has else None
        row[f"{prefix}_max_ns"] = float(values.max()) if has else None
    return row


def merged_busy(gpu: GpuActivity) -> tuple[np.ndarray, np.ndarray]:
    """The rank's GPU busy intervals (for per-window figures)."""
    return merged(gpu.ts, gpu.end)


# CUDA's launch queue holds this many kernels per stream; a launch beyond it blocks the CPU
# (HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM)
MAX_LAUNCH_QUEUE = 1024


def queue_lengths(gpu: GpuActivity, full_at: int = MAX_LAUNCH_QUEUE) -> list[Row]:
    """Per stream: how many launched kernels were queued or running (a launch call's start to
    its kernel's end), the most at once and the time-weighted mean from the stream's first
    launch to its last end; and the time its launch queue was full (`full_at` kernels launched
    and not started: the next launch blocks the CPU). Kernels without a known launch are left
    out."""
    rows: list[Row] = []
    known = gpu.launch_ts != NO_LAUNCH
    for lane in np.unique(gpu.lane[known]).tolist():
        sel = np.nonzero(known & (gpu.lane == lane))[0]
        times, depth = _depth(gpu.launch_ts[sel], gpu.end[sel])
        width = np.diff(times)
        span = times[-1] - times[0]
        waiting_times, waiting = _depth(gpu.launch_ts[sel], gpu.ts[sel])
        rows.append(
            {
                "rank": gpu.rank,
                "stream": int(gpu.stream[sel[0]]),
                "launches": len(sel),
                "max": int(depth.max()),
                "mean": float((depth[:-1] * width).sum() / span) if span > 0 else 0.0,
                "full_ns": int(np.diff(waiting_times)[waiting[:-1] >= full_at].sum()),
            }  # fmt: skip
        )
    return rows


def _depth(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The times the count of open intervals changes, and the count from each (at one instant,
    ends before starts)."""
    times = np.concatenate((starts, ends))
    steps = np.concatenate((np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)))
    order = np.lexsort((steps, times))
    return times[order], np.cumsum(steps[order])
