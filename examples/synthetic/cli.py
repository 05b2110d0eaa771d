"""The command line: ``python -m tracegraph.examples.synthetic`` writes traces and prints each
file with its size and the write speed."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from .config import SyntheticConfig
from .expectations import estimate_bytes, layers_for_bytes
from .writers import write_merged, write_per_rank


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
