"""`tracegraph report` as text: findings first, then each analysis as a table in µs."""

from __future__ import annotations

import shlex
import statistics
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.schema import MAX_EV
from tracegraph.queries.report import HTA_MODE, Report
from tracegraph.queries.report.compare import RunComparison
from tracegraph.queries.report.findings import Finding
from tracegraph.queries.report.kernel_sequences import SEPARATOR as SEQUENCE_SEPARATOR
from tracegraph.queries.report.ranks import rank_ranges, ranks_phrase
from tracegraph.queries.report.summary_tier import standing_out, typical_rank

from . import output
from .names import shorten_all

MANY_RANKS = 16  # past this many ranks, the text's per-rank tables keep the ranks that matter

TITLES = {
    "spread": "per step across ranks: GPU compute and lateness at the collectives, and the ranks "
    "that stand out (above the median by 3.5 robust deviations, at least 3.5% of the step)",
    "nodes": "by node (the host each trace names): its ranks, those that stand out, its worst "
    "lateness and GPU compute against the step's median",
    "steps": "per step: its GPU work (launched in the step), busy, idle and exposed communication",
    "temporal": "temporal breakdown: GPU span from first start to last end, by what filled it",
    "overlap": "communication overlapped by compute",
    "kernel_types": "GPU time by kernel type (exclusive shares of the busy time)",
    "top_kernels": "top kernels by total time, per type",
    "idle": "idle time by stream (HTA's causes: host_wait = launched late, kernel_wait < 30 µs)",
    "launches": "kernel launches: launching call and launch delay",
    "queues": "launch queue by stream: kernels launched and not yet finished (time-weighted mean)",
    "memory": "memory copies and sets by kind: bytes and bandwidth where the trace records sizes",
    "gpu_annotations": "GPU time by user annotation (record_function ranges on the GPU's timeline)",
    "op_categories": "GPU time by operator category (each kernel credited to the innermost "
    "operator holding its launch; busy time)",
    "op_shapes": "GPU time by operator and recorded shapes (record_shapes): the heaviest per rank",
    "op_perf": "operators against their GPU's roofline (FLOPs and bytes from the recorded "
    "shapes; roofline_pct: the time at peak as a share of the kernels')",
    "module_tree": "by nn.Module (python frames, with_stack=True): calls, CPU time and the GPU "
    "work launched inside each module (inclusive; self: outside its child modules)",
    "counters": "CUPTI counters of each kernel (the range profiler's cuda_profiler_range "
    "events), with the operators that launched it",
    "kernel_sequences": "the most frequent kernel sequences: each call's kernels in start order "
    "(--sequence-op NAME: calls of NAME; else the CPU ops Python called), 2 kernels or more",
    "allocator": "the caching allocator per device and step ([memory] events): allocated and "
    "freed, at the start, the end and the peak (when, inside what), reserved, and allocations "
    "freed within the step",
    "collectives": "collectives: arrival skew, the last rank, the wait it caused, latency, size",
    "collective_ranks": "collectives by rank: how often last, wait caused and suffered, clock",
    "stragglers": "per step: the rank whose late arrivals caused the most wait",
    "unmatched": "collectives some ranks never entered: the ranks in each, those missing, the "
    "step of each rank's part, the wait of those who entered",
}


# tables the text shows only when they have rows
QUIET_WHEN_EMPTY = (
    "unmatched", "gpu_annotations", "allocator", "op_shapes", "op_perf", "module_tree",
    "kernel_sequences", "counters",
)  # fmt: skip
# columns the text leaves to --format json/csv (lists, and what makes a row too wide to read)
TEXT_HIDES = ("names", "waits_ns", "input_strides", "concrete_inputs", "gpu_min_ns", "gpu_max_ns",
              "input_types", "peak_tbps", "mbytes")  # fmt: skip

EMPTY = {
    "spread": "no ProfilerStep annotations (HTA-compatible: not computed)",
    "steps": "no ProfilerStep annotations",
    "collectives": "no collective matched across ranks",
    "collective_ranks": "no collective matched across ranks",
    "stragglers": "no collective matched across ranks",
    "queues": "no kernel with a known launch",
    "memory": "no memory copies",
}


def findings_table(report: Report) -> pa.Table:
    """The findings as rows (what --format csv --table findings prints)."""
    rows = [
        {
            "kind": f.kind,
            "rank": f.rank,
            "ranks": " ".join(str(r) for r in f.all_ranks),
            "step": f.step,
            "saving_us_per_step": None
            if f.saving_ns_per_step is None
            else f.saving_ns_per_step / 1e3,
            "cost_us_per_step": f.cost_ns_per_step / 1e3,
            "events": f.events,
            "title": f.title,
            "detail": f.detail,
            "evidence_ids": " ".join(str(i) for i in f.evidence_ids),
            "evidence_cypher": f.evidence_cypher,
            "fix": f.fix,
        }  # fmt: skip
        for f in report.findings
    ]
    names = ["kind", "rank", "ranks", "step", "saving_us_per_step", "cost_us_per_step", "events",
             "title", "detail", "evidence_ids", "evidence_cypher", "fix"]  # fmt: skip
    return pa.Table.from_pylist(rows) if rows else pa.table({n: pa.array([]) for n in names})


def write_report(
    out: TextIO,
    report: Report,
    db: Path,
    fmt: str,
    table: str | None = None,
    width: int = 70,
    every_table: bool = False,
) -> None:
    """The report in `fmt`: "table" (the steps and who bound them, the findings, the ranks at a
    glance, and what else there is; `table`: that one table; `every_table`: all of them),
    "json" (the contract), or "csv" (the one `table` named, "findings" or one of the report's
    tables, times in ns)."""
    if fmt == "json":
        out.write(output.json_text(report.to_json()) + "\n")
        return
    if fmt == "csv":
        chosen = findings_table(report) if table in (None, "findings") else report.tables[table]
        out.write(output.render(chosen, "csv"))
        return
    if table is not None and table != "findings":
        _write_tables(out, report, {table: report.tables[table]}, width, every_rank=True)
        return
    _write_header(out, report)
    if report.mode != HTA_MODE:
        _write_steps(out, report)
        _write_findings(out, report, db)
    if table == "findings":
        return
    if every_table:
        _write_tables(out, report, report.tables, width, every_rank=False)
        return
    _write_glance(out, report, width)
    _write_more(out, report)


def _write_header(out: TextIO, report: Report) -> None:
    ranks = rank_ranges(report.ranks)
    mode = (
        "HTA 0.5.0-compatible: whole µs, the last ProfilerStep left out, as HTA computes them"
        if report.mode == HTA_MODE
        else "exact: ns as recorded, "
        + ("the whole trace" if report.step is None else f"the GPU work of step {report.step}")
    )
    out.write(f"run '{report.run}', rank(s) {ranks} — {mode}\n")
    if report.summarised:
        out.write(
            f"summary tier: {ranks_phrase(report.summarised)} kept as summaries (ingest "
            "--summary), not events: no critical path or savings, no operator or module "
            "tables (ingest --full-ranks loads them), stragglers from the collective "
            "arrivals, evidence as event numbers in the trace file\n"
        )
    gpu = report.tables["temporal"]
    if gpu.num_rows and not any(pc.greater(gpu["kernel_time_ns"], 0).to_pylist()):
        out.write("no GPU activity in this run: the GPU tables are empty (a CPU-only job)\n")


def _write_steps(out: TextIO, report: Report) -> None:
    """Per step: its time (the median across ranks), what bound it, who arrived late."""
    steps = report.to_json()["steps"]
    if not steps:
        return
    rows = []
    for s in steps:
        durations = sorted(s["durations_us"].values())
        bound, late = s.get("bound_by"), s.get("straggler")
        rows.append(
            {
                "step": s["step"],
                "ms": round(statistics.median(durations) / 1e3, 3) if durations else None,
                "bound by": "" if not bound else f"rank {bound['rank']}: {bound['op']}",
                "late": "" if not late else f"rank {late['rank']} +{late['late_us']:,.0f} µs",
            }
        )
    out.write(
        "\nsteps (ms: the median across ranks; bound by: the rank and work on the step's "
        "critical path; late: the rank the others waited for at a collective):\n"
    )
    text = output.render(pa.Table.from_pylist(rows), max_width=90)
    out.write("".join(f"  {line}\n" for line in text.splitlines()))


def _write_glance(out: TextIO, report: Report, width: int) -> None:
    """One row per rank: its step time, and what filled its GPU's span."""
    temporal = {r["rank"]: r for r in report.tables["temporal"].to_pylist()}
    per_step: dict[int, list[int]] = {}
    for row in report.tables["steps"].to_pylist():
        per_step.setdefault(row["rank"], []).append(row["step_ns"])
    late: dict[int, int] = {}
    for (_, rank), ns in report.lateness.items():
        late[rank] = max(late.get(rank, 0), ns)
    kept = ranks_that_matter(report) if len(report.ranks) > MANY_RANKS else list(report.ranks)
    rows = []
    for rank in kept:
        t, steps = temporal.get(rank, {}), sorted(per_step.get(rank, []))
        row: dict[str, object] = {"rank": rank}
        if steps:
            row["step_ms"] = round(statistics.median(steps) / 1e6, 3)
        if t.get("kernel_time_ns"):
            row |= {"gpu_compute_%": t.get("compute_pct"), "gpu_idle_%": t.get("idle_pct"),
                    "gpu_other_%": t.get("non_compute_pct")}  # fmt: skip
        if late:
            row["late_max_µs"] = round(late.get(rank, 0) / 1e3, 1)
        rows.append(row)
    if not any(len(row) > 1 for row in rows):
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))  # every row's, in order
    rows = [{key: row.get(key) for key in columns} for row in rows]
    which = (
        f"ranks {rank_ranges(kept)} of {len(report.ranks)}: those that stand out, the findings' "
        "and a typical one"
        if len(kept) < len(report.ranks)
        else "every rank"
    )
    gpu = (
        "; gpu_*: its span from first start to last end, by what filled it"
        if any("gpu_idle_%" in row for row in rows)
        else ""
    )
    out.write(f"\nranks at a glance ({which}; step_ms: the rank's median step{gpu}):\n")
    text = output.render(pa.Table.from_pylist(rows), max_width=width)
    out.write("".join(f"  {line}\n" for line in text.splitlines()))


def _write_more(out: TextIO, report: Report) -> None:
    """The tables the short text leaves out, those with rows, and how to see them."""
    have = [f"{n} ({t.num_rows:,})" for n, t in report.tables.items() if t.num_rows]
    out.write(
        "\nevery table (rows): " + ", ".join(have) + "\n"
        "  one in full: --table NAME; all of them: --all; as data: --format json, or --format "
        "csv --table NAME; one page with charts: --html FILE\n"
    )


def _write_tables(
    out: TextIO,
    report: Report,
    tables: Mapping[str, pa.Table],
    width: int,
    every_rank: bool,
) -> None:
    kept = ranks_that_matter(report) if len(report.ranks) > MANY_RANKS and not every_rank else None
    for name, rows in tables.items():
        if name == "nodes":
            if rows.num_rows:  # said only where the traces name two hosts or more
                _write_nodes(out, rows, width)
            continue
        if name in QUIET_WHEN_EMPTY and rows.num_rows == 0 and len(tables) > 1:
            continue  # said only where some are
        out.write(f"\n{TITLES[name]}:\n")
        if rows.num_rows == 0:
            out.write(f"  none ({EMPTY.get(name, 'no GPU activity')})\n")
            continue
        if kept is not None and "rank" in rows.column_names:
            rows = rows.filter(pc.is_in(rows["rank"], pa.array(kept, pa.int64())))
            out.write(
                f"  (ranks {rank_ranges(kept)} of {len(report.ranks)}: those that stand out, the "
                f"findings' and stragglers' and a typical one; every rank: --table {name})\n"
            )
        if name == "idle" and len(tables) > 1:  # streams x causes: the zero rows say nothing
            rows = rows.filter(pc.greater(rows["idle_ns"], 0))
        if name == "module_tree":
            rows = _module_outline(rows, out)
        if name == "kernel_sequences":
            rows = _sequences_shortened(rows)
        hidden = [c for c in rows.column_names if c in TEXT_HIDES]
        shown = in_us(rows.drop_columns(hidden))
        text = output.render(shown, max_width=width)
        out.write("".join(f"  {line}\n" for line in text.splitlines()))


MANY_NODES = 8  # past this many, the text keeps the nodes with a rank that stands out


def _write_nodes(out: TextIO, rows: pa.Table, width: int | None) -> None:
    out.write(f"\n{TITLES['nodes']}:\n")
    if rows.num_rows > MANY_NODES:
        kept = rows.filter(pc.not_equal(rows["stand_out"], ""))
        out.write(
            f"  ({kept.num_rows} of {rows.num_rows} nodes: those with a rank that stands out; "
            "every node: --format csv --table nodes)\n"
        )
        rows = kept
    text = output.render(in_us(rows), max_width=width)
    out.write("".join(f"  {line}\n" for line in text.splitlines()))


def ranks_that_matter(report: Report) -> list[int]:
    """The ranks the text's per-rank tables keep for a job of many ranks: those that stand out
    in a step (`spread`), each finding's and each step's straggler, and a typical rank (the
    median GPU compute of the first step) to read them against."""
    named = standing_out(report.tables) | {f.rank for f in report.findings}
    typical = typical_rank(report.tables)
    named.add(report.ranks[0] if typical is None else typical)
    return sorted(named & set(report.ranks))


def _write_findings(out: TextIO, report: Report, db: Path) -> None:
    if not report.findings:
        out.write("\nfindings: none (every rule below its threshold; see docs/report.md)\n")
        return
    out.write("\nfindings, what fixing each saves first:\n")
    summarised = set(report.summarised)
    for i, f in enumerate(report.findings, 1):
        if f.rank in summarised:  # its events are not in the database: where the trace has them
            where = f"rank {f.rank}'s trace events (ev_idx) " + ", ".join(
                str(int(e) & MAX_EV) for e in f.evidence_ids
            )
        else:
            where = f"tracegraph query {shlex.quote(str(db))} {shlex.quote(f.evidence_cypher)}"
        out.write(
            f"  {i}. {finding_where(f)}: {f.title} [{f.kind}] — {finding_figures(f)}\n"
            f"     {f.detail}\n"
            f"     fix: {f.fix}\n"
            f"     evidence: {where}\n"
        )


def finding_where(f: Finding) -> str:
    return ranks_phrase(f.all_ranks) + ("" if f.step is None else f" step {f.step}")


def finding_figures(f: Finding) -> str:
    """`saves 51,015 µs per step (cost 60,688 µs)`, or the cost where no saving is modelled."""
    cost = f"{f.cost_ns_per_step / 1e3:,.0f} µs"
    if f.saving_ns_per_step is None:
        return f"costs {cost} per step (saving not modelled)"
    return f"saves {f.saving_ns_per_step / 1e3:,.0f} µs per step (cost {cost})"


MODULE_DEPTH = 2  # the text's outline of the module tree goes this deep


def _module_outline(rows: pa.Table, out: TextIO) -> pa.Table:
    """The module tree to MODULE_DEPTH, each module indented under its parent."""
    if pc.max(rows["depth"]).as_py() > MODULE_DEPTH:
        out.write(f"  (to depth {MODULE_DEPTH}; every module: --format json or csv)\n")
    return module_outline(rows.filter(pc.less_equal(rows["depth"], MODULE_DEPTH)))


def module_outline(rows: pa.Table) -> pa.Table:
    """`module_tree` rows with each module's own name indented under its parent's (no depth)."""
    names = [
        "  " * depth + path.rsplit(" > ", 1)[-1]
        for path, depth in zip(rows["module"].to_pylist(), rows["depth"].to_pylist(), strict=True)
    ]
    column = pa.array(names, pa.string())
    return rows.set_column(rows.column_names.index("module"), "module", column).drop_columns(
        ["depth"]
    )


def in_us(table: pa.Table) -> pa.Table:
    """`*_ns` columns as `*_us` floats, `*_bytes` as `*_MiB` (-1: not recorded, as null)."""
    columns, names = [], []
    for name in table.column_names:
        column = table[name]
        if name.endswith("_ns"):
            # (unsafe: an epoch-ns value loses its last digits as a float, not the report)
            column = pc.divide(pc.cast(column, pa.float64(), safe=False), 1e3)
            name = name[: -len("_ns")] + "_us"
        elif name.endswith("_bytes"):
            known = pc.if_else(pc.less(column, 0), pa.scalar(None, column.type), column)
            column = pc.round(pc.divide(pc.cast(known, pa.float64()), 2**20), 1)
            name = name[: -len("_bytes")] + "_MiB"
        columns.append(column)
        names.append(name)
    return pa.table(columns, names=names)


def write_comparison(
    out: TextIO, comparison: RunComparison, fmt: str, table: str | None, width: int = 70
) -> None:
    """`report --compare`: steps, kernels and ops of run A and run B side by side."""
    if fmt == "json":
        out.write(output.json_text(comparison.to_json()) + "\n")
        return
    tables = comparison.tables()
    if fmt == "csv":
        if table not in tables:
            raise TracegraphError(
                "--compare --format csv: --table steps, kernels, ops or structure"
            )
        out.write(output.render(tables[table], "csv"))
        return
    if table is not None and table not in tables:
        raise TracegraphError("--compare: --table steps, kernels, ops or structure")
    a, b = comparison.a, comparison.b
    out.write(f"A = run '{a}', B = run '{b}' (deltas are B − A)\n")
    if table is not None:  # that one, every row
        tables = {table: tables[table]}
    titles = {
        "steps": "step times in order (median across ranks, ms)",
        "kernels": "kernels by name: launches and µs per rank and step, largest changes first",
        "ops": "CPU ops by name: calls and µs per rank and step, largest changes first",
    }
    for name, shown in tables.items():
        if name == "structure":
            shown = _structure_view(shown, None if table else STRUCTURE_ROWS)
            out.write(f"\n{structure_phrase(comparison.structure_summary)}\n")
        else:
            out.write(f"\n{titles[name]}:\n")
        text = output.render(shown, max_width=width) if shown.num_rows else "none\n"
        out.write("".join(f"  {line}\n" for line in text.splitlines()))


def _sequences_shortened(rows: pa.Table) -> pa.Table:
    """`kernel_sequences` with each kernel name of a sequence shortened (`names.shorten_all`)."""
    sequences = [s.split(SEQUENCE_SEPARATOR) for s in rows["sequence"].to_pylist()]
    every = [k for kernels in sequences for k in kernels]
    short = dict(zip(every, shorten_all(every, SEQUENCE_NAME_WIDTH), strict=True))
    text = [" | ".join(short[k] for k in kernels) for kernels in sequences]
    return rows.set_column(rows.column_names.index("sequence"), "sequence", pa.array(text))


SEQUENCE_NAME_WIDTH = 32  # a kernel's name in the text's sequences
STRUCTURE_ROWS = 20  # the text's rows; JSON and CSV have them all


def structure_phrase(summary: Mapping[str, Any]) -> str:
    """What the structural match compared and how much of it has a counterpart."""
    if "not_compared" in summary:
        return f"call trees not matched: {summary['not_compared']}"
    steps = summary["steps"]
    which = f"{steps} step(s) in order" if steps else "the whole traces (a run without steps)"
    if steps and summary["steps_a"] != summary["steps_b"]:
        which += f" (A has {summary['steps_a']}, B {summary['steps_b']})"
    a_nodes, b_nodes, matched = summary["a_nodes"], summary["b_nodes"], summary["matched"]
    gpu = ""
    if summary["a_gpu_us"] or summary["b_gpu_us"]:
        gpu = (
            f"; kernel time under matched top-level calls: A {summary['a_gpu_matched_us']:,.1f} "
            f"of {summary['a_gpu_us']:,.1f} µs, B {summary['b_gpu_matched_us']:,.1f} of "
            f"{summary['b_gpu_us']:,.1f} µs"
        )
    return (
        f"call trees matched op by op (rank {summary['rank_a']} of A, rank {summary['rank_b']} "
        f"of B; {which}): {matched:,} of A's {a_nodes:,} calls and of B's {b_nodes:,} have a "
        f"counterpart, {summary['only_a']:,} only in A, {summary['only_b']:,} only in B{gpu}; "
        "largest change in a call's own time first (µs, summed over the steps):"
    )


def _structure_view(table: pa.Table, rows: int | None) -> pa.Table:
    """The text's columns of the `structure` table, its first `rows` rows (every one: None)."""
    shown = table if rows is None else table.slice(0, rows)
    return pa.table(
        {
            "path": _tails(shown["path"].to_pylist()),
            "status": shown["status"],
            "calls": [
                f"{a}/{b}"
                for a, b in zip(
                    shown["a_calls"].to_pylist(), shown["b_calls"].to_pylist(), strict=True
                )
            ],
            "a_cpu": _rounded(shown["a_cpu_us"]),
            "b_cpu": _rounded(shown["b_cpu_us"]),
            "a_gpu": _rounded(shown["a_gpu_us"]),
            "b_gpu": _rounded(shown["b_gpu_us"]),
            "Δself_cpu": _rounded(shown["delta_self_cpu_us"]),
            "Δself_gpu": _rounded(shown["delta_self_gpu_us"]),
        }  # fmt: skip
    )


def _tails(paths: list[str], keep: int = 3) -> list[str]:
    """Each path's last `keep` names (… before them), more where two differ only before."""
    shown = [_tail(p, keep) for p in paths]
    while (
        len(set(shown)) < len(set(paths))
        and keep < max((p.count(" > ") for p in paths), default=0) + 1
    ):
        keep += 1
        counts = Counter(shown)
        shown = [_tail(p, keep) if counts[s] > 1 else s for p, s in zip(paths, shown, strict=True)]
    return shown


def _tail(path: str, keep: int) -> str:
    names = path.split(" > ")
    return " > ".join(names if len(names) <= keep else ["…", *names[-keep:]])


def _rounded(column: pa.ChunkedArray) -> list[float]:
    return [round(v, 1) for v in column.to_pylist()]
