"""What to generate: `SyntheticConfig` (the job's size, its pathologies and the options of its
output), the faults a config may inject, and the streams every rank uses."""

from __future__ import annotations

import math
from dataclasses import dataclass

COMPUTE_STREAM = 7
NCCL_STREAM = 21
SIDE_STREAM = 31  # the first of `extra_streams` side streams (sync-kinds phase only)
INJECTABLE_FAULTS = ("gc_stall", "implicit_casts", "small_op_storm", "optimizer_dominance",
                     "memory_churn", "schedule_distortion")  # fmt: skip


@dataclass(frozen=True)
class SyntheticConfig:
    """What to generate; the same config (and seed) gives byte-identical files.

    ranks, steps, layers: the size (events grow linearly in each, see the package docstring).
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
        collective some rank never enters never completes (it runs timing.UNMATCHED_HANG_NS, to the
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
