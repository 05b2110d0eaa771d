"""Sync edges inferred from the runtime sync calls, for traces without `cuda_sync` events.

HTA sees synchronization only where Kineto wrote `cuda_sync` events. Without them, the calls
themselves still say what waited; what they do not say is *for what*: the runtime calls' args
carry no stream and no event handle (checked on every real trace here: `correlation`, `cbid`,
`External id` only). So the synced stream of a cudaStreamSynchronize, the event (which
cudaEventRecord) a cudaEventSynchronize / cudaEventQuery / cudaStreamWaitEvent refers to, the
stream that record was made on, and the stream a cudaStreamWaitEvent makes wait are all unknown.
We reproduce HTA's endpoints (`ingest/syncs.py`) for every reading of those unknowns that timing
allows, and keep the edge as `certain` only where all readings give the same edge:

- Stream Sync (cudaStreamSynchronize, hip*/cu* twins): per stream of the device, the last
  activity that started before the call ended (HTA's rule). Guess: the stream of the calling
  thread's last launch.
- Context Sync (cudaDeviceSynchronize / cuCtxSynchronize): that, on every stream of the device;
  certain (needs no stream), except on a rank with several devices (the device is then a guess:
  the one of the thread's last launch).
- blocking copies (cudaMemcpy / hipMemcpy): the copy the call launched, as a Stream Sync; certain.
- Event Sync (cudaEventSynchronize, and cudaEventQuery as HTA counts it): per cudaEventRecord
  before the call (any thread) and per stream, the activity of the last launch onto that stream
  before the record. Guess: the thread's last record, on the stream of the recording thread's
  last launch before it.
- Stream Wait Event (cudaStreamWaitEvent): that same activity → the activity of the calling
  thread's next launch onto the waiting stream (any other stream). Guess: the last record on any
  thread (a wait often waits for another thread's work), on the stream of the recording thread's
  last launch before it; the waiting stream is that of the thread's first launch after the wait
  onto another stream.

On a rank with several devices the calls do not name the device either: the guess is that of the
calling thread's last launch, and the readings of a stream sync, an event sync or a stream wait
span the streams of every device.

Timing rules readings out: a waited-for activity ends before the waiting call does (or, for a
stream wait, before the waiting activity starts); and a blocking call (stream or event
synchronize) that was still running when exactly one candidate ended, in the second half of the
call, waited for that one (a sync on finished work returns at once). A reading left alone is
certain. Each wait becomes a sync edge (GPU end → call end, or GPU end → GPU start) and a SYNCS
row with `source='inferred'`; an uncertain one (the guess) has '?' after its `sync_type`
(e.g. 'Event Sync?'). No guess, no edge: a wait with no record before it, or whose guess is
ruled out by timing, gives none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .edges import SYNC_DEPENDENCY, Edges, make_edges
from .frame import KIND_KERNEL, Frame

STREAM_SYNC = ("cudaStreamSynchronize", "hipStreamSynchronize", "cuStreamSynchronize")
EVENT_SYNC = ("cudaEventSynchronize", "hipEventSynchronize", "cuEventSynchronize")
EVENT_QUERY = ("cudaEventQuery", "hipEventQuery", "cuEventQuery")
DEVICE_SYNC = ("cudaDeviceSynchronize", "hipDeviceSynchronize", "cuCtxSynchronize")
BLOCKING_COPY = ("cudaMemcpy", "hipMemcpy")
STREAM_WAIT = ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent")
EVENT_RECORD = (
    "cudaEventRecord",
    "cudaEventRecordWithFlags",
    "hipEventRecord",
    "hipEventRecordWithFlags",
    "cuEventRecord",
    "cuEventRecordWithFlags",
)
SYNC_TYPES = ("Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event")
UNCERTAIN = "?"  # appended to the sync_type of an uncertain SYNCS row


@dataclass(frozen=True)
class InferredSyncs:
    """Inferred waits over full-frame rows: GPU row → waiter (a call, or a GPU row)."""

    gpu_row: np.ndarray
    waiter_row: np.ndarray
    to_gpu: np.ndarray  # the waiter is a GPU row (Stream Wait Event)
    sync_type: np.ndarray  # index into SYNC_TYPES
    call_row: np.ndarray  # the runtime call the edge is inferred from
    certain: np.ndarray  # False: the calls left other readings open; this one is the guess

    def __len__(self) -> int:
        return len(self.gpu_row)


def infer_syncs(full: Frame) -> InferredSyncs:
    """Every inferred wait of one rank (its frame built with tracegraph's own rules)."""
    t = _Timeline(full)
    found: list[tuple[int, int, bool, int, int, bool]] = []
    for call in np.nonzero(full.name_in(STREAM_SYNC))[0].tolist():
        found.extend(t.stream_sync(call))
    for call in np.nonzero(full.name_in(EVENT_SYNC + EVENT_QUERY))[0].tolist():
        found.extend(t.event_sync(call, blocking=bool(full.name_in(EVENT_SYNC)[call])))
    for call in np.nonzero(full.name_in(DEVICE_SYNC))[0].tolist():
        found.extend(t.context_sync(call))
    own = full.position_of(full.index_correlation)
    end = full.end
    for call in np.nonzero(full.name_in(BLOCKING_COPY))[0].tolist():
        copy = int(own[call])
        if copy >= 0 and full.kind[copy] == KIND_KERNEL and end[copy] <= end[call]:
            found.append((copy, call, False, 0, call, True))
    for call in np.nonzero(full.name_in(STREAM_WAIT))[0].tolist():
        found.extend(t.stream_wait(call))
    if not found:
        z = np.zeros(0, np.int64)
        return InferredSyncs(z, z, np.zeros(0, bool), z, z, np.zeros(0, bool))
    cols = list(zip(*found, strict=True))
    return InferredSyncs(
        np.array(cols[0], np.int64),
        np.array(cols[1], np.int64),
        np.array(cols[2], bool),
        np.array(cols[3], np.int64),
        np.array(cols[4], np.int64),
        np.array(cols[5], bool),
    )


def _spans(keys: np.ndarray) -> dict[int, tuple[int, int]]:
    """key → [lo, hi) of its run in a sorted array."""
    if len(keys) == 0:
        return {}
    uniq, first = np.unique(keys, return_index=True)
    last = np.append(first[1:], len(keys))
    return {int(k): (int(a), int(b)) for k, a, b in zip(uniq, first, last, strict=True)}


class _Timeline:
    """GPU activity per stream lane, launches per lane and per thread, and event records, in
    time order; each public method gives one sync call's waits (see the module docstring)."""

    def __init__(self, full: Frame) -> None:
        self.full = full
        self.end = full.end
        self.thread = full.pid * (1 << 32) + (full.tid & 0xFFFFFFFF)
        gpu = np.nonzero(full.kind == KIND_KERNEL)[0]
        # every activity, by lane then start
        a = gpu[np.lexsort((full.ts[gpu], full.stream[gpu]))]
        self.a_row, self.a_ts, self.a_span = a, full.ts[a], _spans(full.stream[a])
        self.lane_device = {lane: int(full.pid[a[lo]]) for lane, (lo, _) in self.a_span.items()}
        # launches: one per (launch call, lane), its last activity there (as HTA's `_launches`)
        launcher = full.position_of(full.index_correlation[gpu])
        linked = launcher >= 0
        call, act = launcher[linked], gpu[linked]
        order = np.lexsort((full.ts[act], full.stream[act], call))
        call, act = call[order], act[order]
        last = np.ones(len(call), bool)
        last[:-1] = (call[1:] != call[:-1]) | (full.stream[act[1:]] != full.stream[act[:-1]])
        call, act = call[last], act[last]
        by_lane = np.lexsort((full.ts[call], full.stream[act]))
        self.ll_ts, self.ll_act = full.ts[call[by_lane]], act[by_lane]
        self.ll_span = _spans(full.stream[act[by_lane]])
        by_thread = np.lexsort((full.ts[call], self.thread[call]))
        self.tl_ts, self.tl_act = full.ts[call[by_thread]], act[by_thread]
        self.tl_span = _spans(self.thread[call[by_thread]])
        records = np.nonzero(full.name_in(EVENT_RECORD))[0]
        self.records = records[np.lexsort((full.ts[records], self.thread[records]))]
        self.r_span = _spans(self.thread[self.records])
        self.r_times = np.unique(full.ts[records])

    # -- lookups ---------------------------------------------------------------------------

    def _lanes(self, device: int) -> list[int]:
        return [lane for lane, d in self.lane_device.items() if device < 0 or d == device]

    def _device(self, call: int) -> tuple[int, bool]:
        """The device a call syncs (that of its thread's last launch), and whether it is sure."""
        devices = set(self.lane_device.values())
        if len(devices) <= 1:
            return (devices.pop() if devices else -1), True
        act = self._thread_launch(call, self.full.ts[call])
        return (self.lane_device[int(self.full.stream[act])] if act >= 0 else -1), False

    def _last_activity(self, lane: int, time: int) -> int:
        """The lane's last activity that started before `time` (-1: none)."""
        lo, hi = self.a_span.get(lane, (0, 0))
        i = lo + int(np.searchsorted(self.a_ts[lo:hi], time, "left")) - 1
        return int(self.a_row[i]) if i >= lo else -1

    def _launched_before(self, lane: int, times: np.ndarray) -> np.ndarray:
        """Per time, the activity of the last launch onto the lane before it (-1: none)."""
        lo, hi = self.ll_span.get(lane, (0, 0))
        i = lo + np.searchsorted(self.ll_ts[lo:hi], times, "left") - 1
        return np.where(i >= lo, self.ll_act[np.maximum(i, 0)] if hi > lo else -1, -1)

    def _thread_launch(self, call: int, time: int) -> int:
        """The activity of the call's thread's last launch before `time` (-1: none)."""
        lo, hi = self.tl_span.get(int(self.thread[call]), (0, 0))
        i = lo + int(np.searchsorted(self.tl_ts[lo:hi], time, "left")) - 1
        return int(self.tl_act[i]) if i >= lo else -1

    def _thread_next(self, call: int, lanes: list[int]) -> dict[int, int]:
        """Per lane, the activity of the thread's first launch onto it after the call."""
        lo, hi = self.tl_span.get(int(self.thread[call]), (0, 0))
        start = lo + int(np.searchsorted(self.tl_ts[lo:hi], self.full.ts[call], "right"))
        acts = self.tl_act[start:hi]
        lane_of = self.full.stream[acts]
        out = {}
        for lane in lanes:
            at = np.nonzero(lane_of == lane)[0]
            if len(at):
                out[lane] = int(acts[at[0]])
        return out

    def _record(self, call: int, any_thread: bool) -> int:
        """The record a wait refers to, as a guess: the last before it on its thread (else on
        any), or with `any_thread` the last on any thread."""
        time = self.full.ts[call]
        lo, hi = self.r_span.get(int(self.thread[call]), (0, 0))
        i = lo + int(np.searchsorted(self.full.ts[self.records[lo:hi]], time, "left")) - 1
        if i >= lo and not any_thread:
            return int(self.records[i])
        before = self.records[self.full.ts[self.records] < time]
        return int(before[np.argmax(self.full.ts[before])]) if len(before) else -1

    def _recorded(self, call: int, any_thread: bool) -> tuple[np.ndarray, int]:
        """What the event a call waits on may have recorded: every activity that is the last
        launch onto a lane of its device before some record (any thread) before the call; and
        the guess (-1: no record before the call)."""
        ts = self.full.ts
        record = self._record(call, any_thread)
        if record < 0:
            return np.zeros(0, np.int64), -1
        device, sure = self._device(call)
        times = self.r_times[self.r_times < ts[call]]
        found = [self._launched_before(lane, times) for lane in self._lanes(device if sure else -1)]
        cands = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
        cands = cands[cands >= 0]
        own = self._thread_launch(record, ts[record])
        guess = -1
        if own >= 0:
            guess = int(
                self._launched_before(int(self.full.stream[own]), ts[record : record + 1])[0]
            )
        return cands, guess

    def _choose(self, call: int, cands: np.ndarray, guess: int, blocking: bool) -> tuple[int, bool]:
        """The waited-for activity among the timing-valid candidates, and whether it is sure."""
        end, ts = self.end, self.full.ts
        cands = np.unique(cands[end[cands] <= end[call]]) if len(cands) else cands
        if len(cands) == 1:
            return int(cands[0]), True
        if blocking and len(cands) > 1:
            late = cands[(end[cands] > ts[call]) & (2 * end[cands] >= ts[call] + end[call])]
            if len(late) == 1:
                return int(late[0]), True
        return (guess if guess >= 0 and guess in cands else -1), False

    # -- the sync calls --------------------------------------------------------------------

    def stream_sync(self, call: int) -> list[tuple[int, int, bool, int, int, bool]]:
        device, sure = self._device(call)
        lanes = self._lanes(device if sure else -1)  # the device too may be a guess
        cands = [self._last_activity(lane, self.end[call]) for lane in lanes]
        own = self._thread_launch(call, self.full.ts[call])
        guess = self._last_activity(int(self.full.stream[own]), self.end[call]) if own >= 0 else -1
        arr = np.array([c for c in cands if c >= 0], np.int64)
        src, sure = self._choose(call, arr, guess, blocking=True)
        return [(src, call, False, 0, call, sure)] if src >= 0 else []

    def context_sync(self, call: int) -> list[tuple[int, int, bool, int, int, bool]]:
        device, sure = self._device(call)
        out = []
        for lane in self._lanes(device):
            src = self._last_activity(lane, self.end[call])
            if src >= 0 and self.end[src] <= self.end[call]:
                out.append((src, call, False, 2, call, sure))
        return out

    def event_sync(self, call: int, blocking: bool) -> list[tuple[int, int, bool, int, int, bool]]:
        cands, guess = self._recorded(call, any_thread=False)
        src, sure = self._choose(call, cands, guess, blocking)
        return [(src, call, False, 1, call, sure)] if src >= 0 else []

    def stream_wait(self, call: int) -> list[tuple[int, int, bool, int, int, bool]]:
        cands, guess = self._recorded(call, any_thread=True)
        if guess < 0:
            return []
        stream, ts, end = self.full.stream, self.full.ts, self.end
        device, sure = self._device(call)
        nxt = self._thread_next(call, self._lanes(device if sure else -1))
        pairs = {
            (int(s), d)
            for lane, d in nxt.items()
            for s in cands[(stream[cands] != lane) & (end[cands] <= ts[d])].tolist()
        }
        if len(pairs) == 1:
            src, dest = pairs.pop()
            return [(src, dest, True, 3, call, True)]
        later = [d for lane, d in nxt.items() if lane != stream[guess]]
        dest = min(later, key=lambda d: (ts[d], d)) if later else -1
        if dest < 0 or (guess, dest) not in pairs:
            return []
        return [(guess, dest, True, 3, call, False)]


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
