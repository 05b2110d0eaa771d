"""A simulated fleet: many ranks of synthetic trace through `ingest --ray` on a local Ray
instance, side by side with one process (`--jobs 1`) on the same files.

Each ingest is a fresh child process. Prints the wall time of both, the per-rank cost on a Ray
worker (its time on the file and the worker's peak RSS, as `IngestResult.work` reports them)
and the main process's serial cost per rank (what no worker can take: the load into Kuzu and
the commit), then the arithmetic for a larger job on N nodes:

    wall(R ranks, N nodes of C cores) ~ start + stop + max(R * t_worker / (N * C), R * t_main)

Ray's start-up and shut-down are fixed costs of the job (timed apart, not in t_main); the main
process's own fixed costs (its imports, the schema) are left in t_main, so it errs high.

    python benchmarks/ray_fleet.py                      # 256 ranks, 2 CPUs
    python benchmarks/ray_fleet.py --ranks 64 --repeat 3 --project 4096
    python benchmarks/ray_fleet.py --summary            # the summary tier (ingest --summary)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import cached_per_rank, median, note, print_table, raw_json_bytes, run_child

from tracegraph.examples.synthetic import SyntheticConfig

CHILD = """
import json, sys, time
from pathlib import Path
from tracegraph.ingest import ray_pool
from tracegraph.ingest.pipeline import IngestOptions, ingest

# Ray's start-up and shut-down (fixed costs of a job, whatever its size); the load waiting on tasks
spent = {"start_s": 0.0, "stop_s": 0.0, "waited_s": 0.0}
pool_init, pool_result = ray_pool.RayFilePool.__init__, ray_pool.RayFilePool.result
pool_close = ray_pool.RayFilePool.close
def timed(key, call):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - t
    return wrapper
ray_pool.RayFilePool.__init__ = timed("start_s", pool_init)
ray_pool.RayFilePool.result = timed("waited_s", pool_result)
ray_pool.RayFilePool.close = timed("stop_s", pool_close)

ray = None if sys.argv[2] == "none" else sys.argv[2]
summarise = None
if sys.argv[4] == "summary":
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER as summarise
t = time.perf_counter()
result = ingest([Path(sys.argv[3])], Path(sys.argv[1]), IngestOptions(run="fleet", jobs=None if ray
                else 1, ray=ray, summarise=summarise))
print(json.dumps({"work_s": time.perf_counter() - t, "ranks": len(result.ranks), **spent,
                  "files": [[w.work_s, w.peak_rss_bytes] for w in result.work]}))
"""
RAY_CPUS = os.cpu_count() or 1  # what `--ray local` starts with


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--layers", type=int, default=60, help="per rank: ~26 KB of JSON each")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--project", type=int, default=4096, help="ranks of the projected job")
    parser.add_argument("--summary", action="store_true", help="ingest --summary, both ways")
    args = parser.parse_args()
    files = cached_per_rank(SyntheticConfig(ranks=args.ranks, steps=2, layers=args.layers))
    folder = files[0].parent
    size = sum(raw_json_bytes(f) for f in files)
    walls: dict[str, list[float]] = {"one process": [], "ray": []}
    main_rss: dict[str, list[float]] = {"one process": [], "ray": []}
    per_file: list[list[float]] = []
    main_s: list[float] = []  # the Ray run's main process: its own work, not waiting
    start_s: list[float] = []  # Ray's start-up and shut-down
    for round_ in range(args.repeat):
        for mode in ("none", "local") if round_ % 2 == 0 else ("local", "none"):
            key = "ray" if mode == "local" else "one process"
            note(f"round {round_ + 1}: {key}")
            scratch = Path(tempfile.mkdtemp(prefix="tg-fleet-"))
            try:
                tier = "summary" if args.summary else "full"
                run = run_child([sys.executable, "-c", CHILD, str(scratch / "f.kuzu"), mode,
                                 str(folder), tier])  # fmt: skip
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            walls[key].append(run.wall_s)
            main_rss[key].append(run.maxrss_bytes / 2**20)
            if key == "ray":
                per_file += run.report["files"]  # type: ignore[operator]
                work, start, stop, waited = (float(run.report[k])  # type: ignore[arg-type]
                    for k in ("work_s", "start_s", "stop_s", "waited_s"))  # fmt: skip
                start_s.append(start + stop)
                main_s.append(work - start - stop - waited)
    worker_s = [f[0] for f in per_file]
    worker_rss = [f[1] / 2**20 for f in per_file]
    one, on_ray = median(walls["one process"]), median(walls["ray"])
    t_worker = statistics.mean(worker_s)
    t_main = median(main_s) / args.ranks
    t_start = median(start_s)
    tier = "summary tier (--summary)" if args.summary else "every event"
    print(f"{tier}: {args.ranks} per-rank files, {size / 1e6:,.0f} MB of JSON; local Ray "
          f"instance of {RAY_CPUS} CPUs; medians of {args.repeat}")  # fmt: skip
    print_table(
        ["", "wall s", "speed-up", "main process peak RSS MiB"],
        [
            ["--jobs 1", f"{one:.1f}", "1.00x", f"{median(main_rss['one process']):,.0f}"],
            [
                "--ray local",
                f"{on_ray:.1f}",
                f"{one / on_ray:.2f}x",
                f"{median(main_rss['ray']):,.0f}",
            ],
        ],  # fmt: skip
    )
    print()
    print("per rank on a Ray worker (time on its file; the worker's peak RSS)")
    print_table(
        ["", "median", "p90", "max"],
        [
            ["time s", *(f"{v:.3f}" for v in _spread(worker_s))],
            ["peak RSS MiB", *(f"{v:,.0f}" for v in _spread(worker_rss))],
        ],  # fmt: skip
    )
    print(f"main process, serial, per rank: {t_main * 1000:.1f} ms (the load into Kuzu and the "
          f"commit, while not waiting on tasks); Ray's start-up and shut-down {t_start:.1f} s; one "
          f"process: "
          f"{one / args.ranks * 1000:.1f} ms per rank")  # fmt: skip
    print()
    scale = size / args.ranks
    print(f"projected: {args.project} ranks of this size ({scale / 1e6:.1f} MB each); "
          "wall ~ start-up and shut-down + max(R t_worker / (N C), R t_main)")  # fmt: skip
    rows = []
    for nodes, cores in ((1, 2), (1, 16), (4, 16), (16, 16), (64, 16)):
        parallel = args.project * t_worker / (nodes * cores)
        serial = args.project * t_main
        rows.append([nodes, cores, f"{parallel:,.0f}", f"{serial:,.0f}",
                     f"{t_start + max(parallel, serial):,.0f}"])  # fmt: skip
    print_table(["nodes", "cores each", "workers s", "main s", "wall s"], rows)
    return 0


def _spread(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return median(ordered), ordered[int(0.9 * (len(ordered) - 1))], ordered[-1]


if __name__ == "__main__":
    sys.exit(main())
