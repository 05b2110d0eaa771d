"""Peak RSS of `tracegraph query` as its result grows: 1 M, 3 M and 10 M rows, CSV to /dev/null.

Each query runs as a whole `tracegraph query` process (its own ru_maxrss via wait4), against
the baseline of the same command returning one row. The result is written batch by batch, so the
peak should grow with Kuzu's own result buffer only, not with the text. Rows come from a cross
product of a 64-rank synthetic job's Op nodes (`MATCH (a:Op) WITH a LIMIT n MATCH (b:Op)`).

    python benchmarks/query_rss.py [--repeat 3] [--format csv]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import CACHE, median, note, print_table

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

CONFIG = SyntheticConfig(ranks=64, steps=3, layers=8)
QUERY = "MATCH (a:Op) WITH a LIMIT {n} MATCH (b:Op) RETURN a.id, b.id"


def database() -> tuple[Path, int]:
    """The cached database and its Op count, made in a child: Linux hands a parent's peak RSS
    down to the children it starts, so this process stays small."""
    db = CACHE / "query-rss-r64-s3-l8" / "run.kuzu"
    out = subprocess.run(
        [sys.executable, __file__, "--build", str(db)], check=True, capture_output=True, text=True
    )
    return db, int(out.stdout.split()[-1])


def build(db: Path) -> None:
    if not db.exists():
        note(f"writing and ingesting {CONFIG.ranks} synthetic ranks into {db}")
        ingest(write_per_rank(CONFIG, db.parent / "traces"), db, IngestOptions(run="bench"))
    with GraphStore(db) as store:
        print(int(store.run("MATCH (a:Op) RETURN count(*) AS n").table["n"][0].as_py()))


def peak_rss(db: Path, cypher: str, fmt: str) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of one whole `tracegraph query` process."""
    argv = [sys.executable, "-m", "tracegraph.explorer.cli", "query", str(db), cypher,
            "--format", fmt, "--timeout-s", "0"]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"query failed: {cypher}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--format", default="csv", choices=("csv", "json", "table"))
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:
        build(args.build)
        return 0
    db, ops = database()
    rows = []
    base_rss = None
    for target in (1, 1_000_000, 3_000_000, 10_000_000):
        limit = max(1, round(target / ops)) if target > 1 else 1
        cypher = QUERY.format(n=limit) if target > 1 else "RETURN 1"
        runs = [peak_rss(db, cypher, args.format) for _ in range(args.repeat)]
        rss = median([r for _, r in runs])
        base_rss = base_rss or rss
        n = limit * ops if target > 1 else 1
        rows.append([f"{n:,}", median([w for w, _ in runs]), rss / 2**20, rss / base_rss])
    print(f"\ntracegraph query --format {args.format}, medians of {args.repeat}")
    print_table(["rows", "wall s", "peak RSS MiB", "vs 1 row"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
