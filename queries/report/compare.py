"""Run-to-run comparison (`report --compare OTHER`): step times, and ops and kernels by name,
side by side with their deltas, per rank and step so that runs of different lengths compare;
and one rank's call trees matched by structure (`structure`).

Steps are matched by their order in each run (the first profiled step with the first), since
ProfilerStep numbers depend on when profiling started. Op and kernel times are totals over the
run divided by its ranks and steps (ranks without ProfilerStep annotations count as one step).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tracegraph.ingest.edgesets.records import run_source
from tracegraph.ingest.errors import UnknownRunError
from tracegraph.ingest.runs import resolve_run
from tracegraph.ingest.store import GraphStore

from .report import ReportError, archived_rank_sources
from .steps import step_windows
from .structure import STRUCTURE_SCHEMA, StructureDiff, call_tree, structure_diff

DEFAULT_ROWS = 30


@dataclass(frozen=True)
class RunComparison:
    """Run A against run B: steps, kernels and ops, each with the deltas B − A."""

    a: str
    b: str
    steps: pa.Table  # step (order), a_ms, b_ms, delta_ms (medians across ranks)
    kernels: pa.Table  # name, a_count, b_count, a_us, b_us, delta_us (per rank and step)
    ops: pa.Table  # the same for CPU ops (cpu_op events)
    structure: pa.Table  # rank_a's and rank_b's call trees matched (`structure.structure_diff`)
    structure_summary: dict[str, object]  # the ranks and steps compared, nodes matched

    def tables(self) -> dict[str, pa.Table]:
        return {"steps": self.steps, "kernels": self.kernels, "ops": self.ops,
                "structure": self.structure}  # fmt: skip

    def to_json(self) -> dict[str, object]:
        tables = {k: t.to_pylist() for k, t in self.tables().items()}
        return {"a": self.a, "b": self.b, **tables, "structure_summary": self.structure_summary}


def compare_runs(
    store: GraphStore,
    a: str | None,
    b: str,
    rows: int = DEFAULT_ROWS,
    rank: int | None = None,
) -> RunComparison:
    """Run `a` (the database's only other run when None) against run `b`; their call trees
    matched on `rank` (each run's first rank when None)."""
    b, _ = resolve_run(store, b)
    if a is None:
        names = store.run("MATCH (r:Run) RETURN r.name AS name").table["name"].to_pylist()
        others = sorted(n for n in names if n != b)
        if len(others) != 1:
            raise UnknownRunError(
                f"{store.path}: compare which run with '{b}'? choose one with --run "
                f"(runs: {others})"
            )
        a = others[0]
    a, _ = resolve_run(store, a)
    steps_a, steps_b = _step_times(store, a), _step_times(store, b)
    count = max(len(steps_a), len(steps_b))
    step_rows = []
    for i in range(count):
        x = steps_a[i] if i < len(steps_a) else None
        y = steps_b[i] if i < len(steps_b) else None
        step_rows.append(
            {
                "step": i,
                "a_ms": x,
                "b_ms": y,
                "delta_ms": None if x is None or y is None else round(y - x, 3),
            }  # fmt: skip
        )
    structure = _structure(store, a, b, rank)
    return RunComparison(
        a,
        b,
        pa.Table.from_pylist(step_rows, schema=_STEPS),
        _by_name(store, "Kernel", "", a, b, rows),
        _by_name(store, "Op", "AND n.cat = 'cpu_op'", a, b, rows),
        structure.rows,
        structure.summary,
    )


def _structure(store: GraphStore, a: str, b: str, rank: int | None) -> StructureDiff:
    """Rank `rank` (else each run's first loaded rank) of run a and run b, matched."""
    trees, windows, ranks = [], [], []
    for run in (a, b):
        source = run_source(store, run)
        loaded = sorted(source.files)
        if not loaded:  # the rest of the comparison stands without it
            why = (
                f"run '{run}' holds summaries only: its call trees are not loaded (ingest "
                "--full-ranks loads some ranks' events)"
            )
            return StructureDiff(STRUCTURE_SCHEMA.empty_table(), {"not_compared": why})
        chosen = loaded[0] if rank is None else rank
        if chosen not in loaded:
            raise ReportError(
                f"{store.path}: run '{run}' has no loaded rank {chosen} (ranks: {loaded})"
            )
        (frame,) = archived_rank_sources(store.path, store, source, [chosen])
        trees.append(call_tree(frame.rows))
        windows.append(step_windows(store, run).get(chosen, []))
        ranks.append(chosen)
    diff = structure_diff(trees[0], trees[1], windows[0], windows[1])
    diff.summary.update({"rank_a": ranks[0], "rank_b": ranks[1]})
    return diff


def _step_times(store: GraphStore, run: str) -> list[float]:
    """Each step's median duration across ranks (ms), in step order."""
    table = store.run(
        "MATCH (s:Step) WHERE s.run = $run AND s.step >= 0 RETURN s.rank AS rank, s.dur AS dur "
        "ORDER BY rank, s.ts",
        {"run": run},
    ).table.to_pylist()
    by_rank: dict[int, list[int]] = {}
    for row in table:
        by_rank.setdefault(row["rank"], []).append(row["dur"])
    out = []
    for i in range(max((len(v) for v in by_rank.values()), default=0)):
        values = sorted(v[i] for v in by_rank.values() if i < len(v))
        out.append(round(values[len(values) // 2] / 1e6, 3))
    return out


def _per_rank_step(store: GraphStore, run: str) -> int:
    """ranks × steps of the run (a rank without steps counts one)."""
    table = store.run(
        "MATCH (k:Rank) WHERE k.run = $run OPTIONAL MATCH (s:Step) WHERE s.run = $run "
        "AND s.rank = k.rank AND s.step >= 0 RETURN k.rank AS rank, count(s) AS n",
        {"run": run},
    ).table.to_pylist()
    return max(sum(max(int(r["n"]), 1) for r in table), 1)


def _by_name(store: GraphStore, label: str, where: str, a: str, b: str, rows: int) -> pa.Table:
    totals = {}
    for run in (a, b):
        per = _per_rank_step(store, run)
        table = store.run(
            f"MATCH (n:{label}) WHERE n.run = $run {where} "
            "RETURN n.name AS name, count(*) AS n, sum(n.dur) AS total",
            {"run": run},
        ).table.to_pylist()
        totals[run] = {
            r["name"]: (int(r["n"]) / per, float(r["total"] or 0) / per / 1e3) for r in table
        }
    names = set(totals[a]) | set(totals[b])
    out = []
    for name in names:
        ca, ua = totals[a].get(name, (0.0, 0.0))
        cb, ub = totals[b].get(name, (0.0, 0.0))
        out.append({"name": name, "a_count": round(ca, 2), "b_count": round(cb, 2),
                    "a_us": round(ua, 3), "b_us": round(ub, 3),
                    "delta_us": round(ub - ua, 3)})  # fmt: skip
    out.sort(key=lambda r: (-abs(r["delta_us"]), r["name"]))
    return pa.Table.from_pylist(out[:rows], schema=_BY_NAME)


_STEPS = pa.schema(
    [("step", pa.int64()), ("a_ms", pa.float64()), ("b_ms", pa.float64()),
     ("delta_ms", pa.float64())]
)  # fmt: skip
_BY_NAME = pa.schema(
    [("name", pa.string()), ("a_count", pa.float64()), ("b_count", pa.float64()),
     ("a_us", pa.float64()), ("b_us", pa.float64()), ("delta_us", pa.float64())]
)  # fmt: skip
