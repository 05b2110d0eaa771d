"""Peak RSS of ingest as the input grows: 0.5, 1 and 2 GB of JSON, as one merged K-rank file and
as a folder of K per-rank files, beside an imports-only child.

Each ingest runs in a fresh child (peak = its own ru_maxrss). The figure that matters is the
growth: peak at the largest size over peak at the smallest (1.00x is flat). The parse holds one
rank at a time (a merged file is split by rank through a spill folder beside the database) and
the Kuzu load one batch; what still grows is what Kuzu keeps per node of an open database.

    python benchmarks/ingest_rss_scaling.py [--sizes-gb 0.5 1 2] [--ranks 64] [--repeat 1]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import (
    ChildRun,
    cached_merged,
    cached_per_rank,
    import_child,
    ingest_child,
    median,
    note,
    print_table,
)

from tracegraph.examples.synthetic import SyntheticConfig, layers_for_bytes

STEPS = 2


def _inputs(size_gb: float, ranks: int) -> dict[str, tuple[list[Path], int]]:
    layers = layers_for_bytes(int(size_gb * 1e9), ranks, STEPS)
    config = SyntheticConfig(ranks=ranks, steps=STEPS, layers=layers)
    merged = cached_merged(config)
    per_rank = cached_per_rank(config)
    return {
        "merged file": ([merged], merged.stat().st_size),
        "per-rank folder": ([per_rank[0].parent], sum(p.stat().st_size for p in per_rank)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes-gb", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args(argv)
    sizes = sorted(args.sizes_gb)
    inputs = {size: _inputs(size, args.ranks) for size in sizes}
    baseline: list[ChildRun] = []
    runs: dict[tuple[float, str], list[ChildRun]] = {}
    for i in range(args.repeat):
        baseline.append(import_child())
        for size in sizes:
            for layout, (paths, _) in inputs[size].items():
                result = ingest_child(paths)
                runs.setdefault((size, layout), []).append(result)
                note(f"  round {i + 1} {size} GB {layout}: {result.maxrss_bytes / 2**20:,.0f} MiB")
    base = median([r.maxrss_bytes for r in baseline])
    print(f"== ingest peak RSS by input size; baseline (imports only): {base / 2**20:,.0f} MiB")
    rows = []
    growth: dict[str, float] = {}
    for layout in inputs[sizes[0]]:
        first = median([r.maxrss_bytes for r in runs[(sizes[0], layout)]])
        for size in sizes:
            done = runs[(size, layout)]
            peak = median([r.maxrss_bytes for r in done])
            raw = inputs[size][layout][1]
            growth[layout] = peak / first
            rows.append(
                [
                    layout,
                    f"{raw / 1e9:.2f}",
                    " ".join(f"{r.maxrss_bytes / 2**20:,.0f}" for r in done),
                    f"{peak / 2**20:,.0f}",
                    f"{peak / raw:.2f}x",
                    f"{peak / first:.2f}x",
                    f"{median([r.work_s for r in done]):.1f}",
                ]
            )
    print_table(
        ["layout", "raw GB", "peak MiB per run", "median", "peak/raw", f"vs {sizes[0]} GB", "s"],
        rows,
    )
    for layout, g in growth.items():
        print(f"{layout}: peak at {sizes[-1]} GB is {g:.2f}x the peak at {sizes[0]} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
