"""Replacing an edge set vs writing it fresh: whole `tracegraph edges` processes, side by side.

For each database and edge set: `tracegraph edges COPY --native [--emulate V]` on a copy of the
database (file and run archive) that holds the set (a replace: the write first drops the set's
DEP rows, `records.remove_edge_sets`), and the same command on a copy where the set is absent (a
fresh write). There is no command that removes one edge set, so the fresh copies come from a
template the set was removed from once, before timing, by the store's own `remove_edge_sets` in
one write (with its Parquet copy; by deleting rows where the store's rule does, so the table
is not byte for byte one never written); every other set stays: both writes keep the same rows.
Every timed run is a whole process on its own copy (wall as the parent sees it), with in-process
timers around the write (`write_edge_sets`) and the removal inside it; replace and fresh
alternate which goes first every round; medians of `--repeat`.

Databases: (a) the control trace, ingested here, with the sets native, native:hta-0.5.0 and
native:traceinsight-0.6.1 written (not timed); (b) `--big` (default the 64-rank
/tmp/tg-bench/rep64/run.kuzu with whole-trace sets native, native:hta-0.5.0,
native:traceinsight-0.6.1), copied first: the original is only read.

    python benchmarks/edge_set_replace.py                  # ~6 min; --repeat 3
    python benchmarks/edge_set_replace.py --big-sets native:hta-0.5.0 --skip-control
    python benchmarks/edge_set_replace.py --breakdown     # + one instrumented process per case
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import CONTROL, ingest_child, median, note, print_table
from native_vs_hta import BREAKDOWN_CHILD, Whole, copy_db, print_breakdown, remove_db, run_whole

CROSS_RANK = "native:cross-rank"  # what plain native writes beside itself on several ranks

# The `tracegraph` command (cli.main) with timers around the write and the removal in it.
# argv: the command's.
TIMED_CHILD = """
import time
t0 = time.perf_counter()
import contextlib, io, json, sys
from tracegraph.explorer.cli import main
from tracegraph.ingest.edgesets import records
from tracegraph.ingest.edgesets.native import edge_set
spent = {"write_s": 0.0, "remove_s": 0.0}

def timed(key, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - start
    return wrapper

edge_set.write_edge_sets = timed("write_s", edge_set.write_edge_sets)
records.remove_edge_sets = timed("remove_s", records.remove_edge_sets)
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"exit": code, "in_process_s": time.perf_counter() - t0, **spent}))
"""

# Removes edge sets from a database in one write, the store's own way; prints all DEP rows before
# (total, what the store's rule counts) and those of the sets (dropped). argv: db, names...
REMOVE_CHILD = """
import json, sys
from pathlib import Path
from tracegraph.ingest import archive, schema
from tracegraph.ingest.edgesets import copies, records
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import write_transaction
db, names = Path(sys.argv[1]), sys.argv[2:]
with write_transaction(db) as store:
    run, run_idx = resolve_run(store, None)
    lo, hi = schema.key_range(run_idx)
    def count(cypher, params):
        return int(store.run(cypher, params).table["n"][0].as_py() or 0)
    total = count("MATCH ()-[d:DEP]->() RETURN count(*) AS n", {})  # the rule's: all runs
    dropped = count(f"MATCH (a:{records._EVENTS})-[d:DEP]->() WHERE d.edge_set IN $names "
                    f"AND a.id >= {lo} AND a.id < {hi} RETURN count(*) AS n", {"names": names})
    keys = {n: c.key for n, c in records.edge_set_copies(store, run, run_idx).items()}
    kept = archive.run_archive(db, store, run_idx)
    folder = kept.folder if kept is not None else None
    records.remove_edge_sets(store, run, run_idx, names)
if folder is not None:
    copies.remove(folder, {keys[n] for n in names if n in keys})
print(json.dumps({"total": total, "dropped": dropped, "rebuild_below": records.REBUILD_BELOW,
                  "present": [n for n in names if n in keys]}))
"""


def edges_argv(db: Path, name: str) -> list[str]:
    """The command that (re)writes edge set `name` ("native" or "native:VERSION")."""
    command = Path(sys.executable).with_name("tracegraph")
    emulate = ["--emulate", name.split(":", 1)[1]] if ":" in name else []
    return [str(command), "edges", str(db), "--native", *emulate]


def timed_argv(db: Path, name: str) -> list[str]:
    return [sys.executable, "-c", TIMED_CHILD, *edges_argv(db, name)[1:]]


def measure(
    label: str,
    template: Path,
    names: list[str],
    scratch: Path,
    repeat: int,
    breakdown: list[tuple[str, Whole]] | None = None,
) -> list[list[object]]:
    """Replace vs fresh write of each set in `names` on copies of `template`: table rows. With
    `breakdown`, one more instrumented process of each (BREAKDOWN_CHILD) is added to it."""
    rows = []
    for name in names:
        # what the write replaces: the set, and beside plain native its cross-rank set
        drop = [name, CROSS_RANK] if name == "native" else [name]
        fresh_template = copy_db(template, scratch / f"fresh-{name.replace(':', '_')}.kuzu")
        note(f"{label} {name}: removing {drop} from a template copy (not timed)")
        removal = run_whole([sys.executable, "-c", REMOVE_CHILD, str(fresh_template), *drop])
        total, dropped = int(removal.report["total"]), int(removal.report["dropped"])
        kept = total - dropped
        rule = (
            "rebuild DEP" if kept < float(removal.report["rebuild_below"]) * dropped else "delete"
        )
        runs: dict[str, list[Whole]] = {"replace": [], "fresh": []}
        for round_ in range(repeat):
            order = ("replace", "fresh") if round_ % 2 == 0 else ("fresh", "replace")
            for case in order:
                source = template if case == "replace" else fresh_template
                db = copy_db(source, scratch / f"run-{case}.kuzu")
                note(f"{label} {name}: {case} {round_ + 1}/{repeat}")
                runs[case].append(run_whole(timed_argv(db, name)))
                remove_db(db)
        for case in ("replace", "fresh"):
            if breakdown is None:
                break
            db = copy_db(template if case == "replace" else fresh_template, scratch / "bd.kuzu")
            note(f"{label} {name}: {case}, instrumented")
            argv = [sys.executable, "-c", BREAKDOWN_CHILD, *edges_argv(db, name)[1:]]
            breakdown.append((f"{label} {name} {case}", run_whole(argv)))
            remove_db(db)
        remove_db(fresh_template)
        rep, fre = runs["replace"], runs["fresh"]
        rep_wall, fre_wall = median([r.wall_s for r in rep]), median([r.wall_s for r in fre])
        rep_write = median([float(r.report["write_s"]) for r in rep])
        fre_write = median([float(r.report["write_s"]) for r in fre])
        rows.append(
            [
                label,
                " + ".join(removal.report["present"]),
                dropped,
                kept,
                rule,
                rep_wall,
                fre_wall,
                f"{rep_wall / fre_wall:.2f}x",
                rep_write,
                fre_write,
                f"{rep_write / fre_write:.2f}x",
                median([float(r.report["remove_s"]) for r in rep]),
                median([float(r.report["remove_s"]) for r in fre]),
            ]
        )
    return rows


def control_template(scratch: Path, sets: list[str]) -> Path:
    """The control trace ingested, with `sets` written (not timed)."""
    scratch.mkdir(parents=True, exist_ok=True)
    db = scratch / "control.kuzu"
    note(f"ingesting {CONTROL} into {db} and writing {sets} (not timed)")
    ingest_child([CONTROL], db=db)
    for name in sets:
        run_whole(edges_argv(db, name))
    return db


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big", type=Path, default=Path("/tmp/tg-bench/rep64/run.kuzu"))
    parser.add_argument(
        "--control-sets",
        nargs="+",
        default=["native", "native:hta-0.5.0", "native:traceinsight-0.6.1"],
    )
    parser.add_argument("--big-sets", nargs="+", default=["native", "native:hta-0.5.0"])
    parser.add_argument("--skip-control", action="store_true")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument(
        "--breakdown", action="store_true", help="one instrumented process of each case more"
    )
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="edgebench_replace-", dir="/tmp"))
    rows: list[list[object]] = []
    steps: list[tuple[str, Whole]] | None = [] if args.breakdown else None
    try:
        if not args.skip_control:
            template = control_template(scratch / "control", args.control_sets)
            rows += measure("control", template, args.control_sets, scratch, args.repeat, steps)
        if not args.skip_big:
            template = copy_db(args.big, scratch / "big.kuzu")  # the original is only read
            label = args.big.parent.name
            rows += measure(label, template, args.big_sets, scratch, args.repeat, steps)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"\nreplace vs fresh write of one edge set: whole `tracegraph edges` processes, "
        f"medians of {args.repeat} (wall s); write s / remove s: in-process timers around "
        "write_edge_sets and the remove_edge_sets inside it"
    )
    print_table(
        [
            "db",
            "set",
            "rows dropped",
            "rows kept",
            "rule",
            "replace s",
            "fresh s",
            "ratio",
            "replace write s",
            "fresh write s",
            "write ratio",
            "remove s",
            "fresh remove s",
        ],
        rows,
    )
    if steps:
        print_breakdown(steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
