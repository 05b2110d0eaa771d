"""Ingest time per event of merged multi-rank files as the rank count K grows (should stay flat).

Every K gets the same events per rank (same steps and layers), so a flat µs/event means the rank
split, linking and collective matching scale linearly in K. Files are generated once into the
benchmark cache; ingests run in fresh child processes, rounds interleave the K values.

    python benchmarks/merged_scaling.py [--ranks 8 32 64] [--target-mb 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from _common import ChildRun, cached_merged, ingest_child, median, note, print_table

from tracegraph.examples.synthetic import SyntheticConfig, expected_counts, layers_for_bytes

GOAL = 1.5


def trace_events(config: SyntheticConfig) -> int:
    """Entries in the file's traceEvents (all phases, metadata included), from the generator."""
    return sum(sum(by_cat.values()) for by_cat in expected_counts(config).values())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 32, 64])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--target-mb", type=float, default=256, help="size of the largest-K file")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-rank-args", action="store_true", help="ranks from process metadata")
    args = p.parse_args(argv)
    largest = max(args.ranks)
    layers = layers_for_bytes(int(args.target_mb * 1e6), largest, args.steps)
    configs = {k: SyntheticConfig(ranks=k, steps=args.steps, layers=layers) for k in args.ranks}
    files = {k: cached_merged(c, not args.no_rank_args) for k, c in configs.items()}
    runs: dict[int, list[ChildRun]] = {k: [] for k in args.ranks}
    order = list(args.ranks)
    for i in range(args.repeat):
        shift = i % len(order)
        for k in order[shift:] + order[:shift]:
            result = ingest_child([files[k]], run=f"K{k}")
            runs[k].append(result)
            note(f"  round {i + 1} K={k:<3} {result.work_s:7.2f} s  cpu {result.cpu_s:7.2f} s")
    print(f"== merged synthetic traces: {args.steps} steps x {layers} layers per rank")
    rows = []
    per_event: dict[int, float] = {}
    cpu_per_event: dict[int, float] = {}
    base = args.ranks[0]
    for k in args.ranks:
        work = median([r.work_s for r in runs[k]])
        events = trace_events(configs[k])
        per_event[k] = 1e6 * work / events
        cpu_per_event[k] = 1e6 * median([r.cpu_s for r in runs[k]]) / events
        rows.append(
            [
                k,
                f"{files[k].stat().st_size / 1e6:.0f}",
                events,
                " ".join(f"{r.work_s:.2f}" for r in runs[k]),
                work,
                per_event[k],
                f"{per_event[k] / per_event[base]:.2f}x",
                cpu_per_event[k],
                f"{cpu_per_event[k] / cpu_per_event[base]:.2f}x",
                f"{median([r.maxrss_bytes for r in runs[k]]) / 2**20:.0f}",
            ]
        )
    print_table(
        [
            "K",
            "MB",
            "events",
            "s per run",
            "median s",
            "µs/event",
            f"vs K={base}",
            "cpu µs/event",
            f"vs K={base}",
            "peak MiB",
        ],
        rows,
    )
    for kind, values in (("wall", per_event), ("cpu", cpu_per_event)):
        spread = max(values.values()) / min(values.values())
        verdict = "met" if spread <= GOAL else "MISSED"
        print(f"{kind} µs/event max/min across K: {spread:.2f}x; goal <= {GOAL}x {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
