"""GPU-side edges of a window as HTA's `_construct_graph_from_kernels` adds them.

HTA sorts the window's GPU rows (kernels, memcpy, memset, and `cuda_sync` rows by their end)
and walks them, keeping the last kernel per stream. Per kernel, in this order: its span
(operator_kernel), a pending GPU→GPU sync (`Stream Wait Event`), then either a launch delay (the
stream was idle at the launch: queue lengths 1 at the call and 0 at the kernel, and the previous
kernel and any synced-on kernel ended before the call) or a kernel→kernel delay from the previous
kernel on the stream (0.6.1: only under 1.5 ms). A `Stream Sync` or `Context Sync` row adds an
edge from the last kernel on its stream (every stream) to the end of its runtime call; an
`Event Sync` from the kernel of the last launch before the recorded event. The walk is replaced
by whole-array lookups that give the same edges in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .edges import (
    KERNEL_KERNEL_DELAY,
    KERNEL_LAUNCH_DELAY,
    OPERATOR_KERNEL,
    SYNC_DEPENDENCY,
    Edges,
    end_node,
    make_edges,
    node_times,
    ordered,
    start_node,
)
from .frame import DEVICE_SYNC_NAMES, KIND_KERNEL, KIND_SYNC, Frame, NotEmulable
from .lookups import Queues, quicksort


class HtaFails(Exception):
    """HTA raises or gives no path for this window; the message says what HTA reports."""


@dataclass(frozen=True)
class KernelLookups:
    """Per-rank lookups over the full frame (shared by every window of the rank)."""

    queues: Queues | None  # None: HTA has no queue-length series (it then fails)
    previous_launch: dict[int, int] | None  # record correlation → launch label
    next_launch: dict[int, int] | None  # cudaStreamWaitEvent label → launch label


@dataclass(frozen=True)
class KernelRules:
    """What differs between the versions in this pass."""

    kernel_gap_cutoff: float | None  # in frame units; None = no cutoff (0.5.0)
    int_cast_after_record_merge: bool  # 0.5.0 casts the frame to int after the record merge
    skip_missing_runtime: bool  # 0.6.1 skips a sync edge whose runtime call has no node
    hta: bool = True  # HTA's row selection and sort ties (else every GPU row, stable order)


def kernel_edges(
    full: Frame, clip: Frame, has_node: np.ndarray, look: KernelLookups, rules: KernelRules
) -> Edges:
    """Every edge of HTA's kernel pass for the clipped frame, in HTA's order."""
    ic = clip.index_correlation
    if look.queues is None:
        raise HtaFails("TypeError: 'NoneType' object is not subscriptable (no queue lengths)")
    if rules.hta:
        device_sync = clip.name_in(DEVICE_SYNC_NAMES)
        rows = np.nonzero(((clip.stream != -1) | device_sync) & (ic >= 0))[0]
    else:
        rows = np.nonzero((clip.kind == KIND_KERNEL) | (clip.kind == KIND_SYNC))[0]
    if len(rows) == 0:
        return Edges.empty()
    is_sync = clip.cat_in(("cuda_sync",))[rows]
    sort_by = np.where(is_sync, clip.end[rows], clip.ts[rows])
    if not rules.hta:
        s = rows[np.lexsort((clip.seq[rows], sort_by))]
    else:
        dtype = clip.ts_dtype
        if rules.int_cast_after_record_merge and look.previous_launch is not None:
            dtype = np.dtype(np.int64)
        elif clip.unit_ns != 1000 and (sort_by % 1000).any():
            dtype = np.dtype(np.float64)
        s = rows[quicksort(sort_by, dtype)]
    sync_s = clip.cat_in(("cuda_sync",))[s]
    times = node_times(clip.ts, clip.end)
    pos = np.arange(len(s))
    k_pos = pos[~sync_s]
    k_row = s[k_pos]
    k_stream = clip.stream[k_row]
    # previous kernel on the same stream
    by_stream = np.lexsort((k_pos, k_stream))
    prev = np.full(len(k_pos), -1, np.int64)
    same = np.zeros(len(k_pos), bool)
    same[1:] = k_stream[by_stream][1:] == k_stream[by_stream][:-1]
    prev[by_stream[1:][same[1:]]] = k_row[by_stream[:-1][same[1:]]]
    sync_src = _stream_wait_sources(full, clip, s, sync_s, k_pos, k_row, look, rules.hta)
    src_row = clip.position_of(sync_src)
    sync_ok = (src_row >= 0) & has_node[np.maximum(src_row, 0)]
    runtime_full = full.position_of(ic[k_row])
    runtime_ts = full.ts[np.maximum(runtime_full, 0)]
    k_full = full.position_of(clip.ev_idx[k_row])
    q_run = look.queues.at_launch[k_full]
    q_own = look.queues.at_kernel[k_full]
    prev_end = clip.end[np.maximum(prev, 0)]
    sync_end = clip.end[np.maximum(src_row, 0)]
    launch = (
        (q_run == 1)
        & (q_own == 0)
        & ((prev < 0) | (prev_end < runtime_ts))
        & (~sync_ok | (sync_end < runtime_ts))
    )
    kk = ~launch & (prev >= 0) & (~sync_ok | (sync_end < prev_end))
    if rules.kernel_gap_cutoff is not None:
        kk &= clip.ts[k_row] - prev_end < rules.kernel_gap_cutoff
    runtime_row = clip.position_of(ic[k_row])
    no_node = (runtime_row < 0) | ~has_node[np.maximum(runtime_row, 0)]
    if not rules.hta:
        launch &= ~no_node
    if (launch & no_node).any():
        raise HtaFails("AssertionError: Could not find runtime index (a launch has no node)")
    parts = [
        (
            k_pos,
            np.zeros(len(k_pos)),
            make_edges(start_node(k_row), end_node(k_row), OPERATOR_KERNEL, times),
        ),
        (
            k_pos[sync_ok],
            np.ones(int(sync_ok.sum())),
            make_edges(
                end_node(src_row[sync_ok]), start_node(k_row[sync_ok]), SYNC_DEPENDENCY, times
            ),
        ),
        (
            k_pos[launch],
            np.full(int(launch.sum()), 2),
            make_edges(
                start_node(runtime_row[launch]),
                start_node(k_row[launch]),
                KERNEL_LAUNCH_DELAY,
                times,
            ),
        ),
        (
            k_pos[kk],
            np.full(int(kk.sum()), 2),
            make_edges(end_node(prev[kk]), start_node(k_row[kk]), KERNEL_KERNEL_DELAY, times),
        ),
    ]
    parts += _cpu_sync_edges(full, clip, s, sync_s, k_pos, k_row, has_node, look, rules, times)
    return ordered(parts)


def _stream_wait_sources(
    full: Frame,
    clip: Frame,
    s: np.ndarray,
    sync_s: np.ndarray,
    k_pos: np.ndarray,
    k_row: np.ndarray,
    look: KernelLookups,
    hta: bool,
) -> np.ndarray:
    """Label of the kernel each kernel waits on (Stream Wait Event), -1 for none."""
    out = np.full(len(k_pos), -1, np.int64)
    swe = np.nonzero(sync_s & clip.name_in(("Stream Wait Event",))[s])[0]
    if len(swe) == 0 or look.previous_launch is None:
        return out
    pairs: list[tuple[int, int, int]] = []  # (dest label, position, src label)
    for p in swe.tolist():
        row = int(s[p])
        launch = look.previous_launch.get(int(clip.wait_corr[row]), -1)
        if launch == -1:
            continue
        src = int(full.index_correlation[full.position_of(np.array([launch]))[0]])
        if look.next_launch is None or int(clip.index_correlation[row]) not in look.next_launch:
            if not hta:
                continue
            raise NotEmulable("HTA looks up a cudaStreamWaitEvent it did not index (KeyError)")
        dest_launch = look.next_launch[int(clip.index_correlation[row])]
        if dest_launch < 0:
            continue
        dest = int(full.index_correlation[full.position_of(np.array([dest_launch]))[0]])
        pairs.append((dest, p, src))
    if not pairs:
        return out
    pairs.sort()
    dests = np.array([d for d, _, _ in pairs], np.int64)
    ats = np.array([p for _, p, _ in pairs], np.int64)
    srcs = np.array([x for _, _, x in pairs], np.int64)
    k_label = clip.ev_idx[k_row]
    # the last assignment to this kernel made before the kernel's own turn
    key = dests * (len(s) + 1) + ats
    q = k_label * (len(s) + 1) + k_pos
    i = np.searchsorted(key, q) - 1
    hit = (i >= 0) & (dests[np.maximum(i, 0)] == k_label)
    out[hit] = srcs[i[hit]]
    return out


def _cpu_sync_edges(
    full: Frame,
    clip: Frame,
    s: np.ndarray,
    sync_s: np.ndarray,
    k_pos: np.ndarray,
    k_row: np.ndarray,
    has_node: np.ndarray,
    look: KernelLookups,
    rules: KernelRules,
    times: np.ndarray,
) -> list[tuple[np.ndarray, np.ndarray, Edges]]:
    """Edges of Stream Sync, Context Sync and Event Sync rows into their runtime call's end."""
    src: list[int] = []
    dst: list[int] = []
    key1: list[int] = []
    key2: list[int] = []
    streams = clip.stream[k_row]
    first_seen: dict[int, int] = {}
    for p, st in zip(k_pos.tolist(), streams.tolist(), strict=True):
        first_seen.setdefault(st, p)
    stream_order = sorted(first_seen, key=first_seen.__getitem__)
    per_stream = {st: k_pos[streams == st] for st in stream_order}
    rows_of = {st: k_row[streams == st] for st in stream_order}

    def last_on(stream: int, p: int) -> int:
        positions = per_stream.get(stream)
        if positions is None:
            return -1
        i = int(np.searchsorted(positions, p)) - 1
        return int(rows_of[stream][i]) if i >= 0 else -1

    for p in np.nonzero(sync_s)[0].tolist():
        row = int(s[p])
        name = clip.name.at(row)
        runtime = int(clip.position_of(np.array([clip.index_correlation[row]]))[0])
        runtime_ok = runtime >= 0 and bool(has_node[runtime])
        gpu_rows: list[int] = []
        if name in ("Stream Wait Event", "Event Sync"):
            if name == "Stream Wait Event" or look.previous_launch is None:
                continue
            launch = look.previous_launch.get(int(clip.wait_corr[row]), -1)
            if launch == -1:
                continue
            label = int(full.index_correlation[full.position_of(np.array([launch]))[0]])
            r = int(clip.position_of(np.array([label]))[0])
            if r >= 0 and has_node[r]:
                gpu_rows = [r]
        elif name == "Stream Sync":
            r = last_on(int(clip.stream[row]), p)
            gpu_rows = [r] if r >= 0 else []
        elif name == "Context Sync":
            gpu_rows = [r for st in stream_order if (r := last_on(st, p)) >= 0]
        else:
            raise HtaFails(f"AssertionError: unexpected cuda_sync event {name}")
        if gpu_rows and not runtime_ok:
            if rules.skip_missing_runtime:
                continue
            raise HtaFails("AttributeError: a sync call has no node in the window")
        for j, r in enumerate(gpu_rows):
            src.append(2 * r + 1)
            dst.append(2 * runtime + 1)
            key1.append(p)
            key2.append(j)
    if not src:
        return []
    edges = make_edges(np.array(src), np.array(dst), SYNC_DEPENDENCY, times)
    return [(np.array(key1), np.array(key2), edges)]
