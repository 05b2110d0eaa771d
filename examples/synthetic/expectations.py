"""What a config's output holds, known without reading it: the collectives' ground truth
(`collective_arrivals`), the events per rank and category (`expected_counts`) and the size
(`estimate_bytes`, `layers_for_bytes`)."""

from __future__ import annotations

from .config import SyntheticConfig
from .simulate import Arrivals, event_chunks


def collective_arrivals(config: SyntheticConfig) -> Arrivals:
    """The simulation's ground truth: per step and collective (by Seq), when each rank's NCCL
    kernel started (ns since baseTimeNanoseconds, as the files' ts x 1000)."""
    arrivals: Arrivals = {}
    for _ in event_chunks(config, merged=False, rank_in_args=False, arrivals=arrivals):
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
