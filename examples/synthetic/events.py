"""One rank's events as Kineto JSON text: `RankEvents` holds a rank's simulated state (its clock,
thread stacks, stream queues, id counters) and renders each kind of event at the current time:
CPU ops and annotations, CUDA runtime calls, kernels, memcpys and memsets with their ``ac2g``
flows, GPU annotations, ``cuda_sync`` events, ``fwdbwd`` flows, python frames and the 'M'
metadata events. The phases of a step (`training`), the faults (`faults`) and the sync-kinds
phase (`sync_kinds`) are built from these."""

from __future__ import annotations

import random

from .config import COMPUTE_STREAM, NCCL_STREAM, SyntheticConfig
from .model import ENTER_FRAME, GEMMS, Kernel, Leaves, quote
from .timing import (
    EVENT_RECORD_NS,
    KERNEL_LATENCY_NS,
    LAUNCH_NS,
    MEMCPY_RT_NS,
    MEMSET_RT_NS,
    OP_GAP_NS,
    OP_POST_NS,
    OP_PRE_NS,
    PY_FRAME_NS,
    STREAM_WAIT_NS,
    SYNC_TAIL_NS,
)

MERGED_PID_STRIDE = 1_000_000
PROCESS_NAME = "python3.11"

CBID_MEMCPY = 31
CBID_MEMCPY_ASYNC = 41
CBID_MEMSET_ASYNC = 51
CBID_STREAM_SYNC = 131
CBID_EVENT_RECORD = 135
CBID_EVENT_SYNC = 137
CBID_STREAM_WAIT_EVENT = 147
CBID_DEVICE_SYNC = 165
CBID_LAUNCH_KERNEL = 211

CPU_OP = quote("cpu_op")
USER_ANNOTATION = quote("user_annotation")
PYTHON_FUNCTION = quote("python_function")

# ns -> µs with three decimals, as `_TS % divmod(ns, 1000)`: about twice as fast as an f-string
# on 19-digit ints, and it is the hottest expression here.
_TS = "%d.%03d"


def format_us(ns: int) -> str:
    """Nanoseconds as microseconds with exactly three decimals."""
    return _TS % divmod(ns, 1000)


def _cpu_pid(rank: int) -> int:
    """OS pid of `rank`'s training process (also the main thread's tid)."""
    return 1000 + rank


def _autograd_tid(rank: int) -> int:
    """tid of `rank`'s autograd (backward) thread."""
    return 101_000 + rank


# An open op: (absolute out index of its placeholder, -1 if deferred to its close; cat; name;
# "pid/tid" text; ts; External id; External id of the innermost cpu_op, itself or an ancestor,
# None if none; extra args; Ev Idx).
Frame = tuple[int, str, str, str, int, int, int | None, str, int]


class RankEvents:
    """One rank's simulated state and its events, rendered as JSON text at the current time."""

    def __init__(
        self, config: SyntheticConfig, rank: int, merged: bool, rank_in_args: bool
    ) -> None:
        self.cfg = config
        self.rank = rank
        self.rng = random.Random(f"tracegraph-synthetic:{config.seed}:{rank}")
        self.scale = config.straggler_factor if rank == config.straggler else 1.0
        self.gpu_scale = config.gpu_scale
        self.faults = frozenset(config.faults) if rank == config.fault_rank else frozenset()
        self.rand = self.rng.random
        # Hot CPU durations are lo + span * rand(), i.e. cpu() inlined.
        self.pre_lo, self.pre_span = self._jitter(OP_PRE_NS)
        self.post_lo, self.post_span = self._jitter(OP_POST_NS)
        self.gap_lo, self.gap_span = self._jitter(OP_GAP_NS)
        self.launch_lo, self.launch_span = self._jitter(LAUNCH_NS)
        self.device = config.device(rank)
        offset = rank * MERGED_PID_STRIDE if merged else 0
        self.cpu_pid = offset + _cpu_pid(rank)
        self.gpu_pid = offset + self.device
        self.merged = merged
        self.ra = f', "rank": {rank}' if merged and rank_in_args else ""
        self.main_loc = f'"pid": {self.cpu_pid}, "tid": {_cpu_pid(rank)}'
        self.bwd_loc = f'"pid": {self.cpu_pid}, "tid": {_autograd_tid(rank)}'
        self.main_stack: list[Frame] = []
        self.bwd_stack: list[Frame] = []
        self.loc, self.stack = self.main_loc, self.main_stack
        self.out: list[str | None] = []  # rendered events; None: an open op's placeholder
        self.out_base = 0  # absolute index of out[0]
        # Internal clock: ns since baseTimeNanoseconds, i.e. exactly what ts says (x 1000).
        self.t = config.start_ns - config.base_time_ns + int(self.rand() * 50_000)
        self.free = {COMPUTE_STREAM: self.t, NCCL_STREAM: self.t}
        for j in range(1, config.nccl_streams):
            self.free[NCCL_STREAM + j] = self.t
        slow = rank == config.slow_kernel_rank and config.slow_kernel_factor != 1.0
        self.slow_gemm = config.slow_kernel_factor if slow else 1.0
        self.side_free: dict[tuple[int, int], int] = {}  # (device, stream) of the sync phase
        self.corr = self.ext = self.flow_id = 1
        self.ev_idx = self.seq_nr = self.event_id = 0
        self.coll_seq = 1
        self.fwd_nodes: list[tuple[int, int]] = []
        self.pending_work: list[tuple[int, int, int, int]] = []
        self.pg_ranks = quote(str(list(range(config.ranks))))

    # ---- time -----------------------------------------------------------------------------
    def _jitter(self, mean_ns: int) -> tuple[float, float]:
        """(lo, span) of this rank's CPU durations with mean `mean_ns`."""
        return 0.8 * mean_ns * self.scale, 0.4 * mean_ns * self.scale

    def cpu(self, mean_ns: int) -> int:
        """A jittered CPU duration, slower on the straggler."""
        return int(mean_ns * self.scale * (0.8 + 0.4 * self.rand()))

    def gpu_dur(self, mean_ns: int) -> int:
        """A jittered GPU duration."""
        return int(mean_ns * (0.9 + 0.2 * self.rand()))

    def gap(self) -> None:
        """CPU time between sibling ops."""
        self.t += int(self.gap_lo + self.gap_span * self.rand())

    def use_thread(self, backward: bool) -> None:
        """Switch the current CPU thread."""
        if backward:
            self.loc, self.stack = self.bwd_loc, self.bwd_stack
        else:
            self.loc, self.stack = self.main_loc, self.main_stack

    # ---- CPU ops --------------------------------------------------------------------------
    def open_op(self, cat: str, name: str, extra: str = "", deferred: bool = False) -> Frame:
        """Start an op (cpu_op or user_annotation) at the current time. Its event goes where it
        opens (pre-order), or where it closes if `deferred` (long ops, so output can stream)."""
        ext, stack, out = self.ext, self.stack, self.out
        self.ext = ext + 1
        cpu_ext = ext if cat == CPU_OP else (stack[-1][6] if stack else None)
        idx = -1 if deferred else self.out_base + len(out)
        frame = (idx, cat, name, self.loc, self.t, ext, cpu_ext, extra, self.ev_idx)
        self.ev_idx += 1
        if not deferred:
            out.append(None)
        stack.append(frame)
        self.t += int(self.pre_lo + self.pre_span * self.rand())
        return frame

    def close_op(self) -> Frame:
        """End the innermost open op and render it."""
        frame = self.stack.pop()
        idx, cat, name, loc, ts, ext, _, extra, ev_idx = frame
        t = self.t = self.t + int(self.post_lo + self.post_span * self.rand())
        text = (
            f'{{"ph": "X", "cat": {cat}, "name": {name}, {loc}, "ts": {_TS % divmod(ts, 1000)}, '
            f'"dur": {_TS % divmod(t - ts, 1000)}, "args": {{"External id": {ext}, '
            f'"Record function id": {ext}, "Ev Idx": {ev_idx}{extra}{self.ra}}}}}'
        )
        if idx < 0:
            self.out.append(text)
        else:
            self.out[idx - self.out_base] = text
        return frame

    def runtime(self, name: str, cbid: int, dur: int) -> tuple[int, int, int | None]:
        """A CUDA runtime call of `dur` ns now; returns (ts, correlation, External id)."""
        ts, corr = self.t, self.corr
        self.corr += 1
        ext = self.stack[-1][6] if self.stack else None
        ext_arg = f'"External id": {ext}, ' if ext is not None else ""
        self.out.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", {self.loc}, '
            f'"ts": {_TS % divmod(ts, 1000)}, "dur": {_TS % divmod(dur, 1000)}, '
            f'"args": {{{ext_arg}"cbid": {cbid}, "correlation": {corr}{self.ra}}}}}'
        )
        self.t = ts + dur
        return ts, corr, ext

    # ---- GPU activity ---------------------------------------------------------------------
    def ac2g(self, corr: int, launch_ts: int, stream: int, start: int) -> None:
        """The launch → GPU activity flow pair."""
        self.out.append(
            f'{{"ph": "s", "id": {corr}, {self.loc}, "ts": {_TS % divmod(launch_ts, 1000)}, '
            f'"cat": "ac2g", "name": "ac2g"}},\n'
            f'{{"ph": "f", "id": {corr}, "pid": {self.gpu_pid}, "tid": {stream}, '
            f'"ts": {_TS % divmod(start, 1000)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )

    def launch_text(
        self,
        k: Kernel,
        stream: int,
        ts: int,
        dur: int,
        start: int,
        kdur: int,
        ext: int,
        corr: int,
        tail: str = "",
        device: int | None = None,
    ) -> str:
        """cudaLaunchKernel, its kernel and their ac2g flow pair, as one piece of JSON text
        (on `device`, else the rank's first)."""
        loc, gpu_pid, ra = self.loc, self.gpu_pid, self.ra
        if device is None:
            device = self.device
        else:
            gpu_pid += device - self.device
        launch_ts = _TS % divmod(ts, 1000)
        kernel_ts = _TS % divmod(start, 1000)
        return (
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", {loc}, '
            f'"ts": {launch_ts}, "dur": {_TS % divmod(dur, 1000)}, "args": {{"External id": {ext}, '
            f'"cbid": {CBID_LAUNCH_KERNEL}, "correlation": {corr}{ra}}}}},\n'
            f'{{"ph": "X", "cat": "kernel", "name": {k.name}, "pid": {gpu_pid}, "tid": {stream}, '
            f'"ts": {kernel_ts}, "dur": {_TS % divmod(kdur, 1000)}, '
            f'"args": {{"External id": {ext}, "queued": 0, "device": {device}, "context": 1, '
            f'"stream": {stream}, "correlation": {corr}, {k.static}{tail}{ra}}}}},\n'
            f'{{"ph": "s", "id": {corr}, {loc}, "ts": {launch_ts}, '
            f'"cat": "ac2g", "name": "ac2g"}},\n'
            f'{{"ph": "f", "id": {corr}, "pid": {gpu_pid}, "tid": {stream}, "ts": {kernel_ts}, '
            f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )

    def launch(self, k: Kernel) -> tuple[int, int]:
        """cudaLaunchKernel now (inside a cpu_op) and its kernel on the compute stream when that
        is free; returns the kernel's (start, end)."""
        ts = self.t
        dur = int(self.launch_lo + self.launch_span * self.rand())
        self.t = ts + dur
        corr = self.corr
        self.corr = corr + 1
        start = max(ts + dur + KERNEL_LATENCY_NS, self.free[COMPUTE_STREAM])
        kdur = int(k.mean_ns * (0.9 + 0.2 * self.rand()))
        self.free[COMPUTE_STREAM] = end = start + kdur
        ext = self.stack[-1][6]
        assert ext is not None
        self.out.append(self.launch_text(k, COMPUTE_STREAM, ts, dur, start, kdur, ext, corr))
        return start, end

    def leaf(self, name: str, k: Kernel, extra: str = "", scaled: bool = True) -> tuple[int, int]:
        """A leaf cpu_op that launches one kernel (fast path of open_op, launch, close_op); the
        kernel's duration times gpu_scale unless not `scaled` (tiny kernels stay tiny)."""
        rand, ext, ev_idx, ts = self.rand, self.ext, self.ev_idx, self.t
        self.ext, self.ev_idx = ext + 1, ev_idx + 1
        launch_ts = ts + int(self.pre_lo + self.pre_span * rand())
        dur = int(self.launch_lo + self.launch_span * rand())
        corr = self.corr
        self.corr = corr + 1
        start = max(launch_ts + dur + KERNEL_LATENCY_NS, self.free[COMPUTE_STREAM])
        kdur = int(k.mean_ns * (self.gpu_scale if scaled else 1.0) * (0.9 + 0.2 * rand()))
        if self.slow_gemm != 1.0 and k in GEMMS:
            kdur = int(kdur * self.slow_gemm)
        self.free[COMPUTE_STREAM] = start + kdur
        self.t = end = launch_ts + dur + int(self.post_lo + self.post_span * rand())
        self.out.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": {name}, {self.loc}, '
            f'"ts": {_TS % divmod(ts, 1000)}, "dur": {_TS % divmod(end - ts, 1000)}, '
            f'"args": {{"External id": {ext}, "Record function id": {ext}, "Ev Idx": {ev_idx}'
            f"{extra}{self.ra}}}}},\n"
            + self.launch_text(k, COMPUTE_STREAM, launch_ts, dur, start, kdur, ext, corr)
        )
        return start, start + kdur

    def copy_async(
        self, runtime: str, cbid: int, cat: str, name: str, nbytes: int, gbps: float
    ) -> None:
        """cudaMemcpyAsync / cudaMemsetAsync now and its GPU activity on the compute stream."""
        dur = self.cpu(MEMCPY_RT_NS if cbid == CBID_MEMCPY_ASYNC else MEMSET_RT_NS)
        ts, corr, ext = self.runtime(runtime, cbid, dur)
        start = max(ts + dur + KERNEL_LATENCY_NS, self.free[COMPUTE_STREAM])
        gdur = max(1_000, self.gpu_dur(int(nbytes / gbps)))
        s = COMPUTE_STREAM
        self.out.append(
            f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {self.gpu_pid}, "tid": {s}, '
            f'"ts": {_TS % divmod(start, 1000)}, "dur": {_TS % divmod(gdur, 1000)}, '
            f'"args": {{"External id": {ext}, '
            f'"device": {self.device}, "context": 1, "stream": {s}, "correlation": {corr}, '
            f'"bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / gdur:.6f}{self.ra}}}}}'
        )
        self.ac2g(corr, ts, s, start)
        self.free[s] = start + gdur

    def gpu_annotation(self, name: str, stream: int, start: int, end: int, ext: int) -> None:
        """A gpu_user_annotation spanning [start, end) on `stream`."""
        self.out.append(
            f'{{"ph": "X", "cat": "gpu_user_annotation", "name": {name}, "pid": {self.gpu_pid}, '
            f'"tid": {stream}, "ts": {_TS % divmod(start, 1000)}, '
            f'"dur": {_TS % divmod(end - start, 1000)}, '
            f'"args": {{"External id": {ext}{self.ra}}}}}'
        )

    def cuda_sync(
        self,
        kind: str,
        tid: int,
        ts: int,
        end: int,
        corr: int,
        ext: int | None,
        wait: tuple[int, int, int] | None = None,
        device: int | None = None,
    ) -> None:
        """A cuda_sync event; `wait` = (wait_on_stream, record correlation, cuda event id)."""
        if not self.cfg.with_cuda_sync:
            return
        gpu_pid = self.gpu_pid
        if device is None:
            device = self.device
        else:
            gpu_pid += device - self.device
        ext_arg = f'"External id": {ext}, ' if ext is not None else ""
        wait_args = ""
        if wait is not None:
            wait_args = (
                f'"wait_on_stream": {wait[0]}, "wait_on_cuda_event_record_corr_id": {wait[1]}, '
                f'"wait_on_cuda_event_id": {wait[2]}, '
            )
        stream = tid if kind in ("Stream Sync", "Stream Wait Event") else -1
        self.out.append(
            f'{{"ph": "X", "cat": "cuda_sync", "name": "{kind}", "pid": {gpu_pid}, '
            f'"tid": {tid}, "ts": {_TS % divmod(ts, 1000)}, "dur": {_TS % divmod(end - ts, 1000)}, '
            f'"args": {{{ext_arg}'
            f'"cuda_sync_kind": "{kind}", {wait_args}"stream": {stream}, "correlation": {corr}, '
            f'"device": {device}, "context": 1{self.ra}}}}}'
        )

    def stream_wait(self, waiting: int, on: int, record_corr: int, event_id: int) -> None:
        """cudaStreamWaitEvent: stream `waiting` waits on an event recorded on stream `on`."""
        dur = self.cpu(STREAM_WAIT_NS)
        ts, corr, ext = self.runtime("cudaStreamWaitEvent", CBID_STREAM_WAIT_EVENT, dur)
        self.cuda_sync(
            "Stream Wait Event", waiting, ts + 500, ts + dur, corr, ext, (on, record_corr, event_id)
        )

    def host_wait(self, runtime: str, cbid: int, until: int) -> tuple[int, int, int, int | None]:
        """A blocking runtime call returning when the GPU reaches `until`; (ts, end, corr, ext)."""
        ts = self.t
        end = max(until, ts + self.cpu(SYNC_TAIL_NS)) + self.cpu(SYNC_TAIL_NS)
        _, corr, ext = self.runtime(runtime, cbid, end - ts)
        return ts, end, corr, ext

    def record_event(self) -> tuple[int, int]:
        """cudaEventRecord now; returns (record correlation, cuda event id)."""
        _, corr, _ = self.runtime("cudaEventRecord", CBID_EVENT_RECORD, self.cpu(EVENT_RECORD_NS))
        self.event_id += 1
        return corr, self.event_id

    # ---- flows between forward and backward -------------------------------------------------
    def fwd_node(self) -> str:
        """Register a forward op creating an autograd node; returns its extra args."""
        self.seq_nr += 1
        self.fwd_nodes.append((self.seq_nr, self.flow_id))
        if self.cfg.with_fwdbwd:
            self.out.append(
                f'{{"ph": "s", "id": {self.flow_id}, {self.loc}, '
                f'"ts": {_TS % divmod(self.t, 1000)}, '
                f'"cat": "fwdbwd", "name": "fwdbwd"}}'
            )
        self.flow_id += 1
        return f', "Sequence number": {self.seq_nr}, "Fwd thread id": 0'

    def bwd_node(self, evaluate: str, node: str, leaves: Leaves) -> None:
        """One autograd node on the backward thread, its leaf ops launching kernels."""
        self.gap()
        self.open_op(CPU_OP, evaluate)
        seq, fid = self.fwd_nodes.pop()
        if self.cfg.with_fwdbwd:
            self.out.append(
                f'{{"ph": "f", "id": {fid}, {self.loc}, "ts": {_TS % divmod(self.t, 1000)}, '
                f'"cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}}'
            )
        self.open_op(CPU_OP, node, f', "Sequence number": {seq}, "Fwd thread id": 1')
        for leaf, kernel in leaves:
            self.gap()
            self.leaf(leaf, kernel)
        self.close_op()
        self.close_op()

    # ---- python frames --------------------------------------------------------------------
    def open_range(self, name: str, deferred: bool = False) -> Frame:
        """A record_function range; with python stacks, inside the `__enter__` frame that
        opens it, which closes after the range has started (the two do not nest)."""
        if not self.cfg.python_stacks:
            return self.open_op(USER_ANNOTATION, name, deferred=deferred)
        enter_ts = self.t
        self.t += PY_FRAME_NS
        frame = self.open_op(USER_ANNOTATION, name, deferred=deferred)
        self.t += PY_FRAME_NS
        self.python_event(ENTER_FRAME, enter_ts, self.t)
        return frame

    def python_event(self, name: str, ts: int, end: int) -> None:
        """A python_function event [ts, end] on the current thread, written now."""
        self.out.append(
            f'{{"ph": "X", "cat": {PYTHON_FUNCTION}, "name": {name}, {self.loc}, '
            f'"ts": {_TS % divmod(ts, 1000)}, "dur": {_TS % divmod(end - ts, 1000)}, '
            f'"args": {{"Python id": {self.ev_idx}, "Ev Idx": {self.ev_idx}{self.ra}}}}}'
        )
        self.ev_idx += 1

    # ---- output ---------------------------------------------------------------------------
    def take(self) -> list[str]:
        """The finished events rendered since the last call, up to the first open op."""
        out = self.out
        try:
            cut = out.index(None)
        except ValueError:
            cut = len(out)
        done, self.out = out[:cut], out[cut:]
        self.out_base += cut
        return done  # type: ignore[return-value]

    def metadata(self) -> list[str]:
        """process/thread name and sort-index 'M' events for this rank."""
        ts = format_us(self.cfg.start_ns - self.cfg.base_time_ns)
        tag = f"rank {self.rank}: " if self.merged else ""
        cpu, gpu, dev = self.cpu_pid, self.gpu_pid, self.device
        main_tid, bwd_tid = _cpu_pid(self.rank), _autograd_tid(self.rank)
        rows: list[tuple[str, int, int, str]] = [
            ("process_name", cpu, 0, _name(f"{tag}{PROCESS_NAME}")),
            ("process_labels", cpu, 0, '{"labels": "CPU"}'),
            ("process_sort_index", cpu, 0, f'{{"sort_index": {_cpu_pid(self.rank)}}}'),
            ("process_name", gpu, 0, _name(f"{tag}GPU {dev}" if tag else PROCESS_NAME)),
            ("process_labels", gpu, 0, f'{{"labels": "GPU {dev}"}}'),
            ("process_sort_index", gpu, 0, f'{{"sort_index": {16_777_216 + dev}}}'),
        ]
        threads = [
            (cpu, main_tid, f"thread {main_tid} (pt_main_thread)", main_tid),
            (cpu, bwd_tid, f"thread {bwd_tid} (pt_autograd_0)", bwd_tid),
            (gpu, COMPUTE_STREAM, f"stream {COMPUTE_STREAM} ", COMPUTE_STREAM),
            (gpu, NCCL_STREAM, f"stream {NCCL_STREAM} ", NCCL_STREAM),
        ]
        threads += [
            (gpu, NCCL_STREAM + j, f"stream {NCCL_STREAM + j} ", NCCL_STREAM + j)
            for j in range(1, self.cfg.nccl_streams)
        ]
        if self.cfg.with_cuda_sync:
            threads.append((gpu, -1, f"Device {dev}", -1))
        if self.cfg.sync_demo:
            for d in self.cfg.devices(self.rank):
                pid = gpu + d - dev
                if d != dev:
                    rows += [
                        ("process_name", pid, 0, _name(f"{tag}GPU {d}" if tag else PROCESS_NAME)),
                        ("process_labels", pid, 0, f'{{"labels": "GPU {d}"}}'),
                        ("process_sort_index", pid, 0, f'{{"sort_index": {16_777_216 + d}}}'),
                    ]
                for s in self.cfg.demo_streams:
                    if d != dev or s not in (COMPUTE_STREAM, NCCL_STREAM):
                        threads.append((pid, s, f"stream {s} ", s))
                if d != dev and self.cfg.with_cuda_sync:
                    threads.append((pid, -1, f"Device {d}", -1))
        for pid, tid, name, sort in threads:
            rows.append(("thread_name", pid, tid, _name(name)))
            rows.append(("thread_sort_index", pid, tid, f'{{"sort_index": {sort}}}'))
        return [
            f'{{"name": "{kind}", "ph": "M", "ts": {ts}, "pid": {pid}, "tid": {tid}, '
            f'"args": {args}}}'
            for kind, pid, tid, args in rows
        ]


def _name(text: str) -> str:
    """{"name": text} as JSON."""
    return f'{{"name": {quote(text)}}}'
