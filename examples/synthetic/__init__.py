"""Deterministic synthetic PyTorch-profiler (Kineto) traces of multi-rank DDP training.

One Kineto JSON object per rank, shaped like real traces (HTA's nccl_data, event_sync_trace,
TraceLens' b200 eager trace): CPU ops nested by time on a main and an autograd thread, CUDA
runtime calls with their kernels/memcpys/memsets (``ac2g`` flows, id = correlation), forward →
backward ``fwdbwd`` flows, DDP gradient all-reduces on NCCL stream 21, stream waits and host syncs
with ``cuda_sync`` events, a straggler rank, data-loader stalls and GPU idle gaps over 1.5 ms.

Per step, on each rank (L = ``layers``, B = ceil(L / ``bucket_layers``) all-reduce buckets)::

    main thread      ProfilerStep#i
                       enumerate(DataLoader)#...__next__      (stall on some steps/ranks)
                       aten::to > aten::_to_copy > aten::copy_ > cudaMemcpyAsync   (HtoD)
                       Optimizer.zero_grad#AdamW.zero_grad > aten::zero_ > cudaMemsetAsync
                       DistributedDataParallel.forward
                         per layer: aten::linear > aten::addmm, aten::relu > aten::clamp_min,
                                    aten::layer_norm > aten::native_layer_norm (each leaf launches)
                       aten::mse_loss
                       ## backward ##                          (main waits for the autograd thread)
                       _c10d_functional::wait_tensor > cudaStreamWaitEvent   (x B, stream 7 on 21)
                       Optimizer.step#AdamW.step > aten::_fused_adamw_ > B launches
                       aten::item > aten::_local_scalar_dense > cudaMemcpyAsync (DtoH),
                                                                cudaStreamSynchronize
                       cudaEventRecord, cudaEventSynchronize, cudaDeviceSynchronize (no op: no
                                                                "External id", as in real traces)
    autograd thread  autograd::engine::evaluate_function: MseLossBackward0 > ... (reverse layers)
                       after every ``bucket_layers`` layers: c10d::allreduce_ > record_param_comms
                         > cudaEventRecord, cudaStreamWaitEvent (21 on 7), nccl:all_reduce >
                           cudaLaunchKernel (ncclDevKernel_AllReduce_...), cudaEventRecord

Collectives: each rank's NCCL kernel starts when that rank's stream 21 is ready (its launch, the
compute event it waits on, the previous collective); every rank's instance of one collective (same
``Seq``) ends at max(start over ranks) + transfer time, so fast ranks show long NCCL kernels while
they wait for the straggler (CPU work ``straggler_factor`` slower).

Times are integer nanoseconds internally and written as microseconds with exactly three decimals
(``1712195495519689.047``); unix_ns = ``baseTimeNanoseconds`` + ts * 1000 (base 0 by default, so
``ts`` is absolute epoch µs and needs more than float64 precision to keep the nanoseconds).
Correlation ids, External ids, ``Seq`` and flow ids count up from the same value on every rank.
File order is not time order (ProfilerStep, the forward and ``## backward ##`` annotations come
after their contents). Stream Sync / Stream Wait Event ``cuda_sync`` events sit on the stream's
tid and may overlap its kernels, as in real Kineto; Event Sync / Context Sync use tid -1.

Merged output (`write_merged`): every rank in one traceEvents array, pid -> rank * 1_000_000 + pid
(GPU pids too, tids unchanged), ``args.rank`` on every X event (unless rank_in_args=False),
process_name 'M' events named "rank {r}: python3.11" / "rank {r}: GPU {d}", distributedInfo
{"world_size": N}; correlation, External and flow ids still collide across ranks.

Size, per rank and step: 50 L + 19 B + 48 events (plus 16 'M' events per rank), about
11.7 KB per layer + 5.4 KB per bucket + 10.5 KB, i.e. ~13 KB per rank-step-layer with the default
``bucket_layers=4``. The merged file is ~4 % bigger (args.rank, longer pids); gzip (level 1) is ~10x
smaller. So bytes ~ ranks * steps * (13_000 * layers + 10_500); see `estimate_bytes` and
`layers_for_bytes` (CLI ``--target-mb``). 1 GB ~ 8 ranks x 4 steps x 2400 layers, or 8 x 16 x 600.
Output streams every 8 forward layers and every bucket (~40 MB RSS for 1 GB); one core writes
~55-80 MB/s of JSON (1 GB in ~18 s), ~45 MB/s (of JSON) when gzipping.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip as gzip_module
import io
import json
import math
import random
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "SyntheticConfig",
    "collective_arrivals",
    "estimate_bytes",
    "expected_counts",
    "layers_for_bytes",
    "main",
    "write_merged",
    "write_per_rank",
]

COMPUTE_STREAM = 7
NCCL_STREAM = 21
SIDE_STREAM = 31  # the first of `extra_streams` side streams (sync-kinds phase only)
MERGED_PID_STRIDE = 1_000_000
PROCESS_NAME = "python3.11"
HIDDEN = 1024
PARAMS_PER_LAYER = HIDDEN * HIDDEN + 3 * HIDDEN  # linear weight + bias, layer-norm weight + bias
NCCL_BUS_GBPS = 180  # bytes per ns
NCCL_LATENCY_NS = 18_000
UNMATCHED_HANG_NS = 50_000_000  # a collective some rank never enters: runs to the trace's end

# Mean CPU-side durations (ns), jittered by ±20 % and scaled on the straggler.
OP_PRE_NS = 5_000
OP_POST_NS = 3_000
OP_GAP_NS = 2_000
LAUNCH_NS = 6_000
MEMCPY_RT_NS = 9_000
MEMSET_RT_NS = 7_000
EVENT_RECORD_NS = 2_500
STREAM_WAIT_NS = 2_000
SYNC_TAIL_NS = 3_000
DATALOADER_NS = 40_000
HANDOFF_NS = 15_000
STEP_GAP_NS = 30_000
KERNEL_LATENCY_NS = 1_500

CBID_MEMCPY = 31
CBID_MEMCPY_ASYNC = 41
CBID_MEMSET_ASYNC = 51
CBID_STREAM_SYNC = 131
CBID_EVENT_RECORD = 135
CBID_EVENT_SYNC = 137
CBID_STREAM_WAIT_EVENT = 147
CBID_DEVICE_SYNC = 165
CBID_LAUNCH_KERNEL = 211


def _q(text: str) -> str:
    """JSON string literal of `text`."""
    return json.dumps(text)


CPU_OP = _q("cpu_op")
USER_ANNOTATION = _q("user_annotation")
PYTHON_FUNCTION = _q("python_function")
PROFILER_STEP_FRAME = _q("torch/profiler/profiler.py(790): step")
TRAIN_STEP_FRAME = _q("train.py(120): train_step")
CALL_IMPL_FRAME = _q("torch/nn/modules/module.py(1747): _call_impl")
SLEEP_FRAME = _q("<built-in function sleep>")
GC_FRAME = _q("<built-in function collect>")
INJECTABLE_FAULTS = ("gc_stall", "implicit_casts", "small_op_storm", "optimizer_dominance",
                     "memory_churn", "schedule_distortion")  # fmt: skip
# a float → bfloat16 cast's arguments as record_shapes=True records them (c10 ScalarType 15)
CAST_TO_ARGS = (
    ', "Concrete Inputs": ["", "15", "False", "False", ""], '
    '"Input type": ["float", "Scalar", "Scalar", "Scalar", ""], '
    '"Input Dims": [[64, 256], [], [], [], []]'
)
CAST_TO_COPY_ARGS = (
    ', "Concrete Inputs": ["", "15", "", "", "", "False", ""], '
    '"Input type": ["float", "Scalar", "", "", "", "Scalar", ""], '
    '"Input Dims": [[64, 256], [], [], [], [], [], []]'
)
FAULT_PAUSE_NS = 8_000_000  # a GC pause; a slow first step's extra host work
STORM_OPS = 250
OPTIMIZER_PARAM_OPS = 300
CBID_MALLOC, CBID_FREE = 20, 16
ENTER_FRAME = _q("torch/autograd/profiler.py(760): __enter__")
PY_FRAME_NS = 2_000
DATALOADER = _q("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
NCCL_KERNEL_NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@dataclass(frozen=True)
class _Kernel:
    """A GPU kernel: JSON-quoted name, mean duration (ns) and the static tail of its args."""

    name: str
    mean_ns: int
    static: str


def _kernel(name: str, mean_ns: int, grid: int, block: int, regs: int, smem: int) -> _Kernel:
    """Kernel spec with occupancy args derived from an H100 (132 SMs)."""
    blocks_per_sm = grid / 132
    warps_per_sm = blocks_per_sm * block / 32
    occupancy = min(100, int(100 * min(warps_per_sm, 64) / 64))
    static = (
        f'"registers per thread": {regs}, "shared memory": {smem}, '
        f'"blocks per SM": {blocks_per_sm:.6f}, "warps per SM": {warps_per_sm:.6f}, '
        f'"grid": [{grid}, 1, 1], "block": [{block}, 1, 1], '
        f'"est. achieved occupancy %": {occupancy}'
    )
    return _Kernel(_q(name), mean_ns, static)


_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_{}_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"  # noqa: E501
_CLAMP = "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}"  # noqa: E501
_THRESH = "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}"  # noqa: E501
_MSE_BWD = "at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float, float)#1}"  # noqa: E501
_MEAN_OP = "at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>"  # noqa: E501
_ADAM_META = "at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>"
_ADAM_FN = "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>"  # noqa: E501
_ADAM_ARGS = "double*, double, double, double, double, double, bool, float const*, float const*"


def _elementwise(functor: str, arity: int) -> str:
    """Name of an at::native vectorized elementwise kernel."""
    array = f"at::detail::Array<char*, {arity}>"
    return f"void at::native::vectorized_elementwise_kernel<4, {functor}, {array} >(int, {functor}, {array})"  # noqa: E501


K_GEMM_FWD = _kernel(_GEMM.format("tn"), 30_000, 256, 128, 168, 98_304)
K_GEMM_DGRAD = _kernel(_GEMM.format("nn"), 30_000, 256, 128, 168, 98_304)
K_GEMM_WGRAD = _kernel(_GEMM.format("nt"), 33_000, 256, 128, 168, 98_304)
GEMMS = (K_GEMM_FWD, K_GEMM_DGRAD, K_GEMM_WGRAD)  # slow_kernel_rank's slow kernels
K_CLAMP = _kernel(_elementwise(_CLAMP, 2), 6_000, 8192, 128, 26, 0)
K_THRESHOLD_BWD = _kernel(_elementwise(_THRESH, 3), 8_000, 8192, 128, 28, 0)
K_LAYER_NORM = _kernel(
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    9_000,
    8192,
    256,
    40,
    0,
)
K_LAYER_NORM_BWD = _kernel(
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float>"
    "(float const*, float const*, float const*, float const*, float const*, float*, int)",
    14_000,
    8192,
    128,
    48,
    1_024,
)
K_MSE = _kernel(
    f"void at::native::reduce_kernel<512, 1, {_MEAN_OP} >({_MEAN_OP})", 5_000, 264, 512, 32, 16
)
K_MSE_BWD = _kernel(_elementwise(_MSE_BWD, 4), 4_000, 8192, 128, 30, 0)
K_CAST = _kernel("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda"
                 "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>", 3_000, 8192, 128,
                 24, 0)  # fmt: skip
K_TINY = _kernel(_elementwise(_CLAMP, 2), 1_500, 64, 128, 16, 0)
K_ADAMW = _kernel(
    f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{_ADAM_META}, {_ADAM_FN}, "
    f"{_ADAM_ARGS}>({_ADAM_META}, {_ADAM_FN}, {_ADAM_ARGS})",
    40_000,
    320,
    512,
    64,
    0,
)
K_NCCL = _kernel(NCCL_KERNEL_NAME, 0, 24, 640, 96, 87_568)

# Forward per layer: (parent op, leaf op, kernel, autograd node, Sequence number on the leaf?)
FORWARD_LAYER: tuple[tuple[str, str, _Kernel, bool], ...] = (
    (_q("aten::linear"), _q("aten::addmm"), K_GEMM_FWD, True),
    (_q("aten::relu"), _q("aten::clamp_min"), K_CLAMP, False),
    (_q("aten::layer_norm"), _q("aten::native_layer_norm"), K_LAYER_NORM, True),
)
_Leaves = tuple[tuple[str, _Kernel], ...]


def _node(node: str, *leaves: tuple[str, _Kernel]) -> tuple[str, str, _Leaves]:
    """(evaluate_function op name, autograd node name, leaf ops with their kernels), quoted."""
    quoted = tuple((_q(leaf), kernel) for leaf, kernel in leaves)
    return _q(f"autograd::engine::evaluate_function: {node}"), _q(node), quoted


# Backward per layer, in execution order.
BACKWARD_LAYER = (
    _node("NativeLayerNormBackward0", ("aten::native_layer_norm_backward", K_LAYER_NORM_BWD)),
    _node("ReluBackward0", ("aten::threshold_backward", K_THRESHOLD_BWD)),
    _node("AddmmBackward0", ("aten::mm", K_GEMM_DGRAD), ("aten::mm", K_GEMM_WGRAD)),
)
MSE_BACKWARD = _node("MseLossBackward0", ("aten::mse_loss_backward", K_MSE_BWD))


@dataclass(frozen=True)
class SyntheticConfig:
    """What to generate; the same config (and seed) gives byte-identical files.

    ranks, steps, layers: the size (events grow linearly in each, see the module docstring).
    straggler_rank: CPU work straggler_factor (>= 1) times slower; None: the last rank if
        ranks > 1. straggler_factor=1.0: no straggler.
    slow_gap_every: steps i with i % slow_gap_every == 0 leave the compute stream idle for
        slow_gap_us after all queued work, mid-forward (a kernel gap > 1.5 ms); 0: never.
    stall_every: steps i with i % stall_every == stall_every - 1 stall the data loader of rank
        i % ranks for stall_us; 0: never.
    bucket_layers: layers per DDP gradient bucket, i.e. per all-reduce.
    with_cuda_sync / with_fwdbwd: emit cuda_sync events / fwdbwd flows.
    late_rank, late_us: that rank sleeps late_us in a python `time.sleep` inside its data-loader
        range on every step, so it arrives late_us late at the step's first collective (a late
        rank, as a slow data loader or a host stall makes one); None / 0: no late rank.
    python_stacks: python_function events, as `with_stack=True` writes them: the training loop's
        frames around each phase, module `_call_impl` frames around the forward, and the
        profiler's own `step` frame, which opens before ProfilerStep#i and closes inside it (the
        ranges do not nest, as in real traces).
    annotate: nested `record_function` ranges: "forward" around DistributedDataParallel.forward
        and "backward" around ## backward ##.
    gpus_per_node: the device (GPU pid) of rank r is r % gpus_per_node (times
        devices_per_rank).
    sync_kinds, extra_streams, devices_per_rank, blocking_copy: a sync-kinds phase at the end of
        every step (on if any of them is set; off by default, leaving the output as it was): on
        each of the rank's devices_per_rank devices (device(rank) + j) and on its streams 7, 21
        and extra_streams side streams (31, 32, ...), kernels on every stream, a
        cudaStreamWaitEvent of stream 7 on each other stream, a cudaEventSynchronize on the
        last stream, a cudaStreamSynchronize per stream, with blocking_copy a blocking
        cudaMemcpy DtoH on stream 7 (whose cuda_sync event is a 'Stream Sync', as Kineto writes
        it), and a cudaDeviceSynchronize; each with its cuda_sync event (unless with_cuda_sync
        is False). All on the main thread, which syncs each device after launching onto it.
    start_ns: unix time of the first step (ns); base_time_ns: baseTimeNanoseconds, ts = (time -
        base_time_ns) / 1000; 0 writes absolute epoch µs.
    faults, fault_rank: faults of the report's catalog injected on fault_rank in every step
        (INJECTABLE_FAULTS; listed in that rank's file as "tracegraphFaults"): gc_stall (a GC
        pause with no op on any thread), implicit_casts (aten::to around every linear),
        small_op_storm (250 tiny elementwise ops launched one by one onto an idle GPU at the
        end of the step), optimizer_dominance (a
        per-parameter optimizer: 150 tiny ops instead of the fused kernel), memory_churn
        (cudaMalloc/cudaFree in the step), schedule_distortion (a slow first step).
    item_sync: loss.item() (a DtoH copy and a stream synchronize) at the end of every step.
    gpu_scale: GPU kernel durations times this (the defaults' are launch-bound: a compute-bound
        job, whose report has no findings, needs about 20).
    gc_rank, gc_us: that rank runs a gc.collect() of gc_us between the forward and the backward
        of every step (a `<built-in function collect>` python frame with python_stacks), so it
        arrives late at the step's all-reduces by about that much.
    slow_kernel_rank, slow_kernel_factor: that rank's GEMM kernels take this many times longer
        (one slow GPU).
    host_syncs: the step's timer syncs (cudaEventSynchronize, cudaDeviceSynchronize); without
        them, and without item_sync, the host never waits for the GPU: a wait on another rank
        shows only on the GPU's streams.
    nccl_streams: the all-reduces take turns on this many NCCL streams (21, 22, ...).
    host_names: each per-rank file names its host (`host_name`: node{rank // gpus_per_node}),
        as Kineto does; the ranks of one host share its clock.
    no_sync, stop_early_rank: unmatched collectives. no_sync (rank, step): that rank runs that
        step under DDP's `no_sync()`, entering none of its all-reduces; stop_early_rank: that
        rank ends its loop a step before the others (it decided to stop on its own). The
        collectives are then matched by their Seq across ranks, as NCCL matches them: after a
        skipped all-reduce, a rank's next one pairs with the others' of the step before, and a
        collective some rank never enters never completes (it runs UNMATCHED_HANG_NS, to the
        profiler's stop).
    The collectives' ground truth, every rank's arrival at each, is `collective_arrivals`.
    """

    ranks: int = 4
    steps: int = 3
    layers: int = 8
    seed: int = 0
    straggler_rank: int | None = None
    straggler_factor: float = 1.3
    slow_gap_every: int = 2
    slow_gap_us: int = 2_000
    stall_every: int = 3
    stall_us: int = 20_000
    bucket_layers: int = 4
    with_cuda_sync: bool = True
    with_fwdbwd: bool = True
    gpus_per_node: int = 8
    late_rank: int | None = None
    late_us: int = 0
    sync_kinds: bool = False
    extra_streams: int = 0
    devices_per_rank: int = 1
    blocking_copy: bool = False
    python_stacks: bool = False
    annotate: bool = False
    start_ns: int = 1_712_195_495_519_689_047
    base_time_ns: int = 0
    faults: tuple[str, ...] = ()
    fault_rank: int = 0
    item_sync: bool = True
    gpu_scale: float = 1.0
    gc_rank: int | None = None
    gc_us: int = 0
    slow_kernel_rank: int | None = None
    slow_kernel_factor: float = 1.0
    host_syncs: bool = True
    nccl_streams: int = 1
    host_names: bool = False
    no_sync: tuple[int, int] | None = None
    stop_early_rank: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "ranks",
            "steps",
            "layers",
            "bucket_layers",
            "gpus_per_node",
            "devices_per_rank",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.straggler_rank is not None and not 0 <= self.straggler_rank < self.ranks:
            raise ValueError("straggler_rank must be in range(ranks)")
        if self.late_rank is not None and not 0 <= self.late_rank < self.ranks:
            raise ValueError("late_rank must be in range(ranks)")
        if self.late_us < 0:
            raise ValueError("late_us must be >= 0")
        if self.extra_streams < 0:
            raise ValueError("extra_streams must be >= 0")
        if self.straggler_factor < 1.0:
            raise ValueError("straggler_factor must be >= 1")
        if min(self.slow_gap_every, self.stall_every, self.slow_gap_us, self.stall_us) < 0:
            raise ValueError("slow_gap_every, stall_every, slow_gap_us, stall_us must be >= 0")
        if not 0 <= self.base_time_ns <= self.start_ns:
            raise ValueError("base_time_ns must be in [0, start_ns]")
        unknown = sorted(set(self.faults) - set(INJECTABLE_FAULTS))
        if unknown:
            raise ValueError(f"faults {unknown}: injectable are {list(INJECTABLE_FAULTS)}")
        if not 0 <= self.fault_rank < self.ranks:
            raise ValueError("fault_rank must be in range(ranks)")
        if self.gpu_scale <= 0:
            raise ValueError("gpu_scale must be > 0")
        if self.no_sync is not None and not (
            0 <= self.no_sync[0] < self.ranks and 0 <= self.no_sync[1] < self.steps
        ):
            raise ValueError("no_sync must be (rank, step) of the job")
        if self.stop_early_rank is not None and self.steps < 2:
            raise ValueError("stop_early_rank needs steps >= 2")
        for name in ("gc_rank", "slow_kernel_rank", "stop_early_rank"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.ranks:
                raise ValueError(f"{name} must be in range(ranks)")
        if self.gc_us < 0 or self.slow_kernel_factor <= 0 or self.nccl_streams < 1:
            raise ValueError("gc_us must be >= 0, slow_kernel_factor > 0, nccl_streams >= 1")

    def injected(self, rank: int) -> list[dict[str, object]]:
        """The faults injected on `rank` (what its file lists as "tracegraphFaults")."""
        if rank != self.fault_rank:
            return []
        return [{"kind": k, "rank": rank, "steps": "all"} for k in self.faults]

    @property
    def straggler(self) -> int | None:
        """The rank whose CPU work is slower (None if there is none)."""
        if self.straggler_rank is not None:
            return self.straggler_rank
        return self.ranks - 1 if self.ranks > 1 else None

    @property
    def unmatched(self) -> bool:
        """Whether some rank skips collectives the others enter (no_sync, stop_early_rank)."""
        return self.no_sync is not None or self.stop_early_rank is not None

    def steps_of(self, rank: int) -> int:
        """How many steps `rank` runs."""
        return self.steps - 1 if rank == self.stop_early_rank else self.steps

    @property
    def buckets(self) -> int:
        """Gradient all-reduces per step."""
        return math.ceil(self.layers / self.bucket_layers)

    def has_gap(self, step: int) -> bool:
        """Whether `step` has a > 1.5 ms GPU idle gap in its forward pass."""
        return self.slow_gap_every > 0 and step % self.slow_gap_every == 0

    def stall_rank(self, step: int) -> int | None:
        """The rank whose data loader stalls in `step`, if any."""
        if self.stall_every > 0 and step % self.stall_every == self.stall_every - 1:
            return step % self.ranks
        return None

    def device(self, rank: int) -> int:
        """CUDA device id (= GPU pid) of `rank` (its first, with several devices per rank)."""
        return (rank % self.gpus_per_node) * self.devices_per_rank

    def devices(self, rank: int) -> list[int]:
        """Every device of `rank`."""
        return [self.device(rank) + j for j in range(self.devices_per_rank)]

    @property
    def sync_demo(self) -> bool:
        """Whether each step ends with the sync-kinds phase."""
        return (
            self.sync_kinds
            or self.extra_streams > 0
            or self.devices_per_rank > 1
            or self.blocking_copy
        )

    @property
    def demo_streams(self) -> list[int]:
        """The streams of each device in the sync-kinds phase."""
        return [COMPUTE_STREAM, NCCL_STREAM] + [SIDE_STREAM + j for j in range(self.extra_streams)]


# ns -> µs with three decimals, as `_TS % divmod(ns, 1000)`: about twice as fast as an f-string
# on 19-digit ints, and it is the hottest expression here.
_TS = "%d.%03d"


def _us(ns: int) -> str:
    """Nanoseconds as microseconds with exactly three decimals."""
    return _TS % divmod(ns, 1000)


def _cpu_pid(rank: int) -> int:
    """OS pid of `rank`'s training process (also the main thread's tid)."""
    return 1000 + rank


def _autograd_tid(rank: int) -> int:
    """tid of `rank`'s autograd (backward) thread."""
    return 101_000 + rank


def _transfer_ns(config: SyntheticConfig, nelems: int) -> int:
    """Ring all-reduce time of `nelems` float32 once every rank has arrived."""
    n = config.ranks
    return NCCL_LATENCY_NS + int(2 * (n - 1) / n * nelems * 4 / NCCL_BUS_GBPS)


@dataclass(frozen=True)
class _CollRequest:
    """A rank's NCCL kernel is ready to start at `start_ns`; the driver answers with its end."""

    seq: int
    start_ns: int
    transfer_ns: int


FLUSH = None  # what a rank's step yields where its events so far may be written out
FLUSH_EVERY_LAYERS = 8


# An open op: (absolute out index of its placeholder, -1 if deferred to its close; cat; name;
# "pid/tid" text; ts; External id; External id of the innermost cpu_op, itself or an ancestor,
# None if none; extra args; Ev Idx).
_Frame = tuple[int, str, str, str, int, int, int | None, str, int]


_StepGen = Generator[_CollRequest | None, int | None, None]


class _Rank:
    """Simulates one rank and renders its events as JSON text, one step at a time."""

    def __init__(self, config: SyntheticConfig, rank: int, merged: bool, rank_in_args: bool):
        self.cfg = config
        self.rank = rank
        self.rng = random.Random(f"tracegraph-synthetic:{config.seed}:{rank}")
        self.scale = config.straggler_factor if rank == config.straggler else 1.0
        self.gpu_scale = config.gpu_scale
        self.faults = frozenset(config.faults) if rank == config.fault_rank else frozenset()
        self.rand = self.rng.random
        # Hot CPU durations are lo + span * rand(), i.e. _cpu() inlined.
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
        self.main_stack: list[_Frame] = []
        self.bwd_stack: list[_Frame] = []
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
        self.pg_ranks = _q(str(list(range(config.ranks))))

    # ---- time -----------------------------------------------------------------------------
    def _jitter(self, mean_ns: int) -> tuple[float, float]:
        """(lo, span) of this rank's CPU durations with mean `mean_ns`."""
        return 0.8 * mean_ns * self.scale, 0.4 * mean_ns * self.scale

    def _cpu(self, mean_ns: int) -> int:
        """A jittered CPU duration, slower on the straggler."""
        return int(mean_ns * self.scale * (0.8 + 0.4 * self.rand()))

    def _gpu_dur(self, mean_ns: int) -> int:
        """A jittered GPU duration."""
        return int(mean_ns * (0.9 + 0.2 * self.rand()))

    def _gap(self) -> None:
        """CPU time between sibling ops."""
        self.t += int(self.gap_lo + self.gap_span * self.rand())

    def _use_thread(self, backward: bool) -> None:
        """Switch the current CPU thread."""
        if backward:
            self.loc, self.stack = self.bwd_loc, self.bwd_stack
        else:
            self.loc, self.stack = self.main_loc, self.main_stack

    # ---- CPU ops --------------------------------------------------------------------------
    def _open(self, cat: str, name: str, extra: str = "", deferred: bool = False) -> _Frame:
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

    def _close(self) -> _Frame:
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

    def _runtime(self, name: str, cbid: int, dur: int) -> tuple[int, int, int | None]:
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
    def _ac2g(self, corr: int, launch_ts: int, stream: int, start: int) -> None:
        """The launch → GPU activity flow pair."""
        self.out.append(
            f'{{"ph": "s", "id": {corr}, {self.loc}, "ts": {_TS % divmod(launch_ts, 1000)}, '
            f'"cat": "ac2g", "name": "ac2g"}},\n'
            f'{{"ph": "f", "id": {corr}, "pid": {self.gpu_pid}, "tid": {stream}, '
            f'"ts": {_TS % divmod(start, 1000)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )

    def _launch_text(
        self,
        k: _Kernel,
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

    def _launch(self, k: _Kernel) -> tuple[int, int]:
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
        self.out.append(self._launch_text(k, COMPUTE_STREAM, ts, dur, start, kdur, ext, corr))
        return start, end

    def _leaf(self, name: str, k: _Kernel, extra: str = "", scaled: bool = True) -> tuple[int, int]:
        """A leaf cpu_op that launches one kernel (fast path of _open, _launch, _close); the
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
            + self._launch_text(k, COMPUTE_STREAM, launch_ts, dur, start, kdur, ext, corr)
        )
        return start, start + kdur

    def _copy(self, runtime: str, cbid: int, cat: str, name: str, nbytes: int, gbps: float) -> None:
        """cudaMemcpyAsync / cudaMemsetAsync now and its GPU activity on the compute stream."""
        dur = self._cpu(MEMCPY_RT_NS if cbid == CBID_MEMCPY_ASYNC else MEMSET_RT_NS)
        ts, corr, ext = self._runtime(runtime, cbid, dur)
        start = max(ts + dur + KERNEL_LATENCY_NS, self.free[COMPUTE_STREAM])
        gdur = max(1_000, self._gpu_dur(int(nbytes / gbps)))
        s = COMPUTE_STREAM
        self.out.append(
            f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {self.gpu_pid}, "tid": {s}, '
            f'"ts": {_TS % divmod(start, 1000)}, "dur": {_TS % divmod(gdur, 1000)}, '
            f'"args": {{"External id": {ext}, '
            f'"device": {self.device}, "context": 1, "stream": {s}, "correlation": {corr}, '
            f'"bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / gdur:.6f}{self.ra}}}}}'
        )
        self._ac2g(corr, ts, s, start)
        self.free[s] = start + gdur

    def _gpu_annotation(self, name: str, stream: int, start: int, end: int, ext: int) -> None:
        """A gpu_user_annotation spanning [start, end) on `stream`."""
        self.out.append(
            f'{{"ph": "X", "cat": "gpu_user_annotation", "name": {name}, "pid": {self.gpu_pid}, '
            f'"tid": {stream}, "ts": {_TS % divmod(start, 1000)}, '
            f'"dur": {_TS % divmod(end - start, 1000)}, '
            f'"args": {{"External id": {ext}{self.ra}}}}}'
        )

    def _sync(
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

    def _stream_wait(self, waiting: int, on: int, record_corr: int, event_id: int) -> None:
        """cudaStreamWaitEvent: stream `waiting` waits on an event recorded on stream `on`."""
        dur = self._cpu(STREAM_WAIT_NS)
        ts, corr, ext = self._runtime("cudaStreamWaitEvent", CBID_STREAM_WAIT_EVENT, dur)
        self._sync(
            "Stream Wait Event", waiting, ts + 500, ts + dur, corr, ext, (on, record_corr, event_id)
        )

    def _host_wait(self, runtime: str, cbid: int, until: int) -> tuple[int, int, int, int | None]:
        """A blocking runtime call returning when the GPU reaches `until`; (ts, end, corr, ext)."""
        ts = self.t
        end = max(until, ts + self._cpu(SYNC_TAIL_NS)) + self._cpu(SYNC_TAIL_NS)
        _, corr, ext = self._runtime(runtime, cbid, end - ts)
        return ts, end, corr, ext

    def _record_event(self) -> tuple[int, int]:
        """cudaEventRecord now; returns (record correlation, cuda event id)."""
        _, corr, _ = self._runtime("cudaEventRecord", CBID_EVENT_RECORD, self._cpu(EVENT_RECORD_NS))
        self.event_id += 1
        return corr, self.event_id

    # ---- flows between forward and backward -------------------------------------------------
    def _fwd_node(self) -> str:
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

    def _bwd_node(self, evaluate: str, node: str, leaves: _Leaves) -> None:
        """One autograd node on the backward thread, its leaf ops launching kernels."""
        self._gap()
        self._open(CPU_OP, evaluate)
        seq, fid = self.fwd_nodes.pop()
        if self.cfg.with_fwdbwd:
            self.out.append(
                f'{{"ph": "f", "id": {fid}, {self.loc}, "ts": {_TS % divmod(self.t, 1000)}, '
                f'"cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}}'
            )
        self._open(CPU_OP, node, f', "Sequence number": {seq}, "Fwd thread id": 1')
        for leaf, kernel in leaves:
            self._gap()
            self._leaf(leaf, kernel)
        self._close()
        self._close()

    # ---- phases of a step -----------------------------------------------------------------
    def step(self, i: int) -> _StepGen:
        """Simulate training step `i`, yielding at each collective for its end time."""
        self.t += self._cpu(STEP_GAP_NS)
        py = self.cfg.python_stacks
        step_frame_ts = self.t
        if py:
            self.t += PY_FRAME_NS
        self._open(USER_ANNOTATION, _q(f"ProfilerStep#{i}"), deferred=True)
        if py:  # the profiler's step() frame closes inside the step it opened: no nesting
            self.t += PY_FRAME_NS
            self._python_event(PROFILER_STEP_FRAME, step_frame_ts, self.t)
            self._open(PYTHON_FUNCTION, TRAIN_STEP_FRAME, deferred=True)
        if i == 0 and "schedule_distortion" in self.faults:
            self.t += FAULT_PAUSE_NS  # a warm-up step: host work before anything is launched
        self._dataloader(i)
        self._h2d()
        self._zero_grad()
        yield from self._forward(i)
        if self.rank == self.cfg.gc_rank and self.cfg.gc_us:
            self._gc_pause(self.cfg.gc_us * 1000)
        yield from self._backward(all_reduce=self.cfg.no_sync != (self.rank, i))
        self._wait_gradients()
        self._optimizer()
        if "memory_churn" in self.faults:
            self._memory_churn()
        if self.cfg.item_sync:
            self._item()
        if self.cfg.host_syncs:
            self._timer()
        if "gc_stall" in self.faults:  # after the step's last sync: the GPU has nothing queued
            self._gc_pause()
        if "small_op_storm" in self.faults:  # e.g. a Python loop of tiny elementwise updates,
            for _ in range(STORM_OPS):  # after the step's sync: the GPU waits on each launch
                self._gap()
                self._leaf(_q("aten::add"), K_TINY, scaled=False)
        if self.cfg.sync_demo:
            self._sync_kinds()
        if py:
            self._close()
        self._close()

    def _open_range(self, name: str, deferred: bool = False) -> _Frame:
        """A record_function range; with python stacks, inside the `__enter__` frame that
        opens it, which closes after the range has started (the two do not nest)."""
        if not self.cfg.python_stacks:
            return self._open(USER_ANNOTATION, name, deferred=deferred)
        enter_ts = self.t
        self.t += PY_FRAME_NS
        frame = self._open(USER_ANNOTATION, name, deferred=deferred)
        self.t += PY_FRAME_NS
        self._python_event(ENTER_FRAME, enter_ts, self.t)
        return frame

    def _python_event(self, name: str, ts: int, end: int) -> None:
        """A python_function event [ts, end] on the current thread, written now."""
        self.out.append(
            f'{{"ph": "X", "cat": {PYTHON_FUNCTION}, "name": {name}, {self.loc}, '
            f'"ts": {_TS % divmod(ts, 1000)}, "dur": {_TS % divmod(end - ts, 1000)}, '
            f'"args": {{"Python id": {self.ev_idx}, "Ev Idx": {self.ev_idx}{self.ra}}}}}'
        )
        self.ev_idx += 1

    def _dataloader(self, i: int) -> None:
        """Fetch the batch; a long stall on the configured steps/ranks."""
        self._gap()
        self._open_range(DATALOADER)
        self.t += self._cpu(DATALOADER_NS)
        if self.cfg.stall_rank(i) == self.rank:
            self.t += self.cfg.stall_us * 1000
        if self.cfg.late_rank == self.rank and self.cfg.late_us:
            sleep_ts = self.t
            self.t += self.cfg.late_us * 1000
            self._python_event(SLEEP_FRAME, sleep_ts, self.t)
        self._close()

    def _h2d(self) -> None:
        """batch.to('cuda'): a pinned host → device copy."""
        self._gap()
        for name in ("aten::to", "aten::_to_copy", "aten::copy_"):
            self._open(CPU_OP, _q(name))
        self._copy(
            "cudaMemcpyAsync",
            CBID_MEMCPY_ASYNC,
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            2 * 1024 * 1024,
            22.0,
        )
        for _ in range(3):
            self._close()

    def _zero_grad(self) -> None:
        """optimizer.zero_grad(): one memset."""
        self._gap()
        self._open(USER_ANNOTATION, _q("Optimizer.zero_grad#AdamW.zero_grad"))
        self._open(CPU_OP, _q("aten::zero_"))
        self._copy(
            "cudaMemsetAsync",
            CBID_MEMSET_ASYNC,
            "gpu_memset",
            "Memset (Device)",
            1024 * 1024,
            900.0,
        )
        self._close()
        self._close()

    def _forward(self, i: int) -> _StepGen:
        """The model's forward pass plus the loss, with a GPU idle gap on some steps."""
        self._gap()
        if self.cfg.annotate:
            self._open_range(_q("forward"), deferred=True)
        if self.cfg.python_stacks:
            self._open(PYTHON_FUNCTION, CALL_IMPL_FRAME, deferred=True)
        ua = self._open_range(_q("DistributedDataParallel.forward"), deferred=True)
        first = last = 0
        gap_after = (self.cfg.layers - 1) // 2 if self.cfg.has_gap(i) else -1
        casts = "implicit_casts" in self.faults
        for layer in range(self.cfg.layers):
            for parent, leaf, kernel, node_on_leaf in FORWARD_LAYER:
                matmul = casts and parent == FORWARD_LAYER[0][0]
                if matmul:
                    self._cast()
                self._gap()
                self._open(CPU_OP, parent, "" if node_on_leaf else self._fwd_node())
                self._gap()
                start, last = self._leaf(leaf, kernel, self._fwd_node() if node_on_leaf else "")
                first = first or start
                self._close()
                if matmul:
                    self._cast()
            if layer == gap_after:  # host-side work while the GPU drains and idles
                self.t = max(self.t, self.free[COMPUTE_STREAM]) + self.cfg.slow_gap_us * 1000
            if layer % FLUSH_EVERY_LAYERS == FLUSH_EVERY_LAYERS - 1:
                yield FLUSH
        self._close()
        self._gpu_annotation(ua[2], COMPUTE_STREAM, first, last, ua[5])
        if self.cfg.python_stacks:
            self._close()
        self._gap()
        self._leaf(_q("aten::mse_loss"), K_MSE, self._fwd_node())
        if self.cfg.annotate:
            self._close()

    def _backward(self, all_reduce: bool = True) -> _StepGen:
        """loss.backward() on the autograd thread, all-reducing gradient buckets (none under
        `no_sync()`)."""
        self._gap()
        if self.cfg.annotate:
            self._open(USER_ANNOTATION, _q("backward"), deferred=True)
        self._open(USER_ANNOTATION, _q("## backward ##"), deferred=True)
        self.t += self._cpu(HANDOFF_NS)
        self._use_thread(backward=True)
        self._bwd_node(*MSE_BACKWARD)
        in_bucket = 0
        for layer in reversed(range(self.cfg.layers)):
            for node in BACKWARD_LAYER:
                self._bwd_node(*node)
            in_bucket += 1
            if (in_bucket == self.cfg.bucket_layers or layer == 0) and all_reduce:
                yield from self._allreduce(in_bucket * PARAMS_PER_LAYER)
                in_bucket = 0
        self._use_thread(backward=False)
        self.t += self._cpu(HANDOFF_NS)
        self._close()
        if self.cfg.annotate:
            self._close()

    def _allreduce(self, nelems: int) -> _StepGen:
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
        self._gap()
        self._open(CPU_OP, _q("c10d::allreduce_"))
        self._gap()
        self._open(
            CPU_OP,
            _q("record_param_comms"),
            f', {comm}, "Global rank start": 0, "Global rank stride": 1',
        )
        stream = NCCL_STREAM + (seq - 1) % self.cfg.nccl_streams
        ready_corr, ready_event = self._record_event()
        ready = self.free[COMPUTE_STREAM]
        self._stream_wait(stream, COMPUTE_STREAM, ready_corr, ready_event)
        ua = self._open(USER_ANNOTATION, _q("nccl:all_reduce"))
        dur = self._cpu(LAUNCH_NS)
        ts, corr, ext = self.t, self.corr, self.stack[-1][6]
        self.t, self.corr = ts + dur, corr + 1
        start = max(ts + dur + KERNEL_LATENCY_NS, ready, self.free[stream])
        end = yield _CollRequest(seq, start, _transfer_ns(self.cfg, nelems))
        assert end is not None, "the driver answers a collective with its end time"
        assert ext is not None
        kdur = end - start
        self.out.append(
            self._launch_text(K_NCCL, stream, ts, dur, start, kdur, ext, corr, nccl_tail)
        )
        self._gpu_annotation(ua[2], stream, start, end, ua[5])
        self.free[stream] = end
        self._close()
        done_corr, done_event = self._record_event()
        self.pending_work.append((end, done_corr, done_event, stream))
        self._close()
        self._close()

    def _wait_gradients(self) -> None:
        """The compute stream waits for every bucket's all-reduce."""
        for end, record_corr, event_id, stream in self.pending_work:
            self._gap()
            self._open(CPU_OP, _q("_c10d_functional::wait_tensor"))
            self._stream_wait(COMPUTE_STREAM, stream, record_corr, event_id)
            self.free[COMPUTE_STREAM] = max(self.free[COMPUTE_STREAM], end)
            self._close()
        self.pending_work.clear()

    def _optimizer(self) -> None:
        """optimizer.step(): one fused AdamW kernel per bucket."""
        self._gap()
        ua = self._open(USER_ANNOTATION, _q("Optimizer.step#AdamW.step"))
        first = last = 0
        if "optimizer_dominance" in self.faults:  # foreach=False: a few ops per parameter
            for j in range(OPTIMIZER_PARAM_OPS):
                self._gap()
                name = ("aten::mul_", "aten::add_", "aten::addcdiv_")[j % 3]
                start, last = self._leaf(_q(name), K_TINY, scaled=False)
                first = first or start
            self._close()
            self._gpu_annotation(ua[2], COMPUTE_STREAM, first, last, ua[5])
            return
        self._open(CPU_OP, _q("aten::_fused_adamw_"))
        for _ in range(self.cfg.buckets):
            start, last = self._launch(K_ADAMW)
            first = first or start
        self._close()
        self._close()
        self._gpu_annotation(ua[2], COMPUTE_STREAM, first, last, ua[5])

    def _cast(self) -> None:
        """x.to(torch.bfloat16) around a matmul: aten::to > aten::_to_copy > a copy kernel,
        with the arguments record_shapes=True records (a float source, target dtype 15)."""
        self._gap()
        self._open(CPU_OP, _q("aten::to"), CAST_TO_ARGS)
        self._gap()
        self._leaf(_q("aten::_to_copy"), K_CAST, CAST_TO_COPY_ARGS, scaled=False)
        self._close()

    def _memory_churn(self) -> None:
        """A cudaMalloc and a cudaFree inside the step (the caching allocator gave memory back)."""
        self._gap()
        self._runtime("cudaMalloc", CBID_MALLOC, self._cpu(40_000))
        self._gap()
        self._runtime("cudaFree", CBID_FREE, self._cpu(30_000))

    def _gc_pause(self, pause_ns: int = FAULT_PAUSE_NS) -> None:
        """gc.collect() in the loop: the interpreter runs no op on any thread meanwhile."""
        self._gap()
        ts = self.t
        self.t += pause_ns
        if self.cfg.python_stacks:
            self._python_event(GC_FRAME, ts, self.t)

    def _item(self) -> None:
        """loss.item(): a DtoH copy and a stream synchronize (host waits for the GPU)."""
        self._gap()
        self._open(CPU_OP, _q("aten::item"))
        self._open(CPU_OP, _q("aten::_local_scalar_dense"))
        self._copy(
            "cudaMemcpyAsync",
            CBID_MEMCPY_ASYNC,
            "gpu_memcpy",
            "Memcpy DtoH (Device -> Pageable)",
            4,
            0.002,
        )
        ts, end, corr, ext = self._host_wait(
            "cudaStreamSynchronize", CBID_STREAM_SYNC, self.free[COMPUTE_STREAM]
        )
        self._sync("Stream Sync", COMPUTE_STREAM, ts + 1_000, end, corr, ext)
        self._close()
        self._close()

    def _timer(self) -> None:
        """Python-side step timing: event record + synchronize, then a device synchronize."""
        self._gap()
        record_corr, event_id = self._record_event()
        ts, end, corr, ext = self._host_wait(
            "cudaEventSynchronize", CBID_EVENT_SYNC, self.free[COMPUTE_STREAM]
        )
        self._sync(
            "Event Sync", -1, ts + 1_000, end, corr, ext, (COMPUTE_STREAM, record_corr, event_id)
        )
        ts, end, corr, ext = self._host_wait(
            "cudaDeviceSynchronize", CBID_DEVICE_SYNC, max(self.free.values())
        )
        self._sync("Context Sync", -1, ts + 1_000, end, corr, ext)

    # ---- the sync-kinds phase (SyntheticConfig.sync_demo) ---------------------------------
    def _free_at(self, device: int, stream: int) -> int:
        """When (device, stream) is done with what was queued on it."""
        if device == self.device and stream in self.free:
            return self.free[stream]
        return self.side_free.get((device, stream), 0)

    def _set_free(self, device: int, stream: int, t: int) -> None:
        if device == self.device and stream in self.free:
            self.free[stream] = t
        else:
            self.side_free[device, stream] = t

    def _demo_launch(self, device: int, stream: int, k: _Kernel, after: int = 0) -> int:
        """cudaLaunchKernel now onto (device, stream), its kernel starting no earlier than
        `after`; returns the kernel's end."""
        ts = self.t
        dur = self._cpu(LAUNCH_NS)
        corr, ext = self.corr, self.stack[-1][6]
        assert ext is not None
        self.corr += 1
        start = max(ts + dur + KERNEL_LATENCY_NS, self._free_at(device, stream), after)
        kdur = self._gpu_dur(int(k.mean_ns * self.gpu_scale))
        self._set_free(device, stream, start + kdur)
        self.out.append(
            self._launch_text(k, stream, ts, dur, start, kdur, ext, corr, device=device)
        )
        self.t = ts + dur
        return start + kdur

    def _blocking_copy(self, device: int) -> None:
        """A blocking cudaMemcpy DtoH on (device, 7): the call returns once the copy is done;
        Kineto writes a 'Stream Sync' cuda_sync event for it."""
        ts, s = self.t, COMPUTE_STREAM
        start = max(ts + KERNEL_LATENCY_NS, self._free_at(device, s))
        gdur, nbytes = max(1_000, self._gpu_dur(8_000)), 4096
        end = start + gdur + self._cpu(SYNC_TAIL_NS)
        _, corr, ext = self._runtime("cudaMemcpy", CBID_MEMCPY, end - ts)
        gpu_pid = self.gpu_pid + device - self.device
        self.out.append(
            f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", '
            f'"pid": {gpu_pid}, "tid": {s}, "ts": {_us(start)}, "dur": {_us(gdur)}, '
            f'"args": {{"External id": {ext}, "device": {device}, "context": 1, "stream": {s}, '
            f'"correlation": {corr}, "bytes": {nbytes}, '
            f'"memory bandwidth (GB/s)": {nbytes / gdur:.6f}{self.ra}}}}}'
        )
        self.out.append(
            f'{{"ph": "s", "id": {corr}, {self.loc}, "ts": {_us(ts)}, '
            f'"cat": "ac2g", "name": "ac2g"}},\n'
            f'{{"ph": "f", "id": {corr}, "pid": {gpu_pid}, "tid": {s}, '
            f'"ts": {_us(start)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )
        self._set_free(device, s, start + gdur)
        self._sync("Stream Sync", s, ts + 1_000, end, corr, ext, device=device)

    def _sync_kinds(self) -> None:
        """Every sync kind on every device and stream of the rank (see SyntheticConfig)."""
        self._gap()
        self._open(CPU_OP, _q("tracegraph::sync_kinds"))
        streams = self.cfg.demo_streams
        for d in self.cfg.devices(self.rank):
            for s in streams:  # work on every stream
                self._gap()
                self._demo_launch(d, s, K_LAYER_NORM)
            for s in streams[1:]:  # stream 7 waits for the work just queued on s
                self._gap()
                ready = self._demo_launch(d, s, K_LAYER_NORM)
                record_corr, event_id = self._record_event()
                dur = self._cpu(STREAM_WAIT_NS)
                ts, corr, ext = self._runtime("cudaStreamWaitEvent", CBID_STREAM_WAIT_EVENT, dur)
                self._sync(
                    "Stream Wait Event",
                    COMPUTE_STREAM,
                    ts + 500,
                    ts + dur,
                    corr,
                    ext,
                    (s, record_corr, event_id),
                    device=d,
                )
                self._demo_launch(d, COMPUTE_STREAM, K_CLAMP, after=ready)
            last = streams[-1]  # the host waits for an event recorded on the last stream
            self._gap()
            self._demo_launch(d, last, K_GEMM_FWD)
            record_corr, event_id = self._record_event()
            ts, end, corr, ext = self._host_wait(
                "cudaEventSynchronize", CBID_EVENT_SYNC, self._free_at(d, last)
            )
            self._sync(
                "Event Sync",
                -1,
                ts + 1_000,
                end,
                corr,
                ext,
                (last, record_corr, event_id),
                device=d,
            )
            for s in streams:  # and for each stream
                self._gap()
                self._demo_launch(d, s, K_GEMM_FWD)
                ts, end, corr, ext = self._host_wait(
                    "cudaStreamSynchronize", CBID_STREAM_SYNC, self._free_at(d, s)
                )
                self._sync("Stream Sync", s, ts + 1_000, end, corr, ext, device=d)
            if self.cfg.blocking_copy:
                self._gap()
                self._blocking_copy(d)
            self._gap()
            until = max(self._free_at(d, s) for s in streams)
            ts, end, corr, ext = self._host_wait("cudaDeviceSynchronize", CBID_DEVICE_SYNC, until)
            self._sync("Context Sync", -1, ts + 1_000, end, corr, ext, device=d)
        self._close()

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
        ts = _us(self.cfg.start_ns - self.cfg.base_time_ns)
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
    return f'{{"name": {_q(text)}}}'


def _advance(gen: _StepGen, value: int | None) -> tuple[bool, _CollRequest | None]:
    """Resume a rank's step: (False, None) once it is over, else (True, what it yielded)."""
    try:
        return True, gen.send(value)
    except StopIteration:
        return False, None


Arrivals = dict[int, dict[int, dict[int, int]]]  # step → collective Seq → rank → start (ns)


def _run_step(
    ranks: Sequence[_Rank], step: int, arrivals: Arrivals | None = None
) -> Iterator[list[list[str]]]:
    """Run one step on every rank in lock step, resolving each collective across ranks;
    yields the per-rank events finished so far at every collective and flush point."""
    gens = [r.step(step) for r in ranks]
    answer: int | None = None
    while True:
        states = [_advance(g, answer) for g in gens]
        running = {alive for alive, _ in states}
        requests = [request for _, request in states]
        if running == {False}:
            break
        kinds = {(r.seq, r.transfer_ns) if r else None for r in requests}
        if running != {True} or len(kinds) != 1:
            raise RuntimeError(f"ranks out of lock step in step {step}: {kinds}")
        answer = None
        if requests[0] is not None:
            answer = max(r.start_ns for r in requests if r) + requests[0].transfer_ns
            if arrivals is not None:
                arrivals.setdefault(step, {})[requests[0].seq] = {
                    rank.rank: r.start_ns for rank, r in zip(ranks, requests, strict=True) if r
                }
        yield [r.take() for r in ranks]
    yield [r.take() for r in ranks]


def _run_unmatched(ranks: Sequence[_Rank], config: SyntheticConfig) -> Iterator[list[list[str]]]:
    """Every rank through its own steps, its collectives matched by Seq across ranks (see
    SyntheticConfig's no_sync): the lowest Seq pending is answered once every rank still running
    waits on a collective; with every rank in it, as `_run_step` answers, else it never
    completes."""

    def loop(rank: _Rank) -> _StepGen:
        for i in range(config.steps_of(rank.rank)):
            yield from rank.step(i)

    gens = {r.rank: loop(r) for r in ranks}
    pending: dict[int, _CollRequest] = {}
    answers: dict[int, int | None] = {}
    while gens:
        for rank in sorted(set(gens) - set(pending)):
            while True:  # on through flush points to its next collective, or its end
                alive, request = _advance(gens[rank], answers.pop(rank, None))
                if not alive:
                    del gens[rank]
                    break
                if request is not None:
                    pending[rank] = request
                    break
        yield [r.take() for r in ranks]
        if not pending:
            break
        seq = min(r.seq for r in pending.values())
        entered = {rank: r for rank, r in pending.items() if r.seq == seq}
        last = max(r.start_ns for r in entered.values())
        for rank, r in entered.items():
            complete = len(entered) == len(ranks)
            answers[rank] = last + r.transfer_ns if complete else r.start_ns + UNMATCHED_HANG_NS
            del pending[rank]
    yield [r.take() for r in ranks]


def _chunks(
    config: SyntheticConfig, merged: bool, rank_in_args: bool, arrivals: Arrivals | None = None
) -> Iterator[list[list[str]]]:
    """Per-rank event chunks, in order: metadata, then the steps piece by piece."""
    ranks = [_Rank(config, r, merged, rank_in_args) for r in range(config.ranks)]
    yield [r.metadata() for r in ranks]
    if config.unmatched:
        if arrivals is not None:
            raise ValueError("collective_arrivals: the collectives of one step are matched")
        yield from _run_unmatched(ranks, config)
        if any(r.out for r in ranks):
            raise RuntimeError("events left unwritten")
        return
    for step in range(config.steps):
        yield from _run_step(ranks, step, arrivals)
    if any(r.out for r in ranks):
        raise RuntimeError("events left unwritten")


# ---- files -----------------------------------------------------------------------------------
def _device_properties(device: int) -> dict[str, object]:
    """deviceProperties entry of an H100 SXM."""
    return {
        "id": device,
        "name": "NVIDIA H100 80GB HBM3",
        "totalGlobalMem": 85_045_346_304,
        "computeMajor": 9,
        "computeMinor": 0,
        "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536,
        "warpSize": 32,
        "sharedMemPerBlock": 49152,
        "numSms": 132,
        "regsPerMultiprocessor": 65536,
        "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472,
    }


def _header(config: SyntheticConfig, rank: int | None) -> str:
    """Everything before the first event (rank None: the merged file)."""
    if rank is None:
        devices = sorted({d for r in range(config.ranks) for d in config.devices(r)})
        dist: dict[str, object] = {"world_size": config.ranks}
    else:
        devices = config.devices(rank)
        ranks = list(range(config.ranks))
        dist = {
            "backend": "nccl",
            "rank": rank,
            "world_size": config.ranks,
            "pg_count": 1,
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": config.ranks,
                    "ranks": ranks,
                }
            ],
            "nccl_version": "2.21.5",
        }
    props = ",\n    ".join(json.dumps(_device_properties(d)) for d in devices)
    injected = [f for r in range(config.ranks) for f in config.injected(r)
                if rank is None or r == rank]  # fmt: skip
    labels = f'  "tracegraphFaults": {json.dumps(injected)},\n' if injected else ""
    if config.host_names and rank is not None:
        labels += f'  "host_name": "node{rank // config.gpus_per_node}",\n'
    return (
        '{\n  "schemaVersion": 1,\n'
        f'  "deviceProperties": [\n    {props}\n  ],\n'
        f'  "distributedInfo": {json.dumps(dist)},\n'
        f"{labels}"
        '  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {config.base_time_ns},\n'
        '  "traceEvents": [\n'
    )


def _footer(trace_name: str) -> str:
    """Everything after the last event."""
    return f'\n  ],\n  "traceName": {_q(trace_name)}\n}}\n'


class _Sink:
    """Writes events into an open traceEvents array, comma-separated."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.empty = True

    def write(self, events: list[str]) -> None:
        """Append `events`."""
        if not events:
            return
        if not self.empty:
            self.fh.write(",\n")
        self.fh.write(",\n".join(events))
        self.empty = False


def _open_text(path: Path, gzip: bool, stack: contextlib.ExitStack) -> IO[str]:
    """A text file for writing. gzip output is byte-reproducible (mtime 0, no file name) and
    uses level 1: ~190 MB/s and ~10x smaller, where level 6 (~45 MB/s, ~15x) halves throughput."""
    if not gzip:
        return stack.enter_context(path.open("w", encoding="utf-8", newline="\n"))
    raw = stack.enter_context(path.open("wb"))
    packed = stack.enter_context(
        gzip_module.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1)
    )
    return stack.enter_context(io.TextIOWrapper(packed, encoding="utf-8", newline="\n"))


def write_per_rank(config: SyntheticConfig, out_dir: Path, gzip: bool = False) -> list[Path]:
    """Write rank{r}.trace.json[.gz] for every rank into `out_dir`; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = ".trace.json.gz" if gzip else ".trace.json"
    paths = [out_dir / f"rank{r}{suffix}" for r in range(config.ranks)]
    with contextlib.ExitStack() as stack:
        files = [_open_text(p, gzip, stack) for p in paths]
        for rank, fh in enumerate(files):
            fh.write(_header(config, rank))
        sinks = [_Sink(fh) for fh in files]
        for per_rank in _chunks(config, merged=False, rank_in_args=False):
            for sink, events in zip(sinks, per_rank, strict=True):
                sink.write(events)
        for path, fh in zip(paths, files, strict=True):
            fh.write(_footer(path.name))
    return paths


def write_merged(config: SyntheticConfig, path: Path, rank_in_args: bool = True) -> Path:
    """Write all ranks into one file the way merge tools do (pid = rank * 1_000_000 + pid)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        fh = _open_text(path, path.suffix == ".gz", stack)
        fh.write(_header(config, None))
        sink = _Sink(fh)
        for per_rank in _chunks(config, merged=True, rank_in_args=rank_in_args):
            for events in per_rank:
                sink.write(events)
        fh.write(_footer(path.name))
    return path


# ---- expectations and sizing ----------------------------------------------------------------
def collective_arrivals(config: SyntheticConfig) -> Arrivals:
    """The simulation's ground truth: per step and collective (by Seq), when each rank's NCCL
    kernel started (ns since baseTimeNanoseconds, as the files' ts x 1000)."""
    arrivals: Arrivals = {}
    for _ in _chunks(config, merged=False, rank_in_args=False, arrivals=arrivals):
        pass
    return arrivals


def expected_counts(config: SyntheticConfig) -> dict[int, dict[str, int]]:
    """Events per rank by category ("cat"; "metadata" counts the 'M' events), from the config.

    Flow categories (ac2g, fwdbwd) count both the 's' and the 'f' events. The same for per-rank
    and merged output.
    """
    n_layers, n_buckets, steps = config.layers, config.buckets, config.steps
    kernels = 7 * n_layers + 2 * n_buckets + 2
    per_step = {
        "cpu_op": 16 * n_layers + 3 * n_buckets + 11,
        "user_annotation": n_buckets + 6,
        "cuda_runtime": 7 * n_layers + 6 * n_buckets + 9,
        "kernel": kernels,
        "gpu_memcpy": 2,
        "gpu_memset": 1,
        "gpu_user_annotation": n_buckets + 2,
        "cuda_sync": 2 * n_buckets + 3 if config.with_cuda_sync else 0,
        "ac2g": 2 * (kernels + 3),
        "fwdbwd": 2 * (3 * n_layers + 1) if config.with_fwdbwd else 0,
    }
    metadata = 16 if config.with_cuda_sync else 14
    if config.sync_demo:  # per device: 4n - 1 launches, n - 1 stream waits and records, ...
        n, n_dev = len(config.demo_streams), config.devices_per_rank
        copy = int(config.blocking_copy)
        demo = {
            "cpu_op": 1,
            "cuda_runtime": n_dev * (7 * n + copy),
            "kernel": n_dev * (4 * n - 1),
            "gpu_memcpy": n_dev * copy,
            "cuda_sync": n_dev * (2 * n + 1 + copy) if config.with_cuda_sync else 0,
            "ac2g": 2 * n_dev * (4 * n - 1 + copy),
        }
        per_step = {cat: per_step[cat] + demo.get(cat, 0) for cat in per_step}
        metadata += 3 * (n_dev - 1) + 2 * (config.extra_streams * n_dev + 2 * (n_dev - 1))
        metadata += 2 * (n_dev - 1) if config.with_cuda_sync else 0
    counts = {cat: n * steps for cat, n in per_step.items() if n}
    counts["metadata"] = metadata
    return {rank: dict(counts) for rank in range(config.ranks)}


BYTES_PER_LAYER_STEP = 11_660
BYTES_PER_BUCKET_STEP = 5_370
BYTES_PER_STEP = 10_540


def estimate_bytes(config: SyntheticConfig) -> int:
    """Approximate uncompressed size of the per-rank files together (within ~10 %)."""
    per_step = (
        BYTES_PER_LAYER_STEP * config.layers
        + BYTES_PER_BUCKET_STEP * config.buckets
        + BYTES_PER_STEP
    )
    return config.ranks * config.steps * per_step


def layers_for_bytes(target_bytes: int, ranks: int, steps: int, bucket_layers: int = 4) -> int:
    """The `layers` that makes `ranks` x `steps` come to about `target_bytes` uncompressed."""
    per_layer = BYTES_PER_LAYER_STEP + BYTES_PER_BUCKET_STEP / bucket_layers
    return max(1, round((target_bytes / (ranks * steps) - BYTES_PER_STEP) / per_layer))


# ---- command line ---------------------------------------------------------------------------
def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(
        prog="python -m tracegraph.examples.synthetic",
        description="Write deterministic synthetic multi-rank Kineto traces.",
    )
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--target-mb", type=float, help="pick --layers for about this many MB in all")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="folder for rank{r}.trace.json[.gz]")
    p.add_argument("--merged", type=Path, help="one merged file holding every rank (.gz: gzipped)")
    p.add_argument("--gzip", action="store_true", help="gzip the per-rank files")
    p.add_argument("--no-rank-args", action="store_true", help="merged: omit args.rank")
    p.add_argument("--no-cuda-sync", action="store_true", help="omit cuda_sync events")
    p.add_argument("--late-rank", type=int, help="this rank sleeps --late-us in every step")
    p.add_argument("--late-us", type=int, default=0)
    p.add_argument("--python-stacks", action="store_true", help="python_function events")
    p.add_argument("--annotate", action="store_true", help="nested record_function ranges")
    args = p.parse_args(argv)
    if args.out is None and args.merged is None:
        p.error("give --out and/or --merged")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: write the traces, print each file with its size and the write speed."""
    args = _parse_args(argv)
    layers = args.layers
    if args.target_mb:
        layers = layers_for_bytes(int(args.target_mb * 1e6), args.ranks, args.steps)
    config = SyntheticConfig(
        ranks=args.ranks,
        steps=args.steps,
        layers=layers,
        seed=args.seed,
        with_cuda_sync=not args.no_cuda_sync,
        late_rank=args.late_rank,
        late_us=args.late_us,
        python_stacks=args.python_stacks,
        annotate=args.annotate,
    )
    started = time.perf_counter()
    paths: list[Path] = []
    if args.out is not None:
        paths += write_per_rank(config, args.out, gzip=args.gzip)
    if args.merged is not None:
        paths.append(write_merged(config, args.merged, rank_in_args=not args.no_rank_args))
    elapsed = time.perf_counter() - started
    total = 0
    for path in paths:
        size = path.stat().st_size
        total += size
        print(f"{size:>14,d}  {path}")
    print(
        f"{total:>14,d}  total ({config.ranks} ranks x {config.steps} steps x {layers} layers, "
        f"{elapsed:.1f} s, {total / 1e6 / max(elapsed, 1e-9):.0f} MB/s written)"
    )
    if args.gzip:
        print(f"~{estimate_bytes(config):,d} bytes uncompressed per-rank JSON (estimate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
