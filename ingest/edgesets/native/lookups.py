"""HTA's launch lookups over a rank's full frame: queue lengths, event records, stream waits.

Each mirrors one HTA helper (`critical_path_analysis.py`, `trace_counters.py`), including the
sorts it does with pandas' default quicksort: ties among equal timestamps come out in the order
numpy's quicksort gives for the same array, so the arrays are built in HTA's row order and dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .frame import KIND_KERNEL, Frame, NotEmulable

LAUNCH_CALLS = frozenset(
    {
        "cudaMemsetAsync",
        "cudaMemcpyAsync",
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "runFunction - job_prep_and_submit_for_execution",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
    }
)
LAUNCH_CALLS_061 = LAUNCH_CALLS | {"cuLaunchKernelEx"}
MAXSIZE = np.iinfo(np.int64).max


def quicksort(values: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """pandas' `sort_values` order (numpy quicksort) of values held in `dtype`; a stable sort
    when `dtype` is None (tracegraph's own rules)."""
    if dtype is None:
        return np.argsort(values, kind="stable")
    return np.argsort(values.astype(dtype, copy=False), kind="quicksort")


def _launch_rows(full: Frame, names: frozenset[str] | None) -> np.ndarray:
    """Launch calls: HTA's name list, or (None) every call linked to a kernel."""
    ic = full.index_correlation
    if names is not None:
        return np.nonzero(full.name_in(names) & (ic > 0))[0]
    rows = np.nonzero((full.stream == -1) & (ic >= 0))[0]
    target = full.position_of(ic[rows])
    ok = target >= 0
    ok[ok] = full.kind[target[ok]] == KIND_KERNEL
    return rows[ok]


@dataclass(frozen=True)
class Launches:
    """HTA's `_get_cuda_runtime_calls_df`: launch calls in ts order with their kernel's place."""

    row: np.ndarray  # full-frame positions of the launch calls, launch_id = position here
    stream: np.ndarray  # the launched kernel's stream
    gpu: np.ndarray  # the launched kernel's pid


def launches(full: Frame, names: frozenset[str] | None, dtype: np.dtype | None) -> Launches:
    ic = full.index_correlation
    calls = _launch_rows(full, names)
    calls = calls[quicksort(full.ts[calls], dtype)]
    kernel = full.position_of(ic[calls])
    is_kernel = kernel >= 0
    back = ic[kernel[is_kernel]]
    linked = back > 0 if names is not None else back >= 0  # HTA: 0 is "no match"
    is_kernel[is_kernel] = (full.stream[kernel[is_kernel]] != -1) & linked
    calls, kernel = calls[is_kernel], kernel[is_kernel]
    return Launches(calls, full.stream[kernel], full.pid[kernel])


def left_join(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pandas' left join of two key columns: (left index, right index or -1), left order first."""
    order = np.argsort(right, kind="stable")
    keys = right[order]
    lo = np.searchsorted(keys, left, "left")
    count = np.searchsorted(keys, left, "right") - lo
    width = np.maximum(count, 1)
    left_idx = np.repeat(np.arange(len(left)), width)
    offset = np.arange(len(left_idx)) - np.repeat(np.cumsum(width) - width, width)
    matched = np.repeat(count > 0, width)
    at = np.minimum(np.repeat(lo, width) + offset, max(len(order) - 1, 0))
    right_idx = np.where(matched, order[at] if len(order) else -1, -1)
    return left_idx, right_idx


@dataclass(frozen=True)
class Queues:
    """Queue length on the kernel's stream at its launch call and at the kernel (NaN: none)."""

    at_launch: np.ndarray  # per full-frame row (meaningful at GPU rows)
    at_kernel: np.ndarray


def hta_queues(full: Frame, names: frozenset[str]) -> Queues | None:
    """HTA's `_get_queue_length_time_series_for_rank`, looked up as HTA joins it."""
    q = _hta_queue_series(full, names)
    if q is None:
        return None
    launcher = full.position_of(full.index_correlation)
    return Queues(np.where(launcher >= 0, q[np.maximum(launcher, 0)], np.nan), q)


def _hta_queue_series(full: Frame, names: frozenset[str]) -> np.ndarray | None:
    calls = _launch_rows(full, names)
    gpu = np.nonzero(full.stream != -1)[0]
    call_idx, gpu_idx = left_join(full.correlation[calls], full.correlation[gpu])
    kernels = gpu[np.isin(full.correlation[gpu], full.correlation[calls])]
    if len(call_idx) != len(kernels):
        raise NotEmulable("HTA's queue-length series fails (AssertionError)")
    rows = np.concatenate([calls[call_idx], kernels])
    matched = np.concatenate([gpu_idx >= 0, np.ones(len(kernels), bool)])
    stream = np.concatenate(
        [
            full.stream[gpu[np.maximum(gpu_idx, 0)]]
            if len(gpu)
            else np.zeros(len(gpu_idx), np.int64),
            full.stream[kernels],
        ]
    )
    step = np.concatenate([np.ones(len(call_idx), np.int64), -np.ones(len(kernels), np.int64)])
    merged = quicksort(full.ts[rows], full.ts_dtype)
    rows, matched, stream, step = rows[merged], matched[merged], stream[merged], step[merged]
    rows, stream, step = rows[matched], stream[matched], step[matched]
    if len(rows) == 0:
        return None
    queue = _running_by_stream(stream, step)
    if len(np.unique(rows)) != len(rows):
        raise NotEmulable("a launch matches several GPU rows; HTA's queue lookup repeats rows")
    out = np.full(full.n, np.nan)
    out[rows] = queue
    return out


def _running_by_stream(stream: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Running sum of `step` within each stream, in the given order."""
    by_stream = np.lexsort((np.arange(len(stream)), stream))
    s_stream, s_step = stream[by_stream], step[by_stream]
    total = np.cumsum(s_step)
    first = np.ones(len(s_step), bool)
    first[1:] = s_stream[1:] != s_stream[:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(s_step)), 0))
    out = np.empty(len(step), np.int64)
    out[by_stream] = total - (total - s_step)[base]
    return out


def native_queues(full: Frame) -> Queues:
    """Queue lengths per stream lane: +1 at every launch of a kernel, -1 at its start.

    A graph launch counts once per kernel; at equal times a start counts before a launch.
    """
    ic = full.index_correlation
    gpu = np.nonzero(full.kind == KIND_KERNEL)[0]
    launcher = full.position_of(ic[gpu])
    linked = launcher >= 0
    linked[linked] = full.stream[launcher[linked]] == -1
    gpu, launcher = gpu[linked], launcher[linked]
    times = np.concatenate([full.ts[launcher], full.ts[gpu]])
    step = np.concatenate([np.ones(len(gpu), np.int64), -np.ones(len(gpu), np.int64)])
    order = np.lexsort((np.arange(len(times)), step, times))
    stream = np.concatenate([full.stream[gpu], full.stream[gpu]])
    value = np.empty(len(times), np.int64)
    value[order] = _running_by_stream(stream[order], step[order])
    at_launch = np.full(full.n, np.nan)
    at_kernel = np.full(full.n, np.nan)
    at_launch[gpu] = value[: len(gpu)]
    at_kernel[gpu] = value[len(gpu) :]
    return Queues(at_launch, at_kernel)


def previous_launch_of_records(
    full: Frame, runs: Launches, dtype: np.dtype | None
) -> dict[int, int] | None:
    """HTA's `_get_cuda_event_record_df`: record correlation → label of the launch before it."""
    if "cudaEventRecord" not in full.symbols:
        return None
    records = np.nonzero(full.name_in(("cudaEventRecord",)))[0]
    records = records[quicksort(full.ts[records], dtype)]
    waits = np.nonzero(full.wait_on_stream > -1)[0]
    pairs = {
        (int(c), int(s), int(p))
        for c, s, p in zip(
            full.wait_corr[waits], full.wait_on_stream[waits], full.pid[waits], strict=True
        )
    }
    stream_of: dict[int, tuple[int, int]] = {}
    for corr, stream, gpu in pairs:
        if corr in stream_of:
            raise NotEmulable("a cudaEventRecord is waited on from two streams (HTA MergeError)")
        stream_of[corr] = (stream, gpu)
    rec_corr = full.correlation[records]
    has = np.array([int(c) in stream_of for c in rec_corr], bool)
    records, rec_corr = records[has], rec_corr[has]
    if len(records) == 0:
        return None
    rec_stream = np.array([stream_of[int(c)][0] for c in rec_corr], np.int64)
    rec_gpu = np.array([stream_of[int(c)][1] for c in rec_corr], np.int64)
    ts = np.concatenate([full.ts[runs.row], full.ts[records]])
    comb = quicksort(ts, dtype)
    n_launch = len(runs.row)
    launch_id = np.concatenate([np.arange(n_launch), np.full(len(records), -1)])[comb]
    stream = np.concatenate([runs.stream, rec_stream])[comb]
    gpu = np.concatenate([runs.gpu, rec_gpu])[comb]
    which = np.concatenate([np.full(n_launch, -1), np.arange(len(records))])[comb]
    out: dict[int, int] = {}
    key = np.stack([gpu, stream], axis=1)
    for g, s in {(int(g), int(s)) for g, s in zip(rec_gpu, rec_stream, strict=True)}:
        sel = np.nonzero((key[:, 0] == g) & (key[:, 1] == s))[0]
        prev = np.maximum.accumulate(launch_id[sel])
        rec = which[sel] >= 0
        for r, p in zip(which[sel][rec], prev[rec], strict=True):
            label = int(full.ev_idx[runs.row[p]]) if p >= 0 else -1
            out[int(rec_corr[r])] = label
    return out


def next_launch_of_stream_waits(
    full: Frame, runs: Launches, dtype: np.dtype | None
) -> dict[int, int] | None:
    """HTA's `_get_cuda_stream_wait_event_df`: cudaStreamWaitEvent label → next launch label."""
    if "cudaStreamWaitEvent" not in full.symbols or "Stream Wait Event" not in full.symbols:
        return None
    ic = full.index_correlation
    # HTA: 0 is "no match"; tracegraph's own frames (dtype None) say -1
    first = 1 if dtype is not None else 0
    waits = np.nonzero(full.name_in(("cudaStreamWaitEvent",)) & (ic >= first))[0]
    waits = waits[quicksort(full.ts[waits], dtype)]
    target = full.position_of(ic[waits])
    ok = target >= 0
    ok[ok] = (full.stream[target[ok]] != -1) & (ic[target[ok]] >= first)
    waits, target = waits[ok], target[ok]
    w_stream = full.stream[target]
    ts = np.concatenate([full.ts[runs.row], full.ts[waits]])
    comb = quicksort(ts, dtype)
    n_launch = len(runs.row)
    launch_id = np.concatenate([np.arange(n_launch), np.full(len(waits), MAXSIZE)])[comb]
    pid = np.concatenate([full.pid[runs.row], full.pid[waits]])[comb]
    tid = np.concatenate([full.tid[runs.row], full.tid[waits]])[comb]
    stream = np.concatenate([runs.stream, w_stream])[comb]
    which = np.concatenate([np.full(n_launch, -1), np.arange(len(waits))])[comb]
    out: dict[int, int] = {}
    groups = {
        (int(p), int(t), int(s))
        for p, t, s in zip(full.pid[waits], full.tid[waits], w_stream, strict=True)
    }
    for p, t, s in groups:
        sel = np.nonzero((pid == p) & (tid == t) & (stream == s))[0]
        nxt = np.minimum.accumulate(launch_id[sel][::-1])[::-1]
        is_wait = which[sel] >= 0
        for w, nl in zip(which[sel][is_wait], nxt[is_wait], strict=True):
            label = int(full.ev_idx[runs.row[nl]]) if nl != MAXSIZE else -1
            out[int(full.ev_idx[waits[w]])] = label
    return out
