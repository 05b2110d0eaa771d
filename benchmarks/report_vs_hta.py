"""`tracegraph report` vs HTA's own analyses, side by side, as whole processes.

For each trace folder (default: hta/trace_filter, 2 ranks; hta/trace_diff/control, 1 rank of
62k events), ingested once (not timed): `tracegraph report --hta-compatible --format json` and
`tracegraph report --format json` (exact, with findings), each a fresh `tracegraph` process,
against one HTA 0.5.0 process that loads the folder and runs the same four analyses (temporal
breakdown, comm/comp overlap, kernel breakdown, idle time of every rank) — what a user runs to
get the same tables. Interleaved, median of `--repeat`, wall time and peak RSS of each process.

    python benchmarks/report_vs_hta.py --repeat 5
    python benchmarks/report_vs_hta.py --folder /path/to/traces --repeat 3
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
from pathlib import Path

from _common import TRACES, ChildRun, ingest_child, median, print_table, run_child

from tracegraph.ingest.edgesets.hta.env import default_cache_root, ensure_env

HTA_CHILD = """
import json, logging, sys, time, warnings
logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(analysis.t.traces)
t1 = time.perf_counter()
analysis.get_temporal_breakdown(visualize=False)
analysis.get_comm_comp_overlap(visualize=False)
analysis.get_gpu_kernel_breakdown(visualize=False)
analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
print(json.dumps({"load_s": t1 - t0, "analyses_s": time.perf_counter() - t1}))
"""
# the `tracegraph` command in this process, its output discarded, then one JSON line for run_child
TRACEGRAPH_CHILD = """
import contextlib, io, sys
from tracegraph.explorer.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
print('{"exit": %d, "chars": %d}' % (code, len(out.getvalue())))
"""
DEFAULT_FOLDERS = ("hta/trace_filter", "hta/trace_diff/control")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, action="append", help="trace folder(s)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folders = args.folder or [TRACES / f for f in DEFAULT_FOLDERS]
    hta = ensure_env("HolisticTraceAnalysis==0.5.0", default_cache_root())
    rows = []
    with tempfile.TemporaryDirectory(prefix="tg-report-bench-") as tmp:
        for folder in folders:
            db = Path(tmp) / f"{folder.name}.kuzu"
            ingest_child([folder], db=db)  # in a child: a fork inherits the parent's peak RSS
            runs: dict[str, list[ChildRun]] = {"hta": [], "compatible": [], "exact": []}
            for _ in range(args.repeat):
                runs["hta"].append(run_child([str(hta.python), "-c", HTA_CHILD, str(folder)]))
                for mode, extra in (("compatible", ["--hta-compatible"]), ("exact", [])):
                    argv = ["report", str(db), "--format", "json", *extra]
                    runs[mode].append(run_child([sys.executable, "-c", TRACEGRAPH_CHILD, *argv]))
            wall = {k: median([r.wall_s for r in v]) for k, v in runs.items()}
            rss = {k: median([r.maxrss_bytes for r in v]) / 2**20 for k, v in runs.items()}
            rows.append(
                [
                    folder.name,
                    f"{wall['hta']:.2f}",
                    f"{wall['compatible']:.2f}",
                    f"{wall['hta'] / wall['compatible']:.1f}x",
                    f"{wall['exact']:.2f}",
                    f"{wall['hta'] / wall['exact']:.1f}x",
                    f"{rss['hta']:.0f} / {rss['compatible']:.0f} / {rss['exact']:.0f}",
                ]
            )
            shutil.rmtree(db.with_name(db.name + ".archive"), ignore_errors=True)
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"median of {args.repeat} whole processes each (wall s; peak RSS MiB, of which up to "
          f"{floor:.0f} MiB may be this parent's, inherited at fork)")  # fmt: skip
    print_table(
        [
            "trace",
            "HTA load+4",
            "tg compatible",
            "ratio",
            "tg exact",
            "ratio",
            "RSS hta / compat / exact",
        ],  # fmt: skip
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
