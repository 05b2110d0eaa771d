"""`ingest --jobs N` against `--jobs 1` on the same per-rank files, side by side.

Each ingest is a fresh child process (its workers are its children), interleaved, median of
`--repeat`; the synthetic job (default 8 ranks, ~30 MB of JSON each) is written once to the
benchmark cache. Prints wall time, the speed-up over one process, and the peak RSS of the
largest process (the main one or a worker).

    python benchmarks/ingest_jobs.py --repeat 3
    python benchmarks/ingest_jobs.py --ranks 8 --layers 1200 --jobs 1 --jobs 2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import cached_per_rank, median, print_table, raw_json_bytes, run_child

from tracegraph.examples.synthetic import SyntheticConfig

CHILD = """
import json, resource, sys, time
from pathlib import Path
from tracegraph.explorer.entry import choose_allocator
choose_allocator()  # as the tracegraph command does, before pyarrow is imported
from tracegraph.ingest.pipeline import IngestOptions, ingest

def cpu():  # this process and the workers it has waited for (all of them, once ingest returns)
    return sum(r.ru_utime + r.ru_stime for r in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))

t, c = time.perf_counter(), cpu()
ingest([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), IngestOptions(run="bench",
       jobs=int(sys.argv[2])))
print(json.dumps({"work_s": time.perf_counter() - t, "cpu_s": cpu() - c}))
"""
GOAL = 1.7
GOAL_CPU = 1.10  # the workers' CPU-seconds over one process's, for the same files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--layers", type=int, default=1200)
    parser.add_argument("--jobs", type=int, action="append", help="default: 1 and 2")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = SyntheticConfig(ranks=args.ranks, steps=2, layers=args.layers)
    files = cached_per_rank(config)
    size = sum(raw_json_bytes(f) for f in files) / 1e6
    jobs = args.jobs or [1, 2]
    times: dict[int, list[float]] = {j: [] for j in jobs}
    rss: dict[int, list[float]] = {j: [] for j in jobs}
    cpu: dict[int, list[float]] = {j: [] for j in jobs}
    for round_ in range(args.repeat):
        for j in jobs if round_ % 2 == 0 else list(reversed(jobs)):
            folder = Path(tempfile.mkdtemp(prefix="tg-jobs-"))
            try:
                argv = [sys.executable, "-c", CHILD, str(folder / "b.kuzu"), str(j)]
                run = run_child(argv + [str(f) for f in files])
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            times[j].append(run.wall_s)
            rss[j].append(run.maxrss_bytes / 2**20)
            cpu[j].append(run.cpu_s)
    base, base_cpu = median(times[jobs[0]]), median(cpu[jobs[0]])
    print(f"{len(files)} per-rank files, {size:,.0f} MB of JSON; median of {args.repeat}")
    print_table(
        [
            "--jobs",
            "wall s",
            f"speed-up vs --jobs {jobs[0]}",
            "CPU s",
            f"CPU vs --jobs {jobs[0]}",
            "peak RSS MiB (largest process)",
        ],
        [
            [
                j,
                f"{median(times[j]):.2f}",
                f"{base / median(times[j]):.2f}x",
                f"{median(cpu[j]):.1f}",
                f"{median(cpu[j]) / base_cpu:.2f}x",
                f"{median(rss[j]):,.0f}",
            ]
            for j in jobs
        ],  # fmt: skip
    )
    print(f"goal: --jobs 2 >= {GOAL}x --jobs 1 on 2 cores; CPU s <= {GOAL_CPU:.2f}x --jobs 1's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
