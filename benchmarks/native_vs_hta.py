"""Native edges + critical path vs HTA's load + critical_path_analysis, side by side.

Part 1, one trace (default hta/trace_diff/control, whole trace; `--annotation/--instance` for a
window): HTA's `TraceAnalysis(trace_files=...)` plus `critical_path_analysis` in each HTA
environment, against the native builder emulating that release, in fresh child processes,
interleaved, median of `--repeat`. Native is timed cold (parse the JSON, then build) and warm
(the frame source from the cache beside the database, then build); both give HTA's exact edge
set. Plain native (exact ns, inferred syncs) is timed too.

Whole processes, the issue's measure (same rounds, the order rotating every round): HTA's
child above timed as a process (interpreter, imports, load, critical_path_analysis), against the
`tracegraph edges DB --native --emulate VERSION` command on a copy of the trace's freshly
ingested database, once where the set does not exist yet (the first write) and once where it
does (a replace); wall time and the process's CPU time (user + sys, imports included). One
instrumented run of the command splits its time into imports, read + build, and the database
write (removing the old set, COPY, commit, close/checkpoint, the staging copy of the file).

Part 2: every ProfilerStep of every rank of a `--ranks`-rank synthetic job (default 64), ingested
once (not timed): `build_native_edge_set(all_steps=True)`, cold and warm cache, with the time to
write the edge set into the database and the cross-rank paths.

    python benchmarks/native_vs_hta.py                    # HTA envs from hta_env (--hta-cache DIR)
    python benchmarks/native_vs_hta.py --hta-python /tmp/hta/v050/bin/python --repeat 3
    python benchmarks/native_vs_hta.py --skip-all-steps   # part 1 only (~4 min with --repeat 3)
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from _common import (
    CACHE,
    CONTROL,
    hta_label,
    ingest_child,
    median,
    note,
    print_table,
    run_child,
)

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

# The `tracegraph` command (cli.main) in one process with timers around the steps of its write;
# each timer counts its own time only (a nested timer's is its own), and nothing is timed apart
# inside the removal of the old set (its rebuild COPYs belong to it). argv: the command's.
BREAKDOWN_CHILD = """
import time
t0 = time.perf_counter()
import contextlib, io, json, shutil, sys
from tracegraph.explorer.cli import main
t1 = time.perf_counter()
from tracegraph.ingest import store as store_mod
from tracegraph.ingest.edgesets import copies, records
from tracegraph.ingest.edgesets.native import edge_set
spent, stack = {}, []

def timed(name, fn):
    def wrapper(*args, **kwargs):
        label = name(*args, **kwargs) if callable(name) else name
        if any(s[0] == "remove old set" for s in stack):
            return fn(*args, **kwargs)
        stack.append([label, 0.0])
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            _, inner = stack.pop()
            spent[label] = spent.get(label, 0.0) + elapsed - inner
            if stack:
                stack[-1][1] += elapsed
    return wrapper

def opened(self, path, read_only=True, *rest, **kwargs):
    return "open DB (read-only)" if read_only else "open staging DB (writable)"

def closed(self):
    return "close+checkpoint staging DB" if self.path.name.startswith(".") else "close (read-only)"

GS = store_mod.GraphStore
GS.__init__ = timed(opened, GS.__init__)
GS.close = timed(closed, GS.close)
GS.copy = timed("COPY (DEP, EdgeSet)", GS.copy)
GS.copy_edges = timed("COPY (DEP, EdgeSet)", GS.copy_edges)
GS.commit = timed("commit", GS.commit)
GS.create_schema = timed("create schema (IF NOT EXISTS)", GS.create_schema)
shutil.copyfile = timed("staging copy of the DB file", shutil.copyfile)
store_mod._fsync = timed("fsync + rename", store_mod._fsync)
records.remove_edge_sets = timed("remove old set", records.remove_edge_sets)
copies.write_copy = timed("Parquet copy of the set", copies.write_copy)
copies.remove = timed("remove old Parquet copy", copies.remove)
edge_set.write_edge_sets = timed("write: the rest (lock, checks)", edge_set.write_edge_sets)
edge_set.build_rank = timed("build (build_rank)", edge_set.build_rank)
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
t2 = time.perf_counter()
print(json.dumps({"exit": code, "import_s": t1 - t0, "main_s": t2 - t1, "in_process_s": t2 - t0,
                  "spent": spent}))
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


@dataclass(frozen=True)
class Whole:
    """One finished child process: its wall time, its CPU time (user + sys of the whole process,
    interpreter start and imports included) and the JSON it printed last ({} if none)."""

    wall_s: float
    cpu_s: float
    report: dict[str, object]


def run_whole(argv: Sequence[str]) -> Whole:
    """Run `argv` to the end (wait4: its own rusage); a non-zero exit raises."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[0]} {argv[1]} failed:\n{stderr[-3000:]}")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    return Whole(wall, usage.ru_utime + usage.ru_stime, report)


def copy_db(template: Path, db: Path) -> Path:
    """The database file and its run archive folder, copied (the archive names no path)."""
    shutil.copyfile(template, db)
    archive = template.with_name(template.name + ".archive")
    if archive.is_dir():
        shutil.copytree(archive, db.with_name(db.name + ".archive"))
    return db


def remove_db(db: Path) -> None:
    for path in (db, db.with_name(db.name + ".lock"), db.with_name(db.name + ".wal")):
        path.unlink(missing_ok=True)
    shutil.rmtree(db.with_name(db.name + ".archive"), ignore_errors=True)


def part_one(args: argparse.Namespace, pythons: list[Path]) -> None:
    trace, rank = Path(args.trace), str(args.rank)
    instance = "none" if args.instance is None else str(args.instance)
    scratch = Path(tempfile.mkdtemp(prefix="edgebench_native-"))
    cache_db = scratch / "cache.kuzu"
    template = scratch / "template.kuzu"
    note(f"ingesting {trace} into {template} (not timed)")
    ingest_child([trace], db=template)
    names = {p: hta_label(p) for p in pythons}
    command = Path(sys.executable).with_name("tracegraph")
    window = (
        ["--annotation", args.annotation]
        + ([] if args.instance is None else ["--instance", str(args.instance)])
        if args.annotation
        else ["--whole-trace"]
    )

    def edges_argv(db: Path, version: str) -> list[str]:
        return [str(command), "edges", str(db), "--native", "--emulate", version, *window]

    hta: dict[str, list[Whole]] = {}
    native: dict[tuple[str, str], list[Whole]] = {}
    whole: dict[tuple[str, str], list[Whole]] = {}  # (contender, version)
    for round_ in range(args.repeat):
        note(f"round {round_ + 1}/{args.repeat}")
        dbs: dict[tuple[str, str], Path] = {}
        for version in names.values():  # not timed: this round's copies, a set in "replace"'s
            for case in ("first", "replace"):
                db = copy_db(template, scratch / f"r{round_}-{case}-{version}.kuzu")
                if case == "replace":
                    run_whole(edges_argv(db, version))
                dbs[(case, version)] = db
        jobs: list[tuple[str, str, Callable[[], Whole]]] = []
        for python, version in names.items():
            argv = [str(python), "-I", "-c", HTA_CHILD, rank, str(trace), args.annotation, instance]
            jobs.append(("hta", version, lambda argv=argv: run_whole(argv)))
        for (case, version), db in dbs.items():
            jobs.append((case, version, lambda db=db, v=version: run_whole(edges_argv(db, v))))
        shift = round_ % len(jobs)
        for case, version, job in jobs[shift:] + jobs[:shift]:
            run = job()
            whole.setdefault((case, version), []).append(run)
            if case == "hta":
                hta.setdefault(version, []).append(run)
        for db in dbs.values():
            remove_db(db)
        for version in [*names.values(), "native"]:
            for mode in ("cold", "warm"):
                argv = [sys.executable, "-c", NATIVE_CHILD, mode, version, rank, str(trace)]
                argv += [args.annotation, instance, str(cache_db)]
                native.setdefault((version, mode), []).append(run_whole(argv))
    where = (
        f"{trace.name}, rank {rank}, window {args.annotation or 'whole trace'}"
        f"{'' if args.instance is None else f'[{args.instance}]'}; medians of {args.repeat}"
    )
    print(f"\nin-process work (no interpreter start, no imports), {where}")
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
    print(
        f"\nwhole processes (wall: start to exit, as seen by the parent; process s: the child's "
        f"user + sys CPU), {where}, interleaved"
    )
    labels = {
        "hta": "HTA: python -c (import hta, TraceAnalysis, critical_path_analysis)",
        "first": "tracegraph edges --native --emulate V: first write",
        "replace": "tracegraph edges --native --emulate V: replace",
    }
    rows = []
    for version in names.values():
        ref = whole[("hta", version)]
        ref_wall, ref_cpu = median([r.wall_s for r in ref]), median([r.cpu_s for r in ref])
        for case in ("hta", "first", "replace"):
            runs = whole[(case, version)]
            wall, cpu = median([r.wall_s for r in runs]), median([r.cpu_s for r in runs])
            ratio = case != "hta"
            rows.append(
                [
                    version,
                    labels[case],
                    wall,
                    cpu,
                    f"{ref_wall / wall:.1f}x" if ratio else "",
                    f"{ref_cpu / cpu:.1f}x" if ratio else "",
                    " ".join(f"{r.wall_s:.2f}" for r in runs),
                ]
            )
    print_table(
        [
            "version",
            "contender",
            "wall s",
            "process s",
            f"HTA / tg wall (goal {GOAL:.0f}x)",
            "HTA / tg process",
            "wall s per run",
        ],
        rows,
    )
    breakdown(template, scratch, names.values(), edges_argv)
    shutil.rmtree(scratch, ignore_errors=True)


BREAKDOWN_ORDER = (
    "import (tracegraph.explorer.cli)",
    "open DB (read-only)",
    "close (read-only)",
    "build (build_rank)",
    "read archive + CLI + the rest of the build",
    "staging copy of the DB file",
    "open staging DB (writable)",
    "create schema (IF NOT EXISTS)",
    "remove old set",
    "COPY (DEP, EdgeSet)",
    "Parquet copy of the set",
    "commit",
    "close+checkpoint staging DB",
    "fsync + rename",
    "remove old Parquet copy",
    "write: the rest (lock, checks)",
    "interpreter start + exit",
)
WRITE_STEPS = BREAKDOWN_ORDER[5:16]


def breakdown(
    template: Path,
    scratch: Path,
    versions: Sequence[str],
    edges_argv: Callable[[Path, str], list[str]],
) -> None:
    """One instrumented `tracegraph edges` process per version and case: where its time goes."""
    columns: list[tuple[str, Whole]] = []
    for version in versions:
        for case in ("first", "replace"):
            db = copy_db(template, scratch / f"breakdown-{case}-{version}.kuzu")
            if case == "replace":
                run_whole(edges_argv(db, version))
            argv = edges_argv(db, version)
            run = run_whole([sys.executable, "-c", BREAKDOWN_CHILD, *argv[1:]])
            columns.append((f"{version} {case}", run))
            remove_db(db)
    print_breakdown(columns)


def print_breakdown(columns: Sequence[tuple[str, Whole]]) -> None:
    """The steps of instrumented `tracegraph edges` processes (BREAKDOWN_CHILD), one column each."""
    rows: dict[str, list[float]] = {name: [] for name in BREAKDOWN_ORDER}
    for _, run in columns:
        report: dict = run.report
        spent = {str(k): float(v) for k, v in report["spent"].items()}
        spent["import (tracegraph.explorer.cli)"] = float(report["import_s"])
        spent["read archive + CLI + the rest of the build"] = float(report["main_s"]) - sum(
            float(v) for v in report["spent"].values()
        )
        spent["interpreter start + exit"] = run.wall_s - float(report["in_process_s"])
        for name in BREAKDOWN_ORDER:
            rows[name].append(spent.get(name, 0.0))
    table = [[name, *values] for name, values in rows.items()]
    write = [sum(rows[name][i] for name in WRITE_STEPS) for i in range(len(columns))]
    table.append(["= DB write (the steps above from the staging copy)", *write])
    table.append(["= whole process (wall)", *[run.wall_s for _, run in columns]])
    print("\nwhere one `tracegraph edges` process's time goes (one instrumented run each, s)")
    print_table(["step", *[name for name, _ in columns]], table)


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
    parser.add_argument("--skip-all-steps", action="store_true", help="only part 1")
    args = parser.parse_args(argv)
    if not args.skip_hta:
        pythons = args.hta_python or hta_pythons(
            args.hta or list(DEFAULT_HTA_SPECS), args.hta_cache
        )
        part_one(args, pythons)
    if not args.skip_all_steps:
        part_two(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
