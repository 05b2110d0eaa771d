"""`tracegraph report --html FILE`: the report as one self-contained HTML page (no scripts, no
network): charts first, drawn with matplotlib and inlined as SVG (ranks × steps for a large
job, each rank's steps by what filled them, what bound each step, each rank's GPU time by what
filled it, the roofline, the allocator), then the findings, then every table, times in µs.
Matplotlib is imported only here, and only when a page is made."""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tracegraph.ingest.python_frames import readable
from tracegraph.queries.report import HTA_MODE, Report
from tracegraph.queries.report.analyses import SHARE_NAMES
from tracegraph.queries.report.ranks import rank_ranges, ranks_phrase
from tracegraph.queries.report.summary_tier import standing_out

from .names import shorten_all
from .report_view import TITLES, finding_figures, finding_where, in_us, ranks_that_matter

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222 }
h1 { font-size: 1.5em } h2 { font-size: 1.15em; margin-top: 2em }
table { border-collapse: collapse; font-size: 12px } td, th { padding: 2px 8px }
th { text-align: left; border-bottom: 1px solid #999 } td.n { text-align: right }
tr:nth-child(even) { background: #f4f4f4 }
.finding { border-left: 4px solid #c0392b; padding: 4px 12px; margin: 10px 0; background: #fdf3f2 }
.finding code { font-size: 11px; word-break: break-all; color: #555 }
svg { max-width: 100%; height: auto } .note { color: #555; font-size: 12px }
.wide { overflow-x: auto } details summary { cursor: pointer; color: #555; font-size: 12px }
"""
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}  # no clock, no URL
SLOWEST_COLOUR = "#c0392b"
SEGMENTS = {  # a temporal bar's parts, in drawing order: label, colour
    "compute": ("compute", "#2e86c1"),
    "communication": ("communication", "#f39c12"),
    "memory": ("memory copy/set", "#8e44ad"),
    "other_non_compute": ("other non-compute", "#f8c471"),
    "non_compute": ("non-compute", "#f39c12"),
    "idle_host_wait": ("idle: host wait", "#7f8c8d"),
    "idle_kernel_wait": ("idle: kernel wait", "#aab7b8"),
    "idle_other": ("idle: other", "#d5d8dc"),
    "idle": ("idle", "#d5d8dc"),
}
SHOWN_ROWS = 20  # a table's rows in view; the rest under "the other N rows"
HTA_READS_THE_WHOLE_TRACE = "an --hta-compatible report reads the whole trace, as HTA does"
CRITICAL_PATH_HINT = "the run has no step with a critical path (no ProfilerStep, or no graph)"

Draw = Callable[["Axes"], dict[str, str]]  # draws on the axes, returns hover titles by gid


def report_html(report: Report, db: str) -> str:
    """The page for `report` of the database at `db`."""
    mode = "HTA 0.5.0-compatible" if report.mode == HTA_MODE else "exact (ns as recorded)"
    step = "" if report.step is None else f", step {report.step}"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>tracegraph report: {html.escape(report.run)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Run {html.escape(report.run)}</h1>",
        f"<p>{html.escape(db)} · rank(s) {rank_ranges(report.ranks)}{step} · {mode}</p>",
        _summary_note(report),
        *_heat_section(report),
        "<h2>Each rank's steps: compute, waiting at collectives, communication, idle</h2>",
        _stack_section(report),
        *_arrival_section(report),
        "<h2>What bound each step (the critical path across ranks)</h2>",
        _critical_section(report),
        "<h2>GPU time by what filled it, per rank</h2>",
        _temporal_section(report.tables["temporal"], report.tables["kernel_types"]),
        *_roofline_section(report.tables["op_perf"]),
        *_allocator_section(report.tables["allocator"]),
        "<h2>Findings, most costly first</h2>",
        _findings(report),
    ]
    for name, table in report.tables.items():
        if table.num_rows:
            parts += [f"<h2>{html.escape(TITLES.get(name, name))}</h2>", _table(table)]
    parts.append("</body></html>")
    return "\n".join(parts)


def _summary_note(report: Report) -> str:
    if not report.summarised:
        return ""
    return (
        f"<p class='note'>Summary tier: {ranks_phrase(report.summarised)} kept as summaries "
        "(ingest --summary), not events: no critical path or savings for them; stragglers and "
        "lateness from the collective arrivals.</p>"
    )


HEAT_FROM_RANKS = 8  # from this many ranks, the ranks x steps maps come before the other charts


def _heat_section(report: Report) -> list[str]:
    """Ranks x steps: each rank's GPU compute against the step's median, and its lateness at
    the step's collectives: at hundreds of ranks the one that differs is a line across."""
    heat = heat_values(report)
    if heat is None:
        return []
    ranks, numbers, compute, late = heat
    panels = [("GPU compute, % of the step's median", compute, "%"),
              ("lateness at the step's collectives (ms)", late, "ms")]  # fmt: skip
    size = (9.0, min(12.0, 2.5 + 0.012 * len(ranks)))
    named = heat_ticks(ranks, standing_out(report.tables), size[1])
    return [
        "<h2>Ranks × steps</h2>",
        _svg(size, lambda ax: _draw_heat(ax, panels, ranks, numbers, named))
        + "<p class='note'>One row per rank, one column per step: a slow GPU is a bright line "
        "on the left, a late host on the right (a slow GPU arrives late too). The ranks that "
        "stand out are named on the axis.</p>",
    ]


def heat_ticks(
    ranks: Sequence[int], named: set[int], height_in: float, most: int = 9
) -> list[tuple[int, str]]:
    """The rows the maps label, as (row, label): every rank that stands out (a line across the
    map must say whose it is; neighbours too close to label apart share one label, "2, 5"),
    then evenly spaced ranks that keep clear of them, on a map `height_in` inches tall."""
    row_pt = 0.7 * height_in * 72 / len(ranks)  # the axes take ~70% of the figure's height
    clear = math.ceil(14 / row_pt)  # rows a 10-point label needs to itself
    groups: list[list[int]] = []
    for i in (i for i, r in enumerate(ranks) if r in named):
        if groups and i - groups[-1][0] < clear:
            groups[-1].append(i)
        else:
            groups.append([i])
    ticks = [(g[0], _ranks_label([ranks[i] for i in g])) for g in groups]
    for i in np.linspace(0, len(ranks) - 1, min(len(ranks), most)).round().astype(int):
        if all(abs(int(i) - row) >= clear for row, _ in ticks):
            ticks.append((int(i), str(ranks[i])))
    return sorted(ticks)


def _ranks_label(named: list[int], most: int = 3) -> str:
    """A few ranks as one short label: "2, 5", "100–115" (a run), "3, 7, 9 +4"."""
    if len(named) > 2 and named == list(range(named[0], named[-1] + 1)):
        return f"{named[0]}–{named[-1]}"
    shown = ", ".join(str(r) for r in named[:most])
    return shown if len(named) <= most else f"{shown} +{len(named) - most}"


def heat_values(
    report: Report,
) -> tuple[list[int], list[int], np.ndarray, np.ndarray] | None:
    """The ranks × steps maps' values: ranks, steps, each rank's GPU compute as % of the
    step's median, its lateness in ms (NaN where unknown); None below HEAT_FROM_RANKS ranks or
    without steps."""
    steps = report.tables["steps"]
    if len(report.ranks) < HEAT_FROM_RANKS or not steps.num_rows:
        return None
    numbers = sorted(set(steps["step"].to_pylist()))
    ranks = list(report.ranks)
    compute = np.full((len(ranks), len(numbers)), np.nan)
    late = np.full((len(ranks), len(numbers)), np.nan)
    row, col = {r: i for i, r in enumerate(ranks)}, {s: j for j, s in enumerate(numbers)}
    for r in steps.select(["rank", "step", "compute_ns"]).to_pylist():
        compute[row[r["rank"]], col[r["step"]]] = r["compute_ns"]
    median = np.nanmedian(compute, axis=0)
    compute = np.where(median > 0, compute / np.where(median > 0, median, 1) * 100, np.nan)
    for (number, rank), ns in report.lateness.items():
        if rank in row and number in col:
            late[row[rank], col[number]] = ns / 1e6
    return ranks, numbers, compute, late


def _draw_heat(
    ax: Axes,
    panels: list[tuple[str, np.ndarray, str]],
    ranks: list[int],
    numbers: list[int],
    ticks: list[tuple[int, str]],
) -> dict[str, str]:
    figure = ax.figure
    ax.remove()
    axes = figure.subplots(1, len(panels))
    for axis, (title, values, unit) in zip(axes, panels, strict=True):
        shown = np.ma.masked_invalid(values)
        image = axis.imshow(shown, aspect="auto", interpolation="nearest", cmap="viridis")
        axis.set_title(title)
        axis.set_xticks(range(len(numbers)), [str(n) for n in numbers])
        axis.set_xlabel("step")
        axis.set_yticks([row for row, _ in ticks], [label for _, label in ticks])
        axis.set_ylabel("rank")
        figure.colorbar(image, ax=axis, label=unit)
    return {}


def _findings(report: Report) -> str:
    if not report.findings:
        return "<p>None: every rule is below its threshold.</p>"
    out = []
    for f in report.findings:
        out.append(
            "<div class='finding'>"
            f"<b>{html.escape(f.title)}</b> ({html.escape(f.kind)}, {finding_where(f)}) — "
            f"{html.escape(finding_figures(f))}<br>{html.escape(f.detail)}<br>"
            f"<i>Fix:</i> {html.escape(f.fix)}<br>"
            f"<code>{html.escape(f.evidence_cypher)}</code></div>"
        )
    return "\n".join(out)


STACK_PARTS = {  # a step bar's parts, bottom up: label, colour
    "compute": ("compute", "#2e86c1"),
    "waiting": ("waiting at collectives", "#c0392b"),
    "communication": ("communication", "#f39c12"),
    "idle": ("GPU idle", "#d5d8dc"),
    "other": ("other (CPU work, copies, overlap)", "#aab7b8"),
}


def step_stacks(report: Report) -> dict[tuple[int, int], dict[str, int]]:
    """Per (rank, step): the step's time in STACK_PARTS (ns), which sum to the step's time.
    Waiting is the rank's longest wait at one of the step's collectives (DDP's bucket
    collectives overlap: their waits are not added up, as `collectives` counts them; on the GPU
    inside its exposed communication, else on the CPU); compute and idle its GPU's;
    communication the rest of its exposed communication; taken in that order up to the step's
    time (the GPU work a step launched may end after it); other what is left."""
    waits: dict[tuple[int, int], int] = {}
    for c in report.tables["collectives"].to_pylist():
        if c["step"] is None:
            continue
        for rank, ns in json.loads(c["waits_ns"] or "{}").items():
            key = (int(rank), int(c["step"]))
            waits[key] = max(waits.get(key, 0), int(ns))
    out: dict[tuple[int, int], dict[str, int]] = {}
    for r in report.tables["steps"].to_pylist():
        step_ns = int(r["step_ns"])
        waiting = min(waits.get((r["rank"], r["step"]), 0), step_ns)
        exposed = int(r["exposed_communication_ns"] or 0)
        compute, idle = int(r["compute_ns"] or 0), int(r["idle_ns"] or 0)
        wanted = {"waiting": waiting, "compute": compute,
                  "communication": max(exposed - waiting, 0), "idle": idle}  # fmt: skip
        left, taken = step_ns, {}
        for key, ns in wanted.items():  # the step's GPU work can run past its end: each part
            taken[key] = min(ns, left)  # in this order up to what is left of the step's time
            left -= taken[key]
        parts = {key: taken[key] for key in STACK_PARTS if key != "other"}
        parts["other"] = left
        out[(r["rank"], r["step"])] = parts
    return out


def _stack_section(report: Report) -> str:
    stacks = step_stacks(report)
    if len(report.ranks) >= HEAT_FROM_RANKS * 2:  # the ranks x steps maps above show them all
        kept = set(ranks_that_matter(report))
        stacks = {k: v for k, v in stacks.items() if k[0] in kept}
    if not stacks:
        why = HTA_READS_THE_WHOLE_TRACE if report.mode == HTA_MODE else "no ProfilerSteps"
        return f"<p class='note'>No step times in this report: {why}.</p>"
    size = (min(16.0, 3.0 + 0.22 * len(stacks)), 3.6)
    return _svg(size, lambda ax: _draw_stacks(ax, stacks)) + (
        "<p class='note'>A bar per rank and step, as tall as the step: in a synchronous job every "
        "rank's step is as long as the slowest's, so the straggler is the rank that does not "
        "wait (little red) while the others do.</p>"
    )


def _draw_stacks(ax: Axes, stacks: Mapping[tuple[int, int], dict[str, int]]) -> dict[str, str]:
    titles, labelled = {}, set()
    keys = sorted(stacks, key=lambda k: (k[1], k[0]))  # step by step, the ranks side by side
    x, ticks, labels, previous = 0.0, [], [], None
    for rank, step in keys:
        if previous is not None and step != previous:
            x += 1.0  # a gap between steps
        previous = step
        bottom = 0.0
        for key, ns in stacks[(rank, step)].items():
            if not ns:
                continue
            label, colour = STACK_PARTS[key]
            drawn = ax.bar(
                x, ns / 1e6, bottom=bottom, width=0.8, color=colour,
                label=label if key not in labelled else "_nolegend_",
            )  # fmt: skip
            labelled.add(key)
            gid = f"stack-rank{rank}-step{step}-{key}"
            drawn.patches[0].set_gid(gid)
            titles[gid] = f"rank {rank} · step {step} · {label}: {ns / 1e3:,.0f} µs"
            bottom += ns / 1e6
        ticks.append(x)
        labels.append(f"{rank}")
        x += 1.0
    ax.set_xticks(ticks, labels, fontsize=7 if len(ticks) > 24 else 9)
    ax.set_xlabel("rank, step by step (left to right)")
    ax.set_ylabel("step time (ms)")
    ax.figure.legend(loc="outside lower center", ncols=len(labelled), frameon=False)
    return titles


MANY_LINES = 16  # past this many ranks, the arrivals chart draws a band and the late ones


def arrival_offsets(report: Report) -> tuple[list[str], dict[int, list[float | None]]]:
    """Each collective instance (in step and sequence order) and, per rank, when it arrived
    after the first rank to arrive (ms): the longest wait of the instance less its own."""
    rows = sorted(
        (c for c in report.tables["collectives"].to_pylist() if c["waits_ns"]),
        key=lambda c: (c["step"] if c["step"] is not None else -1, c["process_group"], c["seq"]),
    )
    labels, offsets = [], {}
    for i, c in enumerate(rows):
        waits = {int(r): int(ns) for r, ns in json.loads(c["waits_ns"]).items()}
        if not waits:
            continue
        longest = max(waits.values())
        labels.append(f"{c['collective']} #{c['seq']} (step {c['step']})")
        for rank, ns in waits.items():
            offsets.setdefault(rank, [None] * len(rows))[i] = (longest - ns) / 1e6
    width = len(labels)
    return labels, {r: v[:width] for r, v in sorted(offsets.items())}


def _arrival_section(report: Report) -> list[str]:
    labels, offsets = arrival_offsets(report)
    if len(offsets) < 2 or not labels:
        return []
    late = set(standing_out(report.tables)) | {f.rank for f in report.findings}
    size = (min(16.0, 3.0 + 0.3 * len(labels)), 3.2)
    return [
        "<h2>When each rank arrived at each collective</h2>",
        _svg(size, lambda ax: _draw_arrivals(ax, labels, offsets, late))
        + "<p class='note'>ms after the first rank to arrive (the longest wait less the rank's "
        "own): the straggler is the line on top. Past 16 ranks: the band from the earliest to "
        "the latest arrival, the median, and the ranks that stand out or have a finding.</p>",
    ]


def _draw_arrivals(
    ax: Axes, labels: list[str], offsets: Mapping[int, list[float | None]], late: set[int]
) -> dict[str, str]:
    xs = np.arange(len(labels))
    titles = {}
    many = len(offsets) > MANY_LINES
    if many:
        grid = np.array(
            [[np.nan if v is None else v for v in values] for values in offsets.values()]
        )
        ax.fill_between(xs, np.nanmin(grid, axis=0), np.nanmax(grid, axis=0), color="#d5d8dc",
                        label="earliest to latest")  # fmt: skip
        ax.plot(xs, np.nanmedian(grid, axis=0), color="#5d6d7e", label="median")
    for rank, values in offsets.items():
        if many and rank not in late:
            continue
        ys = [np.nan if v is None else v for v in values]
        colour = SLOWEST_COLOUR if rank in late else None
        (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, color=colour,
                          label=f"rank {rank}")  # fmt: skip
        gid = f"arrivals-rank{rank}"
        line.set_gid(gid)
        worst = max((v for v in values if v is not None), default=0.0)
        titles[gid] = f"rank {rank}: up to {worst:,.2f} ms after the first arrival"
    # side by side while they fit (~60 characters of 7-point text under the axes), else upright
    upright = len(labels) * max(map(len, labels), default=0) > 60
    ax.set_xticks(xs, labels, rotation=90 if upright else 0, fontsize=7)
    ax.set_ylabel("ms after the first arrival")
    ax.figure.legend(loc="outside right upper", frameon=False, fontsize=7)
    return titles


def _temporal_section(temporal: pa.Table, kernel_types: pa.Table) -> str:
    shares: dict[int, dict[str, int]] = {}
    for row in kernel_types.to_pylist():
        shares.setdefault(row["rank"], {})[row["kernel_type"]] = row["total_ns"]
    bars = [
        (row["rank"], row["kernel_time_ns"], _segments(row, shares.get(row["rank"], {})))
        for row in temporal.to_pylist()
        if row["kernel_time_ns"]
    ]
    if not bars:
        return "<p class='note'>No GPU activity.</p>"
    size = (9.0, min(30.0, 1.3 + 0.35 * len(bars)))
    return _svg(size, lambda ax: _draw_temporal(ax, bars)) + (
        "<p class='note'>Each rank's GPU span, first start to last end: idle when no stream is "
        "busy; communication and memory are busy time with no compute beside it.</p>"
    )


# kernel-type shares with communication and no compute beside it (bit 2 set, bit 1 not)
_COMMUNICATION_ONLY = [name for mask, name in SHARE_NAMES.items() if mask & 2 and not mask & 1]


def _segments(row: Mapping[str, Any], shares: Mapping[str, int]) -> dict[str, int]:
    """One rank's GPU span in parts: compute; the non-compute time split into communication,
    memory and the rest by the exclusive kernel-type shares (kept whole where the shares do
    not fit in it); idle, by cause where the exact reading gives them."""
    parts = {"compute": row["compute_ns"]}
    communication = sum(shares.get(name, 0) for name in _COMMUNICATION_ONLY)
    memory = shares.get("MEMORY", 0)
    rest = row["non_compute_ns"] - communication - memory
    if rest >= 0:
        parts |= {"communication": communication, "memory": memory, "other_non_compute": rest}
    else:
        parts["non_compute"] = row["non_compute_ns"]
    if row["idle_host_wait_ns"] is None:  # HTA's reading: no causes
        parts["idle"] = row["idle_ns"]
    else:
        for cause in ("host_wait", "kernel_wait", "other"):
            parts[f"idle_{cause}"] = row[f"idle_{cause}_ns"]
    return parts


def _draw_temporal(ax: Axes, bars: list[tuple[int, int, dict[str, int]]]) -> dict[str, str]:
    titles, labelled = {}, set()
    for i, (rank, span_ns, parts) in enumerate(bars):
        left = 0.0
        for key, ns in parts.items():
            if not ns:
                continue
            label, colour = SEGMENTS[key]
            drawn = ax.barh(
                i, ns / 1e6, left=left, height=0.6, color=colour,
                label=label if key not in labelled else "_nolegend_",
            )  # fmt: skip
            labelled.add(key)
            gid = f"temporal-rank{rank}-{key}"
            drawn.patches[0].set_gid(gid)
            share = f"{100 * ns / span_ns:.1f} % of the span"
            titles[gid] = f"rank {rank} · {label}: {ns / 1e3:,.0f} µs, {share}"
            left += ns / 1e6
    ax.set_yticks(range(len(bars)), [f"rank {rank}" for rank, _, _ in bars])
    ax.invert_yaxis()
    ax.set_xlabel("GPU span (ms)")
    ax.figure.legend(loc="outside lower center", ncols=len(labelled), frameon=False)
    return titles


def _roofline_section(op_perf: pa.Table) -> list[str]:
    """The operators' achieved TFLOP/s against their FLOPs per byte, under each GPU's roofs."""
    rows = [r for r in op_perf.to_pylist() if r["tflops"] > 0 and r["flops_per_byte"] > 0]
    if not rows:
        return []
    return [
        "<h2>Operators against the roofline</h2>",
        _svg((9.0, 4.2), lambda ax: _draw_roofline(ax, rows)),
        "<p class='note'>One point per operator and shape (the heaviest per rank): its FLOPs "
        "per byte (recorded shapes, each tensor moved once) and the TFLOP/s its kernels "
        "reached; the lines are the GPU's datasheet peaks. Hover a point for its figures.</p>",
    ]


def _draw_roofline(ax: Axes, rows: list[dict[str, Any]]) -> dict[str, str]:
    titles = {}
    roofs: dict[tuple[str, float, float], set[str]] = {}  # one line per peak, its precisions
    for r in rows:
        if r["peak_tflops"] and r["peak_tbps"]:
            key = (r["gpu"], r["peak_tflops"], r["peak_tbps"])
            roofs.setdefault(key, set()).add(r["precision"])
    low = min(r["flops_per_byte"] for r in rows) / 2
    high = max(r["flops_per_byte"] for r in rows) * 2
    for (gpu, peak, tbps), precisions in sorted(roofs.items()):
        precision = "/".join(sorted(precisions))
        ridge = peak / tbps
        xs = [min(low, ridge / 10), ridge, max(high, ridge * 10)]
        ax.plot(xs, [min(peak, tbps * x) for x in xs], color="#7f8c8d", linewidth=1)
        ax.annotate(f"{gpu} {precision} {peak:,.0f} TFLOP/s", (xs[-1], peak), fontsize=7,
                    ha="right", va="bottom", color="#555")  # fmt: skip
    categories = sorted({r["category"] for r in rows})
    colours = dict(zip(categories, COLOURS * (len(categories) // len(COLOURS) + 1), strict=False))
    for i, r in enumerate(rows):
        drawn = ax.scatter([r["flops_per_byte"]], [r["tflops"]], s=18, zorder=3,
                           color=colours[r["category"]],
                           label=r["category"] if r["category"] in categories else "_")  # fmt: skip
        categories = [c for c in categories if c != r["category"]]  # one legend entry each
        gid = f"roofline-rank{r['rank']}-{i}"
        drawn.set_gid(gid)
        share = f", {r['roofline_pct']:.0f}% of the roofline" if r["roofline_pct"] else ""
        titles[gid] = (
            f"rank {r['rank']} {r['name']} {r['input_dims']}: {r['tflops']:,.1f} TFLOP/s, "
            f"{r['tbps']:,.2f} TB/s, {r['flops_per_byte']:,.1f} FLOPs/byte, "
            f"{r['gpu_mean_ns'] / 1e3:,.1f} µs a call × {r['count']}{share}"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOPs per byte")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    return titles


COLOURS = ("#2e86c1", "#c0392b", "#27ae60", "#8e44ad", "#f39c12", "#16a085", "#7f8c8d")
ALLOCATOR_LINES = 12  # lines drawn at most: the ranks and devices of the highest peaks


def _allocator_section(allocator: pa.Table) -> list[str]:
    """Each rank's and device's peak allocated memory per step (the highest peaks' lines)."""
    if not allocator.num_rows:
        return []
    lines: dict[tuple[int, str], list[tuple[int, float, str]]] = {}
    for r in allocator.to_pylist():
        if r["peak_bytes"] < 0:  # not recorded
            continue
        point = (r["step"], r["peak_bytes"] / 2**20, r["peak_in"])
        lines.setdefault((r["rank"], r["device"]), []).append(point)
    if not lines:
        return []
    shown = sorted(lines, key=lambda k: -max(mib for _, mib, _ in lines[k]))[:ALLOCATOR_LINES]
    kept = {k: sorted(lines[k]) for k in sorted(shown)}
    left_out = len(lines) - len(kept)
    more = f" ({left_out} more in the table below)" if left_out else ""
    return [
        "<h2>Memory allocated at its peak, per rank and step</h2>",
        _svg((9.0, 3.2), lambda ax: _draw_allocator(ax, kept)),
        "<p class='note'>The caching allocator's own record ([memory] events): per rank and "
        f"device, the most allocated in each step; hover a point for where it peaked{more}.</p>",
    ]


def _draw_allocator(
    ax: Axes, lines: Mapping[tuple[int, str], list[tuple[int, float, str]]]
) -> dict[str, str]:
    titles = {}
    for (rank, device), points in lines.items():
        steps = [step for step, _, _ in points]
        drawn = ax.plot(
            steps, [mib for _, mib, _ in points], marker="o", label=f"rank {rank} {device}"
        )[0]
        drawn.set_gid(f"allocator-rank{rank}-{device}")
        titles[f"allocator-rank{rank}-{device}"] = "; ".join(
            f"step {step}: {mib:,.1f} MiB in {where or '?'}" for step, mib, where in points
        )
    ax.set_xlabel("step (-1: the whole trace)")
    ax.set_ylabel("peak allocated (MiB)")
    ax.legend(loc="best", fontsize=7, frameon=False)
    return titles


def _critical_section(report: Report) -> str:
    groups: dict[tuple[int, str], list[int]] = {}
    for step, bound in sorted(report.bound_by.items()):
        if report.step in (None, step):
            groups.setdefault((int(str(bound["rank"])), str(bound["op"])), []).append(step)
    if not groups:
        why = HTA_READS_THE_WHOLE_TRACE if report.mode == HTA_MODE else CRITICAL_PATH_HINT
        if report.summarised:
            why = (
                "its ranks are summaries (ingest --summary): the stragglers table says who was late"
            )
        return f"<p class='note'>No critical path in this report: {why}.</p>"
    size = (9.0, min(30.0, 1.2 + 0.35 * len(groups)))
    return (
        _svg(size, lambda ax: _draw_critical(ax, groups))
        + "<p class='note'>Per rank and op, the steps whose critical path (across ranks where "
        "the step joins them) they bound.</p>"
        + "".join(
            _step_segments(step, bound)
            for step, bound in sorted(report.bound_by.items())
            if report.step in (None, step)
        )  # fmt: skip
    )


def _step_segments(step: int, bound: Mapping[str, Any]) -> str:
    """One step's path in top-level segments, with what fixing each would save."""
    total = int(bound.get("length_ns") or 0)
    rows = []
    for seg in bound.get("segments") or ():
        saving = seg.get("saving_ns")
        rows.append(
            f"<tr><td class='n'>{seg['ns'] / 1e3:,.0f}</td>"
            f"<td class='n'>{seg['ns'] / total:.1%}</td>"
            f"<td class='n'>{'' if saving is None else f'{saving / 1e3:,.0f}'}</td>"
            f"<td class='n'>{'' if seg['rank'] < 0 else seg['rank']}</td>"
            f"<td>{html.escape(readable(str(seg['name'])))}</td></tr>"
        )
    if not rows or not total:
        return ""
    return (
        f"<h3>Step {step}: the path, {total / 1e3:,.0f} µs, in segments</h3>"
        "<div class='wide'><table><tr><th>µs</th><th>share</th><th>saves µs</th><th>rank</th>"
        "<th>segment</th></tr>" + "".join(rows) + "</table></div>"
    )


def _draw_critical(ax: Axes, groups: Mapping[tuple[int, str], list[int]]) -> dict[str, str]:
    from matplotlib.ticker import MaxNLocator

    order = sorted(groups, key=lambda k: (-len(groups[k]), k))
    ops = shorten_all([op for _, op in order], 50)
    titles = {}
    for i, (rank, op) in enumerate(order):
        steps = groups[rank, op]
        drawn = ax.barh(i, len(steps), height=0.6, color=SLOWEST_COLOUR)
        drawn.patches[0].set_gid(f"critical-{i}")
        titles[f"critical-{i}"] = (
            f"rank {rank} at {op}: bound {len(steps)} step(s): {', '.join(map(str, steps))}"
        )
    labels = [f"rank {rank} · {op}" for (rank, _), op in zip(order, ops, strict=True)]
    ax.set_yticks(range(len(order)), labels, parse_math=False)  # op names may hold '$'
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("steps bound")
    return titles


def _svg(size: tuple[float, float], draw: Draw) -> str:
    """What `draw` puts on a fresh figure of `size` inches, as an inline `<svg>` element."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    # a fixed salt for the ids matplotlib hashes (random otherwise) and text kept as text, not
    # glyph paths: with SVG_METADATA, the same report gives the same bytes
    with rc_context({"svg.hashsalt": "tracegraph", "svg.fonttype": "none", "font.size": 9.0}):
        figure = Figure(figsize=size, layout="constrained")
        FigureCanvasSVG(figure)
        titles = draw(figure.add_subplot())
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata=SVG_METADATA)
    return _inline(out.getvalue(), titles)


def _inline(svg: str, titles: Mapping[str, str]) -> str:
    """The `<svg>` element alone, without the XML prolog and the namespace declarations (the
    HTML parser supplies both namespaces; their URLs would read as something fetched), each
    group named in `titles` given its hover `<title>`."""
    svg = svg[svg.index("<svg") :]
    head, body = svg.split(">", 1)
    head = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", head) + ' role="img">'

    def titled(group: re.Match[str]) -> str:
        title = titles.get(group[1])
        return group[0] if title is None else f"{group[0]}<title>{html.escape(title)}</title>"

    return head + re.sub(r'<g id="([^"]+)">', titled, body)


def _table(table: pa.Table) -> str:
    """A report table, every row: the first SHOWN_ROWS in view, the rest one click away (a
    `<details>` holding the same columns), each part scrolling sideways on its own so a long
    kernel name never widens the page."""
    shown = in_us(table.drop_columns([c for c in table.column_names if c in ("waits_ns",)]))
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) for t in shown.schema.types]
    columns = [_cells(shown.column(i).to_pylist()) for i in range(shown.num_columns)]
    head = "<tr>" + "".join(f"<th>{html.escape(n)}</th>" for n in shown.column_names) + "</tr>"
    rows = [
        "<tr>" + "".join(
            f"<td class='n'>{c}</td>" if num else f"<td>{c}</td>"
            for c, num in zip(row, numeric, strict=True)
        ) + "</tr>"
        for row in zip(*columns, strict=True)
    ]  # fmt: skip
    first = f"<div class='wide'><table>{head}{''.join(rows[:SHOWN_ROWS])}</table></div>"
    if len(rows) <= SHOWN_ROWS:
        return first
    return (
        f"{first}<details><summary>{_the_other(len(rows) - SHOWN_ROWS)}</summary>"
        f"<div class='wide'><table>{head}{''.join(rows[SHOWN_ROWS:])}</table></div></details>"
    )


def _the_other(n: int) -> str:
    return "the other row" if n == 1 else f"the other {n:,} rows"


def _cells(values: Sequence[object]) -> list[str]:
    text = ["" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v)) for v in values]
    return [html.escape(t) for t in shorten_all(text, 90)]
