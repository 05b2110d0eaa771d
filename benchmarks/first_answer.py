"""From traces to the first answer: `tracegraph report TRACES` vs HTA's load and four analyses,
both as whole processes, side by side.

For each input (default: the shared hta/trace_filter, 2 real ranks; an 8-rank synthetic job of
about 1 MB per rank; `--ranks 64` and `--single-mb 50` add the issue's other two), interleaved,
median of `--repeat`:

- HTA 0.5.0 in its own environment: load the folder, then temporal breakdown, comm/comp
  overlap, kernel breakdown and idle time of every rank (with `--path`, then
  `critical_path_analysis` of every rank's first ProfilerStep);
- `tracegraph report FOLDER --db NEW` (the first answer: ingest, then the report, one process;
  with `--path`, then `tracegraph path FOLDER --db NEW`, reusing that database), timed until
  its report is printed (before the database write commits) and until it exits;
- `tracegraph report FOLDER --db SAME` again (the database already holds the traces).

Also each command's start: `tracegraph --version`, `--help` and a `query` on a small database.

    python benchmarks/first_answer.py --repeat 5
    python benchmarks/first_answer.py --repeat 3 --ranks 64 --single-mb 50 --path
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import TRACES, cached_per_rank, median, note, print_table

from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.ingest.edgesets.hta.env import default_cache_root, ensure_env

# the goals for the first answer (HTA / tracegraph); with --path, 5x on each
GOAL_FIRST = {"8 ranks ~1 MB": 3.0, "single ~50 MB": 5.0, "64 ranks": 5.0}
HTA_CHILD = """
import logging, sys, warnings
logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(analysis.t.traces)
analysis.get_temporal_breakdown(visualize=False)
analysis.get_comm_comp_overlap(visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
if sys.argv[2] == "path":
    for rank in ranks:
        try:
            analysis.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
        except Exception:  # a rank HTA cannot build (no step): as a user would, go on
            pass
"""


def timed(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds of one whole process until its last output (the answer: tracegraph prints
    it before the database write commits) and until it exits; a failure stops the run."""
    start = time.perf_counter()
    answered = None
    with subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        while os.read(child.stdout.fileno(), 1 << 16):
            answered = time.perf_counter() - start
        err = child.stderr.read()
        code = child.wait()
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{argv[0]} {argv[1]} exited {code}: {err[-2000:]!r}")
    return (answered if answered is not None else wall), wall


def inputs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """(label, folder of per-rank traces) for each input measured."""
    found = [("trace_filter (2 real ranks)", TRACES / "hta" / "trace_filter")]
    found.append(("8 ranks ~1 MB", _folder(SyntheticConfig(ranks=8, steps=8, layers=9))))
    if args.ranks:
        found.append(("64 ranks", _folder(SyntheticConfig(ranks=args.ranks, steps=3, layers=4))))
    if args.single_mb:
        layers = max(8, int(args.single_mb * 20))  # ~50 KB of JSON per layer at 4 steps
        found.append(("single ~50 MB", _folder(SyntheticConfig(ranks=1, steps=4, layers=layers))))
    return found


def _folder(config: SyntheticConfig) -> Path:
    return cached_per_rank(config)[0].parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=0, help="also a synthetic job of N ranks")
    parser.add_argument("--single-mb", type=float, default=0, help="also one rank of ~MB")
    parser.add_argument("--path", action="store_true", help="also the critical path of every rank")
    args = parser.parse_args()
    cli = shutil.which("tracegraph", path=os.path.dirname(sys.executable))
    if cli is None:
        raise SystemExit("no tracegraph command beside this python (pip install -e .)")
    hta = ensure_env("HolisticTraceAnalysis==0.5.0", default_cache_root())
    rows, start_rows = [], []
    with tempfile.TemporaryDirectory(prefix="tg-first-") as tmp:
        for label, folder in inputs(args):
            mb = sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 2**20
            note(f"{label}: {folder} ({mb:.1f} MB)")
            times: dict[str, list[float]] = {"hta": [], "answer": [], "exit": [], "again": []}
            for i in range(args.repeat):
                db = Path(tmp) / f"{i}-{folder.name}.kuzu"
                hta_run = [
                    str(hta.python),
                    "-c",
                    HTA_CHILD,
                    str(folder),
                    "path" if args.path else "",
                ]
                ours = [cli, "report", str(folder), "--db", str(db)]
                pair = [("hta", hta_run), ("first", ours)]
                for name, argv in pair if i % 2 == 0 else pair[::-1]:
                    answer, wall = timed(argv)
                    if name == "hta":  # HTA prints nothing: its answer is its end
                        times["hta"].append(wall)
                        continue
                    if args.path:  # then the path of every step, reusing that database
                        path_answer, path_wall = timed([cli, "path", str(folder), "--db", str(db)])
                        answer, wall = wall + path_answer, wall + path_wall
                    times["answer"].append(answer)
                    times["exit"].append(wall)
                times["again"].append(timed(ours)[1])
            wall = {k: median(v) for k, v in times.items()}
            goal = 5.0 if args.path and label in GOAL_FIRST else GOAL_FIRST.get(label, 0.0)
            rows.append(
                [
                    label,
                    f"{mb:.1f}",
                    f"{wall['hta']:.2f}",
                    f"{wall['answer']:.2f}",
                    f"{wall['hta'] / wall['answer']:.2f}x",
                    f"{goal:.0f}x" if goal else "",
                    f"{wall['exit']:.2f}",
                    f"{wall['hta'] / wall['exit']:.2f}x",
                    f"{wall['again']:.2f}",
                    f"{wall['hta'] / wall['again']:.2f}x",
                ]
            )
        small = Path(tmp) / "small.kuzu"
        subprocess.run(
            [cli, "ingest", str(TRACES / "hta" / "trace_filter"), "--db", str(small)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for name, argv in (
            ("--version", [cli, "--version"]),
            ("--help", [cli, "--help"]),
            ("query (small db)", [cli, "query", str(small), "MATCH (r:Rank) RETURN count(*)"]),
        ):
            walls = [timed(argv)[1] for _ in range(max(5, args.repeat))]
            start_rows.append([name, f"{median(walls):.3f}"])
    what = "report + path of every rank" if args.path else "report"
    print(f"first answer ({what}), whole processes, median of {args.repeat}:")
    print("(answer: until the report is printed, before the database write commits; exit:")
    print(" until the command ends, the write committed; again: the database already holds them)")
    print_table(
        ["input", "MB", "HTA s", "answer s", "HTA/answer", "goal", "exit s", "HTA/exit",
         "again s", "HTA/again"],
        rows,
    )  # fmt: skip
    print("\nstart-up, whole processes (goal: --version and --help <= 0.15 s, query <= 0.4 s):")
    print_table(["command", "median s"], start_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
