"""`whatif`: the critical-path lengths of an edge set with durations scaled or edges cut,
or of two edge sets side by side."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .. import options
from .common import open_reading

if TYPE_CHECKING:
    import pyarrow as pa


def add_parser(sub: options.Subcommands) -> None:
    """`whatif DB EDGE_SET` with --scale, --remove and --compare."""
    p = sub.add_parser("whatif", help="critical-path lengths with scaled durations or cut edges")
    options.database(p)
    p.add_argument("edge_set", metavar="EDGE_SET")
    options.run(p, "several runs hold the edge set")
    p.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="KIND=FACTOR",
        help="kernel, cpu or collective durations times FACTOR (repeatable)",
    )
    p.add_argument(
        "--remove",
        action="append",
        default=[],
        metavar="TYPE",
        help="drop edges of this type, e.g. sync_dependency (repeatable)",
    )
    p.add_argument(
        "--compare",
        metavar="EDGE_SET",
        help="another edge set, or critical-sync-only (only the sync edges on the "
        "profiled path, what Chakra keeps), under the same scaling",
    )
    options.output_format(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Each rank's and window's path length before and after (of both edge sets with
    --compare)."""
    from tracegraph.queries.diff import edge_set_runs, window_warning
    from tracegraph.queries.whatif import (
        CRITICAL_SYNC_ONLY,
        Scaling,
        check_edge_types,
        compare_what_if,
        what_if,
    )

    from .. import output

    scaling = Scaling.parse(args.scale)
    removed = check_edge_types(args.remove)
    with open_reading(args.db) as store:
        if args.compare:
            table = compare_what_if(
                store,
                args.edge_set,
                args.compare,
                run=args.run,
                scaling=scaling,
                remove_types=removed,
            )
            warning = None
            if args.compare != CRITICAL_SYNC_ONLY:
                runs = set(edge_set_runs(store, args.edge_set)) & set(
                    edge_set_runs(store, args.compare)
                )
                run = args.run or (next(iter(runs)) if len(runs) == 1 else None)
                if run is not None:
                    warning = window_warning(store, args.edge_set, args.compare, run)
            shown = _shown(table, compared=True)
            title = [
                f"A = {args.edge_set}, B = "
                + (
                    f"{args.edge_set} with only the sync edges on its critical path"
                    if args.compare == CRITICAL_SYNC_ONLY
                    else args.compare
                )
                + f"; durations: {scaling.describe()}"
                + (f"; removed from both: {', '.join(removed)} edges" if removed else ""),
            ]
            rows = table
        else:
            result = what_if(
                store, args.edge_set, run=args.run, scaling=scaling, remove_types=removed
            )
            warning = None
            rows = result.lengths
            shown = _shown(rows, compared=False)
            title = [
                f"edge set '{result.edge_set}' of run '{result.run}'; durations: "
                f"{scaling.describe()}"
                + (f"; removed: {', '.join(removed)} edges" if removed else "")
            ]
    if warning:
        print(f"tracegraph: warning: {warning}", file=sys.stderr)
    if args.format != "table":
        sys.stdout.write(output.render(shown, args.format))
        return 0
    title.append("critical-path length per rank and window, µs (ratio = after / before)")
    if rows.num_rows and -1 in rows["rank"].to_pylist():
        title.append("rank -1: all ranks as one graph, joined at the collectives")
    print("\n".join(title))
    sys.stdout.write(output.render(shown) if rows.num_rows else "no edges\n")
    return 0


def _shown(table: pa.Table, compared: bool) -> pa.Table:
    """What-if lengths as a person reads them: µs before and after, and their ratio (of both
    edge sets, A's and B's, when `compared`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def lengths(prefix: str, before: str, after: str, ratio: str) -> dict[str, pa.Array]:
        """From the `{prefix}baseline_ns` and `{prefix}scaled_ns` columns."""
        base = pc.cast(table[f"{prefix}baseline_ns"], pa.float64())
        scaled = pc.cast(table[f"{prefix}scaled_ns"], pa.float64())
        valid = pc.fill_null(pc.greater(base, 0), False)
        return {
            before: pc.divide(base, 1e3),
            after: pc.divide(scaled, 1e3),
            ratio: pc.if_else(valid, pc.divide(scaled, base), None),
        }

    where = {"rank": table["rank"], "window": table["window"]}
    if compared:
        a = lengths("a_", "a_before_us", "a_after_us", "a_ratio")
        return pa.table({**where, **a, **lengths("b_", "b_before_us", "b_after_us", "b_ratio")})
    path = lengths("", "path_before_us", "path_after_us", "ratio")
    return pa.table({**where, **path, "path_edges_changed": table["path_edges_changed"]})
