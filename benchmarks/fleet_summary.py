"""The fleet tier: a job of many ranks ingested in full and as summaries (`ingest --summary`),
side by side, each a whole `tracegraph` process, on the same synthetic per-rank files: python
stacks, nested ranges, one rank late on the host by 20 ms every step and one whose GEMMs run
25x slower (a slow GPU).

Prints, as medians of --repeat runs: both ingests' wall time and their ratio (goal <= 0.35), the
database + archive sizes and their ratio (goal <= 10%), the summary report's time (goal <= 2 s),
its findings (goal <= 20) and in how many steps it names each injected rank (goal: every step),
then `ingest --full-ranks auto` on the summary: its time and the ranks it loaded (goal: the
injected ones and a baseline). The generator's other defaults that single out a rank (a CPU
straggler, a data-loader stall in one step) are off: the job has the issue's two injected ranks.

    python benchmarks/fleet_summary.py                  # 1,024 ranks, 3 steps
    python benchmarks/fleet_summary.py --ranks 64 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import cached_per_rank, median, note, print_table

from tracegraph.examples.synthetic import SyntheticConfig, layers_for_bytes

RANK_BYTES = 700_000  # per rank file, as the issue measured
GOAL_INGEST_RATIO = 0.35
GOAL_SIZE_RATIO = 0.10
GOAL_REPORT_S = 2.0
GOAL_FINDINGS = 20


def job(ranks: int, steps: int) -> SyntheticConfig:
    return SyntheticConfig(
        ranks=ranks,
        steps=steps,
        layers=layers_for_bytes(RANK_BYTES * ranks, ranks, steps),
        python_stacks=True,
        annotate=True,
        late_rank=ranks // 3,
        late_us=20_000,
        slow_kernel_rank=2 * ranks // 3,
        slow_kernel_factor=25.0,
        straggler_factor=1.0,  # the job: only the two injected ranks stand out
        stall_every=0,
    )


def tracegraph(*args: str) -> tuple[float, str, int]:
    """One tracegraph command as a whole process: its wall time, stdout and peak RSS (its own,
    not its workers')."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [str(Path(sys.executable).with_name("tracegraph")), *args], stdout=out, stderr=err
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed = err.read().decode()[-3000:]
            raise SystemExit(f"tracegraph {' '.join(args)} failed:\n{failed}")
        return wall, out.read().decode(), usage.ru_maxrss * 1024


def size_of(db: Path) -> int:
    """The database file and its archive folder, in bytes."""
    total = db.stat().st_size
    archive = db.with_name(db.name + ".archive")
    for p in archive.rglob("*"):
        if p.is_file():
            total += p.stat().st_size
    return total


def named_in_steps(report: dict, rank: int) -> int:
    """In how many steps the report names `rank`: it stands out across ranks, or is the
    step's straggler."""
    count = 0
    for step in report["steps"]:
        spread = step.get("across_ranks") or {}
        outliers = {r for m in spread.values() for r in m.get("outliers", [])}
        straggler = (step.get("straggler") or {}).get("rank")
        count += rank in outliers or rank == straggler
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="ingest --jobs (default: tracegraph's)")
    args = parser.parse_args()
    config = job(args.ranks, args.steps)
    folder = cached_per_rank(config)[0].parent
    jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
    scratch = Path(tempfile.mkdtemp(prefix="tg-fleet-summary-"))
    times: dict[str, list[float]] = {"full": [], "summary": [], "report": [], "full_ranks": []}
    rss: dict[str, list[int]] = {"full": [], "summary": []}
    loaded = ""
    sizes: dict[str, int] = {}
    try:
        for i in range(args.repeat):
            for tier in ("full", "summary"):
                db = scratch / f"{tier}-{i}.kz"
                extra = ["--summary"] if tier == "summary" else []
                note(f"ingest {tier} #{i + 1}")
                wall, _, peak = tracegraph("ingest", str(folder), "--db", str(db), *jobs, *extra)
                times[tier].append(wall)
                rss[tier].append(peak)
                sizes[tier] = size_of(db)
            wall, out, _ = tracegraph(
                "report", str(scratch / f"summary-{i}.kz"), "--format", "json"
            )
            times["report"].append(wall)
            report = json.loads(out)
            wall, out, _ = tracegraph("ingest", "--db", str(scratch / f"summary-{i}.kz"),
                                   "--full-ranks", "auto")  # fmt: skip
            times["full_ranks"].append(wall)
            loaded = out.split(" of run ")[0].removeprefix("loaded ")
            for tier in ("full", "summary"):
                db = scratch / f"{tier}-{i}.kz"
                db.unlink()
                shutil.rmtree(db.with_name(db.name + ".archive"), ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    steps = len(report["steps"])
    full, summary, report_s = (median(times[k]) for k in ("full", "summary", "report"))
    mib = 1 << 20
    print(f"{args.ranks} ranks x {args.steps} steps, {sum(1 for _ in folder.iterdir())} files; "
          f"medians of {args.repeat}")  # fmt: skip
    print_table(
        ["what", "full", "summary", "ratio", "goal"],
        [
            ["ingest (s)", round(full, 2), round(summary, 2), round(summary / full, 3),
             f"<= {GOAL_INGEST_RATIO}"],
            ["db + archive (MiB)", round(sizes["full"] / mib, 1), round(sizes["summary"] / mib, 1),
             round(sizes["summary"] / sizes["full"], 3), f"<= {GOAL_SIZE_RATIO}"],
            ["main process peak RSS (MiB)", round(median(rss["full"]) / mib),
             round(median(rss["summary"]) / mib),
             round(median(rss["summary"]) / median(rss["full"]), 3), ""],
        ],
    )  # fmt: skip
    late, slow = config.late_rank, config.slow_kernel_rank
    assert late is not None and slow is not None
    print(f"summary report: {report_s:.2f} s (goal <= {GOAL_REPORT_S}); "
          f"{len(report['findings'])} findings (goal <= {GOAL_FINDINGS}); "
          f"late rank {late} named in {named_in_steps(report, late)} of {steps} steps, "
          f"slow-GPU rank {slow} in {named_in_steps(report, slow)} of {steps}")  # fmt: skip
    print(f"--full-ranks auto: {median(times['full_ranks']):.2f} s, loaded {loaded}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
