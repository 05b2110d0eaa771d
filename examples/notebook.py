"""A notebook's session with tracegraph, through the Python API only (`import tracegraph`).

It writes a small synthetic 4-rank DDP job (rank 2 starts late, python stacks and nested
annotations on), ingests it, builds tracegraph's own edge set and HTA 0.6.1's rules emulated,
compares them, asks which rank bounds each step, and runs a query into pandas when installed.
Each cell is a function of the one before; `tests/test_api.py` runs the whole of it.

    python -m tracegraph.examples.notebook [WORKDIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank


def main(workdir: Path) -> dict[str, object]:
    """Run every cell in `workdir` (the traces and the database go there); what each showed."""
    shown: dict[str, object] = {}

    # -- cell 1: a job's traces, one file per rank
    config = SyntheticConfig(ranks=4, steps=3, layers=4, late_rank=2, late_us=3_000,
                             python_stacks=True, annotate=True)  # fmt: skip
    traces = workdir / "traces"
    write_per_rank(config, traces)

    # -- cell 2: ingest them as one run
    g = tracegraph.open(workdir / "job.kuzu")
    result = g.ingest(traces, run="job42")
    shown["ranks"] = [r.rank for r in result.ranks]
    print(g.runs().to_pylist())

    # -- cell 3: dependency edges, tracegraph's own and HTA 0.6.1's rules, every step
    own = g.edges("native", run="job42", all_steps=True)
    hta061 = g.edges("native", run="job42", emulate_version="traceinsight-0.6.1", all_steps=True)
    shown["edge_sets"] = (own.name, hta061.name)
    print(g.edge_sets().select(["run", "name", "producer"]).to_pylist())

    # -- cell 4: what differs between the two, by rank and edge type
    diff = g.diff(own.name, hta061.name, run="job42")
    shown["differing_edges"] = diff.edges.num_rows
    print(diff.counts.to_pandas() if _has_pandas() else diff.counts.to_pylist())

    # -- cell 5: which rank bounds each step
    verdicts = g.stragglers("job42", edge_set=own.name)
    shown["stragglers"] = [(v.step, v.straggler["rank"] if v.straggler else None) for v in verdicts]
    for verdict in verdicts:
        print(verdict.step, "bound by rank", verdict.bound_by_rank, "straggler", verdict.straggler)

    # -- cell 6: any question in Cypher, as Arrow (or pandas)
    top = g.query(
        "MATCH (k:Kernel) WHERE k.run = $run "
        "RETURN k.name AS kernel, count(*) AS n, sum(k.dur) AS total_ns "
        "ORDER BY total_ns DESC LIMIT $n",
        run="job42",
        n=5,
    )
    shown["top_kernels"] = top
    print(top.to_pandas() if _has_pandas() else top.to_pylist())
    return shown


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder))
