"""Native edges + critical path vs HTA's load + critical_path_analysis, side by side.

Part 1, one trace (default hta/trace_diff/control, whole trace; `--annotation/--instance` for a
window): HTA's `TraceAnalysis(trace_files=...)` plus `critical_path_analysis` in each HTA
environment, against the native builder emulating that release, in fresh child processes,
interleaved, median of `--repeat`. Native is timed cold (parse the JSON, then build) and warm
(the frame source from the cache beside the database, then build); both give HTA's exact edge
set. Plain native (exact ns, inferred syncs) is timed too.

Part 2: every ProfilerStep of every rank of a `--ranks`-rank synthetic job (default 64), ingested
once (not timed): `build_native_edge_set(all_steps=True)`, cold and warm cache, with the time to
write the edge set into the database and the cross-rank paths.

    python benchmarks/native_vs_hta.py                    # HTA envs from hta_env (--hta-cache DIR)
    python benchmarks/native_vs_hta.py --hta-python /tmp/hta/v050/bin/python --repeat 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import CACHE, CONTROL, ChildRun, median, note, print_table, run_child

from tracegraph.examples.synthetic import SyntheticConfig

GOAL = 20.0
DEFAULT_HTA_SPECS = ("HolisticTraceAnalysis==0.5.0", "traceinsight==0.6.1")

HTA_CHILD = """
import time, json, logging, sys, warnings
logging.disable(logging.WARNING)
warnings.filterwarnings("ignore")
from importlib.metadata import PackageNotFoundError, version
from hta.trace_analysis import TraceAnalysis
rank, path, annotation = int(sys.argv[1]), sys.argv[2], sys.argv[3]
instance = None if sys.argv[4] == "none" else int(sys.argv[4])
name = "?"
for dist, prefix in (("HolisticTraceAnalysis", "hta"), ("traceinsight", "traceinsight")):
    try:
        name = f"{prefix}-{version(dist)}"
        break
    except PackageNotFoundError:
        pass
t0, c0 = time.perf_counter(), time.process_time()
analyzer = TraceAnalysis(trace_files={rank: path})
t1 = time.perf_counter()
graph, ok = analyzer.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
t2, c2 = time.perf_counter(), time.process_time()
length = sum(graph.edges[e.begin, e.end]["weight"] for e in graph.critical_path_edges_set)
print(json.dumps({"version": name, "load_s": t1 - t0, "cpa_s": t2 - t1, "work_s": t2 - t0,
                  "cpu_s": c2 - c0, "edges": graph.number_of_edges(), "ok": ok,
                  "length_us": float(length)}))
"""

NATIVE_CHILD = """
import time, json, sys
from pathlib import Path
from tracegraph.ingest.edgesets.native.rank_build import build_rank
from tracegraph.ingest.edgesets.native.cache import load_sources, store_sources
from tracegraph.ingest.edgesets.native.frame import frame_source
from tracegraph.ingest.edgesets.native.options import NativeOptions, emulate
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.parse import parse_file
mode, version, rank, path, annotation = sys.argv[1:6]
instance = None if sys.argv[6] == "none" else int(sys.argv[6])
cache_db = Path(sys.argv[7])
options = NativeOptions() if version == "native" else emulate(version)
t0, c0 = time.perf_counter(), time.process_time()
if mode == "warm":
    sources = load_sources(cache_db, Path(path))
else:
    sources = [frame_source(t) for t in parse_file(Path(path))]
    store_sources(cache_db, Path(path), sources)
t1 = time.perf_counter()
source = next(s for s in sources if s.rank == int(rank))
built = build_rank(source, options, Window(annotation, instance))
t2, c2 = time.perf_counter(), time.process_time()
graph = built.windows[0].graph
print(json.dumps({"read_s": t1 - t0, "build_s": t2 - t1, "work_s": t2 - t0, "cpu_s": c2 - c0,
                  "edges": len(graph.edges), "length_ns": int(graph.path.length) * graph.unit_ns}))
"""

ALL_STEPS_CHILD = """
import time, json, sys
from pathlib import Path
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import NativeOptions
t0, c0 = time.perf_counter(), time.process_time()
result = build_native_edge_set(Path(sys.argv[1]), options=NativeOptions(), all_steps=True)
t1, c1 = time.perf_counter(), time.process_time()
windows = sum(len(r.windows) for r in result.ranks)
print(json.dumps({"work_s": t1 - t0, "cpu_s": c1 - c0, "build_s": result.seconds["build"],
                  "edges": result.edges_loaded, "windows": windows,
                  "cross_rank_steps": len(result.cross_rank),
                  "bound_by": [p.bound_by_rank for p in result.cross_rank]}))
"""


def hta_pythons(specs: list[str], cache: Path) -> list[Path]:
    from tracegraph.ingest.edgesets.hta import env as hta_env

    return [
        hta_env.ensure_env(s, cache, lambda *a: note(" ".join(map(str, a)))).python for s in specs
    ]


def part_one(args: argparse.Namespace, pythons: list[Path]) -> None:
    trace, rank = Path(args.trace), str(args.rank)
    instance = "none" if args.instance is None else str(args.instance)
    cache_db = Path(tempfile.mkdtemp(prefix="tg-native-bench-")) / "cache.kuzu"
    hta: dict[str, list[ChildRun]] = {}
    native: dict[tuple[str, str], list[ChildRun]] = {}
    versions: dict[Path, str] = {}
    for round_ in range(args.repeat):
        note(f"round {round_ + 1}/{args.repeat}")
        for python in pythons if round_ % 2 == 0 else list(reversed(pythons)):
            run = run_child(
                [str(python), "-I", "-c", HTA_CHILD, rank, str(trace), args.annotation, instance]
            )
            versions[python] = str(run.report["version"])
            hta.setdefault(versions[python], []).append(run)
        for version in [*versions.values(), "native"]:
            for mode in ("cold", "warm"):
                run = run_child(
                    [
                        sys.executable,
                        "-c",
                        NATIVE_CHILD,
                        mode,
                        version,
                        rank,
                        str(trace),
                        args.annotation,
                        instance,
                        str(cache_db),
                    ]
                )
                native.setdefault((version, mode), []).append(run)
    shutil.rmtree(cache_db.parent, ignore_errors=True)
    print(
        f"\n{trace.name}, rank {rank}, window {args.annotation or 'whole trace'}"
        f"{'' if args.instance is None else f'[{args.instance}]'}; medians of {args.repeat}"
    )
    rows = []
    for version, runs in hta.items():
        load = median([float(r.report["load_s"]) for r in runs])
        cpa = median([float(r.report["cpa_s"]) for r in runs])
        total = load + cpa
        rows.append(
            [
                version,
                "HTA load + critical_path_analysis",
                load,
                cpa,
                total,
                int(runs[0].report["edges"]),
                "",
            ]
        )
        for mode in ("cold", "warm"):
            nat = native[(version, mode)]
            read = median([float(r.report["read_s"]) for r in nat])
            build = median([float(r.report["build_s"]) for r in nat])
            rows.append(
                [
                    version,
                    f"native:{version} {mode}",
                    read,
                    build,
                    read + build,
                    int(nat[0].report["edges"]),
                    f"{total / (read + build):.1f}x",
                ]
            )
    for mode in ("cold", "warm"):
        nat = native[("native", mode)]
        read = median([float(r.report["read_s"]) for r in nat])
        build = median([float(r.report["build_s"]) for r in nat])
        rows.append(
            ["-", f"native {mode}", read, build, read + build, int(nat[0].report["edges"]), ""]
        )
    print_table(
        [
            "version",
            "what",
            "read/load s",
            "graph+path s",
            "total s",
            "edges",
            f"HTA / native (goal {GOAL:.0f}x)",
        ],
        rows,
    )


def part_two(args: argparse.Namespace) -> None:
    config = SyntheticConfig(ranks=args.ranks, steps=args.steps, layers=args.layers)
    folder = CACHE / f"native-allsteps-r{config.ranks}-s{config.steps}-l{config.layers}"
    db = folder / "run.kuzu"
    if not db.exists():
        from tracegraph.examples.synthetic import write_per_rank
        from tracegraph.ingest.pipeline import IngestOptions, ingest

        note(f"writing and ingesting {config.ranks} synthetic ranks into {db}")
        write_per_rank(config, folder / "traces")
        ingest([folder / "traces"], db, IngestOptions(run="synthetic"))
    rows = []
    for mode in ("cold", "warm"):
        if mode == "cold":
            shutil.rmtree(db.with_name(db.name + ".native-cache"), ignore_errors=True)
        run = run_child([sys.executable, "-c", ALL_STEPS_CHILD, str(db)])
        r = run.report
        rows.append(
            [
                mode,
                int(r["windows"]),
                int(r["edges"]),
                float(r["build_s"]),
                float(r["work_s"]),
                float(r["cpu_s"]),
                int(r["cross_rank_steps"]),
                str(sorted(set(r["bound_by"]))),
            ]
        )
    print(
        f"\nall steps of all ranks: {config.ranks} ranks x {config.steps} steps, "
        f"{config.layers} layers (synthetic, straggler rank {config.straggler})"
    )
    print_table(
        [
            "cache",
            "windows",
            "edges",
            "build s",
            "total s (with DB write)",
            "cpu s",
            "cross-rank steps",
            "bound by ranks",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default=str(CONTROL))
    parser.add_argument("--rank", type=int, default=3, help="the trace's rank (control: 3)")
    parser.add_argument("--annotation", default="", help='window annotation ("" = whole trace)')
    parser.add_argument("--instance", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-python", action="append", type=Path, default=[])
    parser.add_argument("--hta", action="append", default=[], help="HTA spec for hta_env")
    parser.add_argument(
        "--hta-cache", type=Path, default=Path.home() / ".cache" / "tracegraph" / "hta"
    )
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--skip-hta", action="store_true", help="only part 2")
    args = parser.parse_args(argv)
    if not args.skip_hta:
        pythons = args.hta_python or hta_pythons(
            args.hta or list(DEFAULT_HTA_SPECS), args.hta_cache
        )
        part_one(args, pythons)
    part_two(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
