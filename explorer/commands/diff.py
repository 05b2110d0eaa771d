"""`diff`: how two edge sets of a run differ: edges by rank and type, path lengths, the sync
edges Chakra keeps, and the differing edges."""

from __future__ import annotations

import argparse
import sys

from .. import options
from .common import indent, open_reading


def add_parser(sub: options.Subcommands) -> None:
    """`diff DB SET_A SET_B` with --type, --rank and --limit."""
    p = sub.add_parser("diff", help="compare two edge sets of a run")
    options.database(p)
    p.add_argument("set_a", metavar="SET_A")
    p.add_argument("set_b", metavar="SET_B")
    options.run(p, "several runs hold both edge sets")
    p.add_argument("--type", dest="edge_type", help="only this edge type, e.g. sync_dependency")
    p.add_argument("--rank", type=int, help="only this rank")
    p.add_argument("--limit", type=int, default=50, help="differing edges to list (table format)")
    options.output_format(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """The two edge sets' differences, as text, CSV (the differing edges) or JSON."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracegraph.queries.diff import (
        EDGE_VIEW,
        chakra_view,
        diff_edge_sets,
        edge_set_window,
        window_label,
        window_warning,
    )

    from .. import output

    with open_reading(args.db) as store:
        diff = diff_edge_sets(store, args.set_a, args.set_b, args.run, args.edge_type, args.rank)
        chakra = chakra_view(store, diff.run, [args.set_a, args.set_b])
        windows = [
            window_label(edge_set_window(store, name, diff.run)) for name in (diff.a, diff.b)
        ]
        warning = window_warning(store, diff.a, diff.b, diff.run)
    if warning:
        print(f"tracegraph: warning: {warning}", file=sys.stderr)
    if args.format == "json":
        head = {
            "run": diff.run,
            "a": diff.a,
            "b": diff.b,
            "windows": {"a": windows[0], "b": windows[1]},
            "counts": diff.counts.to_pylist(),
            "path_lengths": diff.path_lengths.to_pylist(),
            "sync_edges": chakra.to_pylist(),
        }
        # the differing edges stream out batch by batch: millions of rows never become one
        # Python list (a 2.5 M-edge diff printed whole took 19 GB)
        sys.stdout.write(output.json_text(head)[:-2] + ',\n "edges": ')
        output.write(sys.stdout, diff.edges, "json")
        sys.stdout.write("}\n")
        return 0
    if args.format == "csv":
        sys.stdout.write(output.render(diff.edges, "csv"))
        return 0
    print(f"run '{diff.run}': A = {diff.a} ({windows[0]}), B = {diff.b} ({windows[1]})")
    print("edges by rank and type:")
    print(indent(output.render(diff.counts)))
    print("critical path length (µs) and status per rank:")
    lengths = diff.path_lengths
    print(
        indent(
            output.render(
                pa.table(
                    {
                        "rank": lengths["rank"],
                        "a_us": pc.divide(pc.cast(lengths["a_ns"], pa.float64()), 1e3),
                        "b_us": pc.divide(pc.cast(lengths["b_ns"], pa.float64()), 1e3),
                        "b_minus_a_us": pc.divide(
                            pc.cast(pc.subtract(lengths["b_ns"], lengths["a_ns"]), pa.float64()),
                            1e3,
                        ),
                        "a_status": lengths["a_status"],
                        "b_status": lengths["b_status"],
                    }
                )
            )
        )
    )
    print("sync edges: whole graph vs on the critical path (what Chakra keeps):")
    print(indent(output.render(chakra)) if chakra.num_rows else "  none in either edge set")
    shown = diff.edges.select([*EDGE_VIEW, "src_ts", "dst_ts"])
    if diff.edges.num_rows == 0:
        print("no differing edges: the two edge sets are identical")
        return 0
    print(f"differing edges ({diff.edges.num_rows}, first {min(args.limit, shown.num_rows)}):")
    print(indent(output.render(shown.slice(0, args.limit), max_width=40)))
    return 0
