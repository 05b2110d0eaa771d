"""Sync edges inferred from the runtime sync calls, for traces without `cuda_sync` events.

HTA sees synchronization only where Kineto wrote `cuda_sync` events. Without them, the calls
themselves still say what waited, and timing says for what:

- cudaStreamSynchronize (and hip*/cu* twins): the activity of the calling thread's last launch
  before the call;
- cudaEventSynchronize: the activity of the calling thread's last launch before its last
  cudaEventRecord (the event it waits for);
- cudaDeviceSynchronize / cuCtxSynchronize: on every stream, the activity of the last launch
  (any thread) before the call;
- cudaMemcpy / hipMemcpy (blocking copies): the copy the call launched, if it ended inside it;
- cudaStreamWaitEvent: the activity of the last launch, from the recording thread, before the
  last cudaEventRecord (any thread) preceding the wait → the activity of the waiting thread's
  next launch onto another stream.

A wait is kept only if the activity ended before the waiting call did (or, for a stream wait,
before the waiting activity started). Each becomes a sync edge (GPU end → call end, or GPU end →
GPU start); its SYNCS row is marked `source='inferred'`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .native_edges import SYNC_DEPENDENCY, Edges, make_edges
from .native_frame import KIND_KERNEL, Frame

STREAM_SYNC = ("cudaStreamSynchronize", "hipStreamSynchronize", "cuStreamSynchronize")
EVENT_SYNC = ("cudaEventSynchronize", "hipEventSynchronize", "cuEventSynchronize")
DEVICE_SYNC = ("cudaDeviceSynchronize", "hipDeviceSynchronize", "cuCtxSynchronize")
BLOCKING_COPY = ("cudaMemcpy", "hipMemcpy")
STREAM_WAIT = ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent")
EVENT_RECORD = ("cudaEventRecord", "hipEventRecord", "cuEventRecord")
SYNC_TYPES = ("Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event")


@dataclass(frozen=True)
class InferredSyncs:
    """Inferred waits over full-frame rows: GPU row → waiter (a call, or a GPU row)."""

    gpu_row: np.ndarray
    waiter_row: np.ndarray
    to_gpu: np.ndarray  # the waiter is a GPU row (Stream Wait Event)
    sync_type: np.ndarray  # index into SYNC_TYPES
    call_row: np.ndarray  # the runtime call the edge is inferred from

    def __len__(self) -> int:
        return len(self.gpu_row)


def infer_syncs(full: Frame) -> InferredSyncs:
    """Every inferred wait of one rank (its frame built with tracegraph's own rules)."""
    gpu = np.nonzero(full.kind == KIND_KERNEL)[0]
    launcher = full.position_of(full.index_correlation[gpu])
    linked = launcher >= 0
    gpu, launcher = gpu[linked], launcher[linked]
    launches = _Launches(full, gpu, launcher)
    end = full.end
    found: list[tuple[int, int, bool, int, int]] = []
    for call in np.nonzero(full.name_in(STREAM_SYNC))[0].tolist():
        k = launches.last_before(call, full.ts[call])
        if k >= 0 and end[k] <= end[call]:
            found.append((k, call, False, 0, call))
    for call in np.nonzero(full.name_in(EVENT_SYNC))[0].tolist():
        record = launches.record_before(call)
        k = launches.last_before(call, full.ts[record] if record >= 0 else full.ts[call])
        if k >= 0 and end[k] <= end[call]:
            found.append((k, call, False, 1, call))
    for call in np.nonzero(full.name_in(DEVICE_SYNC))[0].tolist():
        for k in launches.last_per_lane(full.ts[call]):
            if end[k] <= end[call]:
                found.append((k, call, False, 2, call))
    own = full.position_of(full.index_correlation)
    for call in np.nonzero(full.name_in(BLOCKING_COPY))[0].tolist():
        copy = int(own[call])
        if copy >= 0 and full.kind[copy] == KIND_KERNEL and end[copy] <= end[call]:
            found.append((copy, call, False, 0, call))
    for call in np.nonzero(full.name_in(STREAM_WAIT))[0].tolist():
        record = launches.record_before(call, any_thread=True)
        if record < 0:
            continue
        src = launches.last_before(record, full.ts[record])
        dest = (
            launches.first_after(call, full.ts[call], avoid_lane=full.stream[src])
            if src >= 0
            else -1
        )
        if dest >= 0 and full.ts[dest] >= end[src]:
            found.append((src, dest, True, 3, call))
    if not found:
        z = np.zeros(0, np.int64)
        return InferredSyncs(z, z, np.zeros(0, bool), z, z)
    cols = list(zip(*found, strict=True))
    return InferredSyncs(
        np.array(cols[0], np.int64),
        np.array(cols[1], np.int64),
        np.array(cols[2], bool),
        np.array(cols[3], np.int64),
        np.array(cols[4], np.int64),
    )


class _Launches:
    """Launches (and event records) per CPU thread in time order, for the lookups above."""

    def __init__(self, full: Frame, gpu: np.ndarray, launcher: np.ndarray) -> None:
        self.full = full
        self.thread = full.pid * (1 << 32) + (full.tid & 0xFFFFFFFF)
        order = np.lexsort((full.ts[launcher], self.thread[launcher]))
        self.l_thread = self.thread[launcher][order]
        self.l_ts = full.ts[launcher][order]
        self.l_gpu = gpu[order]
        by_launch = np.argsort(full.ts[launcher], kind="stable")
        self.g_ts, self.g_gpu = full.ts[launcher][by_launch], gpu[by_launch]
        records = np.nonzero(full.name_in(EVENT_RECORD))[0]
        r_order = np.lexsort((full.ts[records], self.thread[records]))
        self.records = records[r_order]
        self.r_thread = self.thread[self.records]
        self.r_ts = full.ts[self.records]

    def _span(self, keys: np.ndarray, call: int) -> tuple[int, int]:
        t = self.thread[call]
        return int(np.searchsorted(keys, t, "left")), int(np.searchsorted(keys, t, "right"))

    def last_before(self, call: int, time: int) -> int:
        """The GPU row of the call's thread's last launch before `time` (-1: none)."""
        lo, hi = self._span(self.l_thread, call)
        i = lo + int(np.searchsorted(self.l_ts[lo:hi], time, "left")) - 1
        return int(self.l_gpu[i]) if i >= lo else -1

    def first_after(self, call: int, time: int, avoid_lane: int) -> int:
        """The GPU row of the thread's first launch after `time` onto another stream."""
        lo, hi = self._span(self.l_thread, call)
        start = lo + int(np.searchsorted(self.l_ts[lo:hi], time, "right"))
        lanes = self.full.stream[self.l_gpu[start:hi]]
        other = np.nonzero(lanes != avoid_lane)[0]
        return int(self.l_gpu[start + other[0]]) if len(other) else -1

    def record_before(self, call: int, any_thread: bool = False) -> int:
        """The last cudaEventRecord before the call: on its thread, or on any (-1: none)."""
        time = self.full.ts[call]
        if any_thread:
            before = self.records[self.r_ts < time]
            return int(before[np.argmax(self.full.ts[before])]) if len(before) else -1
        lo, hi = self._span(self.r_thread, call)
        i = lo + int(np.searchsorted(self.r_ts[lo:hi], time, "left")) - 1
        return int(self.records[i]) if i >= lo else -1

    def last_per_lane(self, time: int) -> list[int]:
        """Per stream lane, the GPU row of the last launch (any thread) before `time`."""
        n = int(np.searchsorted(self.g_ts, time, "left"))
        lanes = self.full.stream[self.g_gpu[:n]]
        if n == 0:
            return []
        last = np.unique(lanes[::-1], return_index=True)[1]
        return [int(self.g_gpu[n - 1 - i]) for i in sorted(last.tolist(), reverse=True)]


def inferred_edges(
    full: Frame, clip: Frame, has_node: np.ndarray, syncs: InferredSyncs, times: np.ndarray
) -> Edges:
    """The inferred waits whose both ends are nodes of this window, as sync edges."""
    if len(syncs) == 0:
        return Edges.empty()
    gpu = clip.position_of(full.ev_idx[syncs.gpu_row])
    waiter = clip.position_of(full.ev_idx[syncs.waiter_row])
    ok = (gpu >= 0) & (waiter >= 0)
    ok[ok] = has_node[gpu[ok]] & has_node[waiter[ok]]
    dst = np.where(syncs.to_gpu, 2 * waiter, 2 * waiter + 1)
    return make_edges(2 * gpu[ok] + 1, dst[ok], SYNC_DEPENDENCY, times)
