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

Modules: `config` (what to generate), `model` (op names and kernels), `timing` (what the work
costs), `events` (one rank's events as JSON text), `faults` (injected faults), `sync_kinds`
(the sync-kinds phase), `training` (a rank's training steps), `simulate` (the ranks together,
collectives matched across them), `writers` (the files), `expectations` (what the output
holds), `cli` (``python -m tracegraph.examples.synthetic``).
"""

from __future__ import annotations

from pathlib import Path

from .cli import main
from .config import INJECTABLE_FAULTS, NCCL_STREAM, SyntheticConfig
from .events import MERGED_PID_STRIDE
from .expectations import collective_arrivals, estimate_bytes, expected_counts, layers_for_bytes
from .simulate import Arrivals
from .writers import write_merged, write_per_rank

__all__ = [
    "INJECTABLE_FAULTS",
    "MERGED_PID_STRIDE",
    "NCCL_STREAM",
    "Arrivals",
    "SyntheticConfig",
    "collective_arrivals",
    "estimate_bytes",
    "expected_counts",
    "layers_for_bytes",
    "main",
    "source_bytes",
    "write_merged",
    "write_per_rank",
]


def source_bytes() -> bytes:
    """The generator's source, every module in name order: what caches of its output key on
    (they go stale when it changes)."""
    paths = sorted(Path(__file__).parent.glob("*.py"))
    return b"".join(p.name.encode() + b"\0" + p.read_bytes() for p in paths)
