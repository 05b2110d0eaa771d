"""`tracegraph diff` of large edge sets: read from their Parquet copies in the run archive
against read from Kuzu (the copies moved aside), side by side, whole processes.

The run (64 synthetic ranks; `--layers` sets its size) is ingested once into the benchmark
cache with three native edge sets over the whole trace: `native` (tracegraph's own), and the
emulations of HTA 0.5.0 and traceinsight 0.6.1 (about the same size, few edges differing).
Each diff is a fresh child running the CLI (table output), interleaved, median of `--repeat`.

    python benchmarks/diff_scale.py --repeat 5
    python benchmarks/diff_scale.py --layers 300 --pair native native:hta-0.5.0
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from _common import CACHE, cached_per_rank, generator_tag, median, note, print_table, run_child

from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.ingest import archive
from tracegraph.ingest.edgesets import copies
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.pipeline import IngestOptions, ingest

CHILD = """
import contextlib, json, os, sys, time
from tracegraph.explorer.cli import main
t = time.perf_counter()
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    code = main(["diff", *sys.argv[1:]])
print(json.dumps({"work_s": time.perf_counter() - t, "code": code}))
"""
PAIRS = (("native:hta-0.5.0", "native:traceinsight-0.6.1"), ("native", "native:hta-0.5.0"))


def cached_db(layers: int) -> Path:
    config = SyntheticConfig(ranks=64, steps=2, layers=layers)
    db = CACHE / f"diff-r64-s2-l{layers}-{generator_tag()}.kuzu"
    if not db.exists():
        files = cached_per_rank(config)
        partial = db.with_name(f".{db.name}.partial")
        partial.unlink(missing_ok=True)
        shutil.rmtree(archive.archive_root(partial), ignore_errors=True)
        note(f"ingesting {len(files)} files and building 3 edge sets into {db} (minutes)")
        ingest(files, partial, IngestOptions(run="diff"))
        build_native_edge_set(partial)  # Window(): the whole trace
        for version in ("hta-0.5.0", "traceinsight-0.6.1"):
            build_native_edge_set(partial, options=emulate(version))
        archive.archive_root(partial).rename(archive.archive_root(db))
        partial.rename(db)
    return db


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"))
    args = parser.parse_args()
    db = cached_db(args.layers)
    (folder,) = [p for p in archive.archive_root(db).iterdir() if p.name.startswith("run-")]
    kept, aside = folder / copies.FOLDER, folder / f"{copies.FOLDER}.aside"
    rows = []
    for a, b in args.pair or PAIRS:
        runs: dict[str, list[tuple[float, float]]] = {"copies": [], "kuzu": []}
        for round_ in range(args.repeat):
            for mode in ("copies", "kuzu") if round_ % 2 == 0 else ("kuzu", "copies"):
                if mode == "kuzu":
                    kept.rename(aside)
                try:
                    run = run_child([sys.executable, "-c", CHILD, str(db), a, b])
                finally:
                    if aside.exists():
                        aside.rename(kept)
                runs[mode].append((run.wall_s, run.maxrss_bytes / 2**30))
        walls = {m: median([w for w, _ in r]) for m, r in runs.items()}
        rss = {m: median([g for _, g in r]) for m, r in runs.items()}
        rows.append([f"{a} vs {b}", f"{walls['kuzu']:.2f}", f"{walls['copies']:.2f}",
                     f"{walls['kuzu'] / walls['copies']:.2f}x", f"{rss['kuzu']:.2f}",
                     f"{rss['copies']:.2f}"])  # fmt: skip
    print(f"{db.name}; whole processes, table output, medians of {args.repeat}")
    print_table(["diff", "from Kuzu s", "from copies s", "speed-up", "Kuzu GB", "copies GB"], rows)
    print("goal: two 1 M-edge sets in <= 3 s and <= 1.5 GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
