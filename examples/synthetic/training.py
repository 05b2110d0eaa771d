"""One rank's training loop, phase by phase: a step yields at each collective (a `CollRequest`,
answered with the collective's end) and at points where its events so far may be written out
(`FLUSH`)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from .config import COMPUTE_STREAM, NCCL_STREAM, SyntheticConfig
from .events import (
    CBID_DEVICE_SYNC,
    CBID_EVENT_SYNC,
    CBID_MEMCPY_ASYNC,
    CBID_MEMSET_ASYNC,
    CBID_STREAM_SYNC,
    CPU_OP,
    PYTHON_FUNCTION,
    USER_ANNOTATION,
)
from .faults import FaultInjection
from .model import (
    BACKWARD_LAYER,
    CALL_IMPL_FRAME,
    DATALOADER,
    FORWARD_LAYER,
    K_ADAMW,
    K_MSE,
    K_NCCL,
    MSE_BACKWARD,
    PARAMS_PER_LAYER,
    PROFILER_STEP_FRAME,
    TRAIN_STEP_FRAME,
    quote,
)
from .sync_kinds import SyncKindsPhase
from .timing import (
    DATALOADER_NS,
    HANDOFF_NS,
    KERNEL_LATENCY_NS,
    LAUNCH_NS,
    NCCL_BUS_GBPS,
    NCCL_LATENCY_NS,
    PY_FRAME_NS,
    STEP_GAP_NS,
)


def _transfer_ns(config: SyntheticConfig, nelems: int) -> int:
    """Ring all-reduce time of `nelems` float32 once every rank has arrived."""
    n = config.ranks
    return NCCL_LATENCY_NS + int(2 * (n - 1) / n * nelems * 4 / NCCL_BUS_GBPS)


@dataclass(frozen=True)
class CollRequest:
    """A rank's NCCL kernel is ready to start at `start_ns`; `simulate` answers with its end."""

    seq: int
    start_ns: int
    transfer_ns: int


FLUSH = None  # what a rank's step yields where its events so far may be written out
FLUSH_EVERY_LAYERS = 8


StepGen = Generator[CollRequest | None, int | None, None]


class Rank(FaultInjection, SyncKindsPhase):
    """Simulates one rank's training steps and renders their events as JSON text."""

    def step(self, i: int) -> StepGen:
        """Simulate training step `i`, yielding at each collective for its end time."""
        self.t += self.cpu(STEP_GAP_NS)
        py = self.cfg.python_stacks
        step_frame_ts = self.t
        if py:
            self.t += PY_FRAME_NS
        self.open_op(USER_ANNOTATION, quote(f"ProfilerStep#{i}"), deferred=True)
        if py:  # the profiler's step() frame closes inside the step it opened: no nesting
            self.t += PY_FRAME_NS
            self.python_event(PROFILER_STEP_FRAME, step_frame_ts, self.t)
            self.open_op(PYTHON_FUNCTION, TRAIN_STEP_FRAME, deferred=True)
        if i == 0 and "schedule_distortion" in self.faults:
            self.warm_up_pause()
        self._dataloader(i)
        self._h2d()
        self._zero_grad()
        yield from self._forward(i)
        if self.rank == self.cfg.gc_rank and self.cfg.gc_us:
            self.gc_pause(self.cfg.gc_us * 1000)
        yield from self._backward(all_reduce=self.cfg.no_sync != (self.rank, i))
        self._wait_gradients()
        self._optimizer()
        if "memory_churn" in self.faults:
            self.memory_churn()
        if self.cfg.item_sync:
            self._item()
        if self.cfg.host_syncs:
            self._timer()
        if "gc_stall" in self.faults:  # after the step's last sync: the GPU has nothing queued
            self.gc_pause()
        if "small_op_storm" in self.faults:  # after the step's sync: the GPU waits on each op
            self.small_op_storm()
        if self.cfg.sync_demo:
            self.sync_kinds_phase()
        if py:
            self.close_op()
        self.close_op()

    def _dataloader(self, i: int) -> None:
        """Fetch the batch; a long stall on the configured steps/ranks."""
        self.gap()
        self.open_range(DATALOADER)
        self.t += self.cpu(DATALOADER_NS)
        self.dataloader_delay(i)
        self.close_op()

    def _h2d(self) -> None:
        """batch.to('cuda'): a pinned host → device copy."""
        self.gap()
        for name in ("aten::to", "aten::_to_copy", "aten::copy_"):
            self.open_op(CPU_OP, quote(name))
        self.copy_async(
            "cudaMemcpyAsync",
            CBID_MEMCPY_ASYNC,
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            2 * 1024 * 1024,
            22.0,
        )
        for _ in range(3):
            self.close_op()

    def _zero_grad(self) -> None:
        """optimizer.zero_grad(): one memset."""
        self.gap()
        self.open_op(USER_ANNOTATION, quote("Optimizer.zero_grad#AdamW.zero_grad"))
        self.open_op(CPU_OP, quote("aten::zero_"))
        self.copy_async(
            "cudaMemsetAsync",
            CBID_MEMSET_ASYNC,
            "gpu_memset",
            "Memset (Device)",
            1024 * 1024,
            900.0,
        )
        self.close_op()
        self.close_op()

    def _forward(self, i: int) -> StepGen:
        """The model's forward pass plus the loss, with a GPU idle gap on some steps."""
        self.gap()
        if self.cfg.annotate:
            self.open_range(quote("forward"), deferred=True)
        if self.cfg.python_stacks:
            self.open_op(PYTHON_FUNCTION, CALL_IMPL_FRAME, deferred=True)
        ua = self.open_range(quote("DistributedDataParallel.forward"), deferred=True)
        first = last = 0
        gap_after = (self.cfg.layers - 1) // 2 if self.cfg.has_gap(i) else -1
        casts = "implicit_casts" in self.faults
        for layer in range(self.cfg.layers):
            for parent, leaf, kernel, node_on_leaf in FORWARD_LAYER:
                matmul = casts and parent == FORWARD_LAYER[0][0]
                if matmul:
                    self.cast()
                self.gap()
                self.open_op(CPU_OP, parent, "" if node_on_leaf else self.fwd_node())
                self.gap()
                start, last = self.leaf(leaf, kernel, self.fwd_node() if node_on_leaf else "")
                first = first or start
                self.close_op()
                if matmul:
                    self.cast()
            if layer == gap_after:
                self.idle_gap()
            if layer % FLUSH_EVERY_LAYERS == FLUSH_EVERY_LAYERS - 1:
                yield FLUSH
        self.close_op()
        self.gpu_annotation(ua[2], COMPUTE_STREAM, first, last, ua[5])
        if self.cfg.python_stacks:
            self.close_op()
        self.gap()
        self.leaf(quote("aten::mse_loss"), K_MSE, self.fwd_node())
        if self.cfg.annotate:
            self.close_op()

    def _backward(self, all_reduce: bool = True) -> StepGen:
        """loss.backward() on the autograd thread, all-reducing gradient buckets (none under
        `no_sync()`)."""
        self.gap()
        if self.cfg.annotate:
            self.open_op(USER_ANNOTATION, quote("backward"), deferred=True)
        self.open_op(USER_ANNOTATION, quote("## backward ##"), deferred=True)
        self.t += self.cpu(HANDOFF_NS)
        self.use_thread(backward=True)
        self.bwd_node(*MSE_BACKWARD)
        in_bucket = 0
        for layer in reversed(range(self.cfg.layers)):
            for node in BACKWARD_LAYER:
                self.bwd_node(*node)
            in_bucket += 1
            if (in_bucket == self.cfg.bucket_layers or layer == 0) and all_reduce:
                yield from self._allreduce(in_bucket * PARAMS_PER_LAYER)
                in_bucket = 0
        self.use_thread(backward=False)
        self.t += self.cpu(HANDOFF_NS)
        self.close_op()
        if self.cfg.annotate:
            self.close_op()

    def _allreduce(self, nelems: int) -> StepGen:
        """DDP bucket all-reduce: c10d::allreduce_ → record_param_comms → NCCL kernel."""
        seq = self.coll_seq
        self.coll_seq += 1
        comm = (
            f'"Collective name": "allreduce", "In msg nelems": {nelems}, '
            f'"Out msg nelems": {nelems}, "Group size": {self.cfg.ranks}, "dtype": "Float", '
            f'"In split size": "[]", "Out split size": "[]", "Process Group Name": "0", '
            f'"Process Group Description": "default_pg", "Process Group Ranks": {self.pg_ranks}, '
            f'"Seq": {seq}'
        )
        nccl_tail = ", " + comm
        self.gap()
        self.open_op(CPU_OP, quote("c10d::allreduce_"))
        self.gap()
        self.open_op(
            CPU_OP,
            quote("record_param_comms"),
            f', {comm}, "Global rank start": 0, "Global rank stride": 1',
        )
        stream = NCCL_STREAM + (seq - 1) % self.cfg.nccl_streams
        ready_corr, ready_event = self.record_event()
        ready = self.free[COMPUTE_STREAM]
        self.stream_wait(stream, COMPUTE_STREAM, ready_corr, ready_event)
        ua = self.open_op(USER_ANNOTATION, quote("nccl:all_reduce"))
        dur = self.cpu(LAUNCH_NS)
        ts, corr, ext = self.t, self.corr, self.stack[-1][6]
        self.t, self.corr = ts + dur, corr + 1
        start = max(ts + dur + KERNEL_LATENCY_NS, ready, self.free[stream])
        end = yield CollRequest(seq, start, _transfer_ns(self.cfg, nelems))
        assert end is not None, "simulate answers a collective with its end time"
        assert ext is not None
        kdur = end - start
        self.out.append(
            self.launch_text(K_NCCL, stream, ts, dur, start, kdur, ext, corr, nccl_tail)
        )
        self.gpu_annotation(ua[2], stream, start, end, ua[5])
        self.free[stream] = end
        self.close_op()
        done_corr, done_event = self.record_event()
        self.pending_work.append((end, done_corr, done_event, stream))
        self.close_op()
        self.close_op()

    def _wait_gradients(self) -> None:
        """The compute stream waits for every bucket's all-reduce."""
        for end, record_corr, event_id, stream in self.pending_work:
            self.gap()
            self.open_op(CPU_OP, quote("_c10d_functional::wait_tensor"))
            self.stream_wait(COMPUTE_STREAM, stream, record_corr, event_id)
            self.free[COMPUTE_STREAM] = max(self.free[COMPUTE_STREAM], end)
            self.close_op()
        self.pending_work.clear()

    def _optimizer(self) -> None:
        """optimizer.step(): one fused AdamW kernel per bucket (with optimizer_dominance, a few
        tiny ops per parameter)."""
        self.gap()
        ua = self.open_op(USER_ANNOTATION, quote("Optimizer.step#AdamW.step"))
        first = last = 0
        if "optimizer_dominance" in self.faults:
            first, last = self.per_parameter_updates()
        else:
            self.open_op(CPU_OP, quote("aten::_fused_adamw_"))
            for _ in range(self.cfg.buckets):
                start, last = self.launch(K_ADAMW)
                first = first or start
            self.close_op()
        self.close_op()
        self.gpu_annotation(ua[2], COMPUTE_STREAM, first, last, ua[5])

    def _item(self) -> None:
        """loss.item(): a DtoH copy and a stream synchronize (host waits for the GPU)."""
        self.gap()
        self.open_op(CPU_OP, quote("aten::item"))
        self.open_op(CPU_OP, quote("aten::_local_scalar_dense"))
        self.copy_async(
            "cudaMemcpyAsync",
            CBID_MEMCPY_ASYNC,
            "gpu_memcpy",
            "Memcpy DtoH (Device -> Pageable)",
            4,
            0.002,
        )
        ts, end, corr, ext = self.host_wait(
            "cudaStreamSynchronize", CBID_STREAM_SYNC, self.free[COMPUTE_STREAM]
        )
        self.cuda_sync("Stream Sync", COMPUTE_STREAM, ts + 1_000, end, corr, ext)
        self.close_op()
        self.close_op()

    def _timer(self) -> None:
        """Python-side step timing: event record + synchronize, then a device synchronize."""
        self.gap()
        record_corr, event_id = self.record_event()
        ts, end, corr, ext = self.host_wait(
            "cudaEventSynchronize", CBID_EVENT_SYNC, self.free[COMPUTE_STREAM]
        )
        self.cuda_sync(
            "Event Sync", -1, ts + 1_000, end, corr, ext, (COMPUTE_STREAM, record_corr, event_id)
        )
        ts, end, corr, ext = self.host_wait(
            "cudaDeviceSynchronize", CBID_DEVICE_SYNC, max(self.free.values())
        )
        self.cuda_sync("Context Sync", -1, ts + 1_000, end, corr, ext)
