"""Peak RSS of one ingest against the raw (uncompressed) JSON size of the trace.

Each ingest runs in a fresh child; its peak RSS is that child's own ru_maxrss (`os.wait4`).
The baseline is a child that only imports the pipeline, so the fixed cost shows beside the
per-byte cost. Traces: control.json.gz and a synthetic one (per-rank file or merged file).

    python benchmarks/peak_rss.py [--synthetic-mb 256] [--merged-ranks 0] [--repeat 3] [--trace P]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import (
    CONTROL,
    ChildRun,
    cached_merged,
    cached_per_rank,
    import_child,
    ingest_child,
    median,
    note,
    print_table,
    raw_json_bytes,
)

from tracegraph.examples.synthetic import SyntheticConfig, layers_for_bytes

GOAL = 3.0
GOAL_FROM_BYTES = 100e6  # the goal is for files of at least this much JSON


def synthetic_trace(target_mb: float, merged_ranks: int, steps: int) -> Path:
    """A cached synthetic trace of about `target_mb`: one rank's file, or a merged K-rank file."""
    ranks = merged_ranks or 1
    layers = layers_for_bytes(int(target_mb * 1e6), ranks, steps)
    config = SyntheticConfig(ranks=ranks, steps=steps, layers=layers)
    if merged_ranks:
        return cached_merged(config)
    return cached_per_rank(config)[0]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, action="append", help="extra trace files to measure")
    p.add_argument("--synthetic-mb", type=float, default=256, help="0: no synthetic trace")
    p.add_argument("--merged-ranks", type=int, default=0, help="K > 0: a merged K-rank file")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    traces = [CONTROL, *(args.trace or [])]
    if args.synthetic_mb:
        traces.append(synthetic_trace(args.synthetic_mb, args.merged_ranks, args.steps))
    raw = {path: raw_json_bytes(path) for path in traces}
    baseline: list[ChildRun] = []
    runs: dict[Path, list[ChildRun]] = {path: [] for path in traces}
    for i in range(args.repeat):
        baseline.append(import_child())
        for path in traces:
            result = ingest_child([path])
            runs[path].append(result)
            note(f"  round {i + 1} {path.name}: {result.maxrss_bytes / 2**20:,.0f} MiB")
    base = median([r.maxrss_bytes for r in baseline])
    print(f"== peak RSS; baseline (imports only): {base / 2**20:,.0f} MiB")
    rows = []
    worst = 0.0
    for path in traces:
        peak = median([r.maxrss_bytes for r in runs[path]])
        ratio = peak / raw[path]
        if raw[path] >= GOAL_FROM_BYTES:
            worst = max(worst, ratio)
        rows.append(
            [
                path.name,
                f"{raw[path] / 1e6:,.1f}",
                " ".join(f"{r.maxrss_bytes / 2**20:,.0f}" for r in runs[path]),
                f"{peak / 2**20:,.0f}",
                f"{ratio:.2f}x",
                f"{(peak - base) / raw[path]:.2f}x",
                f"{median([r.work_s for r in runs[path]]):.2f}",
            ]
        )
    print_table(
        ["trace", "raw MB", "peak MiB per run", "median", "peak/raw", "(peak-base)/raw", "s"],
        rows,
    )
    if not worst:
        print(f"no trace of {GOAL_FROM_BYTES / 1e6:.0f} MB or more: the goal is not measured")
        return 0
    verdict = "met" if worst < GOAL else "MISSED"
    print(
        f"peak RSS / raw JSON, files of {GOAL_FROM_BYTES / 1e6:.0f} MB or more: highest "
        f"{worst:.2f}x; goal < {GOAL}x {verdict} (smaller files pay the fixed cost: see base)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
