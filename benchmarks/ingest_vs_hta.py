"""tracegraph ingest (parse + link + Kuzu load) vs HTA's TraceAnalysis load, side by side.

Both run in fresh child processes, interleaved (the order alternates every round), each in its
own environment: tracegraph in this interpreter's, HTA in a venv of its own (0.5.0 and 0.6.1
both install the module `hta`). Times are reported without and with imports.

    python benchmarks/ingest_vs_hta.py --hta-python /tmp/hta/v050/bin/python \
        --hta-python /tmp/hta/v061/bin/python [--trace PATH ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import (
    CONTROL,
    ChildRun,
    hta_label,
    ingest_child,
    median,
    note,
    print_table,
    run_child,
)

GOAL = 5.0

# HTA's own load, the way a user starts an analysis; argv: rank, trace path.
HTA_CHILD = """
import time
t0 = time.perf_counter()
import json, logging, sys, warnings
logging.disable(logging.WARNING)
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
t1, c1 = time.perf_counter(), time.process_time()
rank = int(sys.argv[1])
analyzer = TraceAnalysis(trace_files={rank: sys.argv[2]})
t2, c2 = time.perf_counter(), time.process_time()
rows = len(analyzer.t.get_trace(rank))
print(json.dumps({"import_s": t1 - t0, "work_s": t2 - t1, "cpu_s": c2 - c1, "rows": rows}))
"""

DEFAULT_HTA_SPECS = ("HolisticTraceAnalysis==0.5.0", "traceinsight==0.6.1")


@dataclass(frozen=True)
class Contender:
    """One side of the comparison: a name and how to run it once on a trace."""

    name: str
    run: Callable[[Path], ChildRun]


def hta_env_python(spec: str, cache_root: Path) -> Path:
    """The python of the cached HTA env for `spec` (built on first use, which takes minutes).

    The only code here that knows the API of `tracegraph.ingest.edgesets.hta.env`; raises
    ImportError where that module does not exist.
    """
    from tracegraph.ingest.edgesets.hta import env as hta_env

    def progress(stage: str, done: int, total: int) -> None:
        note(f"hta env {spec}: {stage} {done}/{total}")

    return hta_env.ensure_env(spec, cache_root, progress=progress).python


def trace_rank(path: Path) -> int:
    """The rank the trace says it is (distributedInfo.rank), else 0; only a dict key for HTA."""
    import gzip

    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(1 << 16).decode("utf-8", "replace")
    marker = head.find('"distributedInfo"')
    if marker < 0:
        return 0
    rank_at = head.find('"rank"', marker)
    if rank_at < 0:
        return 0
    digits = "".join(c for c in head[rank_at + 6 : rank_at + 20] if c.isdigit())
    return int(digits) if digits else 0


def contenders(hta_pythons: Sequence[Path]) -> list[Contender]:
    tracegraph = Contender("tracegraph", lambda path: ingest_child([path]))
    out = [tracegraph]
    for python in hta_pythons:

        def run_hta(path: Path, python: Path = python) -> ChildRun:
            return run_child([str(python), "-c", HTA_CHILD, str(trace_rank(path)), str(path)])

        out.append(Contender(hta_label(python), run_hta))
    return out


def bench_trace(path: Path, sides: list[Contender], repeat: int) -> dict[str, list[ChildRun]]:
    """`repeat` rounds; each round runs every contender once, the order rotating per round."""
    runs: dict[str, list[ChildRun]] = {c.name: [] for c in sides}
    for i in range(repeat):
        shift = i % len(sides)
        for side in sides[shift:] + sides[:shift]:
            result = side.run(path)
            runs[side.name].append(result)
            note(
                f"  round {i + 1} {side.name:<20} work {result.work_s:6.2f} s  "
                f"cpu {result.cpu_s:6.2f} s  "
                f"+imports {result.import_s + result.work_s:6.2f} s  "
                f"process {result.wall_s:6.2f} s  rss {result.maxrss_bytes / 2**20:6.0f} MiB"
            )
    return runs


def report(path: Path, runs: dict[str, list[ChildRun]]) -> dict[str, list[float]]:
    """Print per-run times, medians and HTA/tracegraph ratios; returns the ratios by kind."""
    print(f"\n== {path}")
    base = runs["tracegraph"]
    base_work = median([r.work_s for r in base])
    base_all = median([r.import_s + r.work_s for r in base])
    base_wall = median([r.wall_s for r in base])
    base_cpu = median([r.cpu_s for r in base])
    rows = []
    ratios: dict[str, list[float]] = {"work": [], "with imports": [], "work cpu": []}
    for name, results in runs.items():
        work = median([r.work_s for r in results])
        with_imports = median([r.import_s + r.work_s for r in results])
        wall = median([r.wall_s for r in results])
        cpu = median([r.cpu_s for r in results])
        per_run = " ".join(f"{r.work_s:.2f}" for r in results)
        rows.append(
            [
                name,
                per_run,
                work,
                f"{work / base_work:.2f}x",
                with_imports,
                f"{with_imports / base_all:.2f}x",
                wall,
                f"{wall / base_wall:.2f}x",
                cpu,
                f"{cpu / base_cpu:.2f}x",
                f"{median([r.maxrss_bytes for r in results]) / 2**20:.0f}",
            ]
        )
        if name != "tracegraph":
            ratios["work"].append(work / base_work)
            ratios["with imports"].append(with_imports / base_all)
            ratios["work cpu"].append(cpu / base_cpu)
    print_table(
        [
            "contender",
            "work s per run",
            "median work s",
            "vs tg",
            "+imports s",
            "vs tg",
            "process s",
            "vs tg",
            "work cpu s",
            "vs tg",
            "peak MiB",
        ],
        rows,
    )
    return ratios


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, action="append", help="trace file (default: control)")
    p.add_argument("--repeat", type=int, default=3, help="rounds (median over them), >= 3")
    p.add_argument(
        "--hta-python",
        type=Path,
        action="append",
        help="python of a ready HTA venv (repeatable); default: envs from hta_env",
    )
    p.add_argument(
        "--hta-cache",
        type=Path,
        default=Path.home() / ".cache" / "tracegraph" / "hta-envs",
        help="where hta_env keeps its environments",
    )
    p.add_argument(
        "--hta",
        action="append",
        help=f"HTA spec for hta_env when --hta-python is not given (default {DEFAULT_HTA_SPECS})",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    pythons: list[Path] = list(args.hta_python or [])
    if not pythons:
        try:
            specs = args.hta or DEFAULT_HTA_SPECS
            pythons = [hta_env_python(spec, args.hta_cache) for spec in specs]
        except Exception as exc:  # ImportError, or the env's build failed (HtaEnvError)
            print(f"no HTA environment: {exc}; pass --hta-python PATH", file=sys.stderr)
            return 2
    sides = contenders(pythons)
    traces = args.trace or [CONTROL]
    lowest = {"work": float("inf"), "with imports": float("inf"), "work cpu": float("inf")}
    for path in traces:
        note(f"{path}: {args.repeat} rounds of {[s.name for s in sides]}")
        ratios = report(path, bench_trace(path, sides, args.repeat))
        for kind, values in ratios.items():
            lowest[kind] = min([lowest[kind], *values])
    print()
    for kind, value in lowest.items():
        verdict = "met" if value >= GOAL else "MISSED"
        print(f"HTA/tracegraph ({kind}, medians): lowest {value:.2f}x; goal >= {GOAL}x {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
