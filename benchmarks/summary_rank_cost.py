"""What one rank costs a summary worker (`ingest --summary`), in one process, on the fleet
benchmark's files (`fleet_summary.py`): CPU ms per rank, the minimum of --repeat passes over
--ranks files, each read and summarised as a local pool's worker does (`parallel.prepare_file`);
with --instructions, the instructions per rank under valgrind's cachegrind (a run over --ranks
files less a run over none: deterministic, where this machine's timings move by a few percent
from one minute to the next).

    python benchmarks/summary_rank_cost.py [--ranks 150] [--repeat 5]
    python benchmarks/summary_rank_cost.py --instructions [--ranks 10]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import cached_per_rank
from fleet_summary import job

FIRST = 100  # the files timed: from this rank on (the first, rank 0, warms the process up)


def summarise(files: list[Path], warm: Path) -> float:
    """CPU seconds to read and summarise `files`, after one file that warms the process up."""
    from tracegraph.ingest.memory import keeping_freed_heap

    keeping_freed_heap()  # as a summary worker does
    from tracegraph.ingest.parallel import prepare_file
    from tracegraph.ingest.parse_options import ParseOptions
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER

    def prepare(path: Path) -> None:
        prepare_file(path, True, ParseOptions(), "fleet", 0, summarise=SUMMARY_TIER)

    prepare(warm)
    start = time.process_time()
    for path in files:
        prepare(path)
    return time.process_time() - start


def instructions(ranks: int) -> int:
    """Instructions of a child process that summarises `ranks` files (cachegrind's I refs)."""
    run = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, "--child", str(ranks)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{run.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=None, help="files per pass (150; 10 counted)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    files = cached_per_rank(job(1024, 3))
    if args.child is not None:
        summarise(files[FIRST : FIRST + args.child], files[0])
        return 0
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind on the PATH")
        ranks = args.ranks or 10
        per_rank = (instructions(ranks) - instructions(0)) / ranks
        print(f"{per_rank / 1e6:.1f} M instructions per summary rank ({ranks} ranks, cachegrind)")
        return 0
    ranks = args.ranks or 150
    chosen = files[FIRST : FIRST + ranks]
    best = min(summarise(chosen, files[0]) for _ in range(args.repeat))
    print(f"{best / len(chosen) * 1e3:.2f} ms CPU per summary rank (min of {args.repeat} passes "
          f"over {len(chosen)} ranks, one process)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
