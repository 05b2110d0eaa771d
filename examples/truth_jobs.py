"""Synthetic jobs whose cause is known, one per way a rank makes the others wait.

Each job injects one late rank (or none) into `synthetic`'s 4-rank DDP job; the simulation's
own collective arrivals (`collective_arrivals`) give, per step, how late the injected rank
really was. What bound a step, who was late and what fixing it saves are held against them by
tests/queries/test_causal_truth.py; `python -m tracegraph.examples.truth_jobs OUT` writes them.

The ways of waiting: a data-loader stall (a `time.sleep` in `__next__`), a `gc.collect()`
between forward and backward (a python frame, no op; or, without stacks, nothing recorded at
all), a slow GPU (the rank's GEMMs take longer),
a wait the others see only on their GPU streams (no host sync in the step: the compute stream
idles until the all-reduce it waits on ends), all-reduces on two NCCL streams, and a clean job
with no late rank. A blocking gloo call on the main thread is a real capture instead
(tests/data/gloo_4r/main_thread_gloo, truth in its truth.json).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .synthetic import SyntheticConfig, collective_arrivals, write_per_rank

BASE = SyntheticConfig(
    ranks=4, steps=3, layers=8, straggler_factor=1.0, stall_every=0, slow_gap_every=0,
    python_stacks=True,
)  # fmt: skip


@dataclass(frozen=True)
class TruthJob:
    """A job, the rank made late (None: none), and what its time went to (a name fragment)."""

    name: str
    config: SyntheticConfig
    rank: int | None
    cause: str  # found in the name of the segment that bound the step, or of one of its parts
    how: str


JOBS = {
    job.name: job
    for job in (
        TruthJob(
            "data_stall",
            replace(BASE, late_rank=2, late_us=20_000),
            2,
            "DataLoader",
            "a 20 ms time.sleep inside DataLoader.__next__",
        ),
        TruthJob(
            "gc_python",
            replace(BASE, gc_rank=1, gc_us=15_000),
            1,
            "collect",
            "a 15 ms gc.collect() between forward and backward (a python frame, no op)",
        ),
        TruthJob(
            "gc_untraced",
            replace(BASE, gc_rank=1, gc_us=15_000, python_stacks=False),
            1,
            "(no op)",
            "the same gc.collect() profiled without stacks: time with nothing recorded",
        ),
        TruthJob(
            "slow_kernel",
            replace(BASE, slow_kernel_rank=3, slow_kernel_factor=25.0),
            3,
            "gemm",
            "rank 3's GEMM kernels 25x slower (one slow GPU)",
        ),
        TruthJob(
            "second_stream",
            replace(BASE, late_rank=1, late_us=10_000, item_sync=False, host_syncs=False),
            1,
            "DataLoader",
            "a 10 ms stall on rank 1, and no host sync: the others wait only on their streams",
        ),
        TruthJob(
            "two_nccl_streams",
            replace(BASE, late_rank=0, late_us=10_000, nccl_streams=2),
            0,
            "DataLoader",
            "a 10 ms stall on rank 0, the all-reduces on two NCCL streams",
        ),
        TruthJob("clean", BASE, None, "", "no late rank"),
    )
}


def lateness_ns(config: SyntheticConfig) -> dict[int, tuple[int, int]]:
    """Per step: (the rank that arrived last by the most, its largest lateness: its arrival
    minus the median arrival of the others), from the simulation's arrivals."""
    out: dict[int, tuple[int, int]] = {}
    for step, collectives in collective_arrivals(config).items():
        best = (-1, -1)
        for starts in collectives.values():
            last = max(starts, key=lambda r: (starts[r], -r))
            others = [t for r, t in starts.items() if r != last]
            late = int(starts[last] - np.median(others))
            if late > best[1]:
                best = (last, late)
        out[step] = best
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tracegraph.examples.truth_jobs OUT_FOLDER", file=sys.stderr)
        return 2
    for job in JOBS.values():
        files = write_per_rank(job.config, Path(args[0]) / job.name)
        print(f"{job.name}: {len(files)} files ({job.how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
