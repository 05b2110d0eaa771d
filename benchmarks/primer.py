"""One-command sanity check over pinned real traces: ingest time and node counts by label.

Expected counts come from the JSON alone (plain `json`, category lists written out here from
the design contract, not imported from `ingest/`), and are compared with the database's counts.
With `--baseline-python` (the python of another tracegraph install, e.g. a venv on the main
branch) the same ingests run there too, interleaved, and the time ratio is printed.

    python benchmarks/primer.py [--repeat 3] [--baseline-python PATH] [--only control]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from _common import TRACES, ChildRun, ingest_child, median, note, print_table

from tracegraph.ingest.store import GraphStore

PINNED: dict[str, str] = {
    "control": "hta/trace_diff/control/control.json.gz",
    "test": "hta/trace_diff/test/test.json.gz",
    "negative_queue_rank0": "hta/negative_queue_length_values_check/rank0.json.gz",
    "ns_resolution": "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "nccl_data": "hta/nccl_parser_config/nccl_data.json.gz",
    "resnet50": "kineto/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz",
    "resnet50_autograd": (
        "kineto/samples/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz"
    ),
}

# Complete ('X') events by category → node label (docs: DESIGN.md "Graph"; old Kineto names too).
LABEL_OF_CATEGORY = {
    "cpu_op": "Op",
    "user_annotation": "Op",
    "python_function": "Op",
    "Operator": "Op",
    "overhead": "Op",
    "cuda_runtime": "Runtime",
    "cuda_driver": "Runtime",
    "Runtime": "Runtime",
    "mtia_runtime": "Runtime",
    "kernel": "Kernel",
    "gpu_memcpy": "Kernel",
    "gpu_memset": "Kernel",
    "Kernel": "Kernel",
    "Memcpy": "Kernel",
    "Memset": "Kernel",
    "mtia_ccp_events": "Kernel",
}
LABELS = ("Op", "Runtime", "Kernel", "Rank", "Run")


def expected_counts(path: Path) -> tuple[int, dict[str, int]]:
    """(traceEvents entries, expected nodes by label) of a single-rank trace, by plain json."""
    with gzip.open(path, "rt") if path.name.endswith(".gz") else open(path) as fh:
        data = json.load(fh)
    events = data["traceEvents"] if isinstance(data, dict) else data
    counts: Counter[str] = Counter()
    for event in events:
        label = LABEL_OF_CATEGORY.get(event.get("cat"))
        if label and event.get("ph") == "X" and "ts" in event:
            counts[label] += 1
    return len(events), {label: counts[label] for label in LABELS[:3]} | {"Rank": 1, "Run": 1}


def db_counts(db: Path) -> dict[str, int]:
    """Nodes by label in the database."""
    with GraphStore(db) as store:
        return {
            label: store.run(f"MATCH (n:{label}) RETURN count(n) AS n").table["n"][0].as_py()
            for label in LABELS
        }


def bench(
    path: Path, repeat: int, baseline: Path | None
) -> tuple[list[ChildRun], list[ChildRun], dict[str, int]]:
    """Interleaved ingests (candidate, baseline); the first candidate database is counted."""
    runs: list[ChildRun] = []
    base_runs: list[ChildRun] = []
    counted: dict[str, int] = {}
    for i in range(repeat):
        order = ["candidate", "baseline"] if i % 2 == 0 else ["baseline", "candidate"]
        for who in order:
            if who == "baseline":
                if baseline:
                    base_runs.append(ingest_child([path], run="primer", python=baseline))
                continue
            if counted:
                runs.append(ingest_child([path], run="primer"))
                continue
            folder = Path(tempfile.mkdtemp(prefix="tg-primer-"))
            try:
                runs.append(ingest_child([path], run="primer", db=folder / "primer.kuzu"))
                counted = db_counts(folder / "primer.kuzu")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    return runs, base_runs, counted


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--baseline-python", type=Path, help="python of another tracegraph install")
    p.add_argument("--only", nargs="+", choices=sorted(PINNED), help="a subset of the traces")
    args = p.parse_args(argv)
    names = args.only or list(PINNED)
    rows = []
    mismatches = 0
    for name in names:
        path = TRACES / PINNED[name]
        if not path.exists():
            note(f"{name}: {path} missing, skipped")
            continue
        events, expected = expected_counts(path)
        note(f"{name}: {events:,} events")
        runs, base_runs, got = bench(path, args.repeat, args.baseline_python)
        work = median([r.work_s for r in runs])
        ratio = "-"
        if base_runs:
            base_cpu = median([r.cpu_s for r in base_runs]) / median([r.cpu_s for r in runs])
            ratio = f"{median([r.work_s for r in base_runs]) / work:.2f}x (cpu {base_cpu:.2f}x)"
        bad = [label for label in LABELS if expected[label] != got.get(label)]
        mismatches += bool(bad)
        counts = " ".join(f"{label} {got.get(label)}/{expected[label]}" for label in LABELS[:3])
        rows.append(
            [
                name,
                events,
                " ".join(f"{r.work_s:.2f}" for r in runs),
                work,
                median([r.cpu_s for r in runs]),
                f"{1e6 * work / events:.1f}",
                ratio,
                counts,
                "ok" if not bad else "MISMATCH " + ",".join(bad),
            ]
        )
    print("== primer: ingest in a fresh process per run (work wall and cpu, imports excluded)")
    print_table(
        [
            "trace",
            "events",
            "s per run",
            "median s",
            "cpu s",
            "µs/event",
            "baseline/this",
            "nodes db/expected",
            "counts",
        ],
        rows,
    )
    print(f"{len(rows) - mismatches}/{len(rows)} traces with the expected node counts")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
