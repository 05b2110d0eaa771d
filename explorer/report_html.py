"""`tracegraph report --html FILE`: the report as one self-contained HTML page (no scripts, no
network): the findings first, a chart of each rank's GPU time by what filled it and of step
times per rank, then every table, times in µs."""

from __future__ import annotations

import html
from collections.abc import Sequence

import pyarrow as pa

from tracegraph.queries.report import HTA_MODE, Report

from .names import shorten_all
from .report_view import TITLES, _in_us

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222 }
h1 { font-size: 1.5em } h2 { font-size: 1.15em; margin-top: 2em }
table { border-collapse: collapse; font-size: 12px } td, th { padding: 2px 8px }
th { text-align: left; border-bottom: 1px solid #999 } td.n { text-align: right }
tr:nth-child(even) { background: #f4f4f4 }
.finding { border-left: 4px solid #c0392b; padding: 4px 12px; margin: 10px 0; background: #fdf3f2 }
.finding code { font-size: 11px; word-break: break-all; color: #555 }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px }
"""
COLOURS = {"compute": "#2e86c1", "non_compute": "#f39c12", "idle": "#d5d8dc"}


def report_html(report: Report, db: str) -> str:
    """The page for `report` of the database at `db`."""
    mode = "HTA 0.5.0-compatible" if report.mode == HTA_MODE else "exact (ns as recorded)"
    step = "" if report.step is None else f", step {report.step}"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>tracegraph report: {html.escape(report.run)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Run {html.escape(report.run)}</h1>",
        f"<p>{html.escape(db)} · rank(s) {', '.join(map(str, report.ranks))}{step} · {mode}</p>",
        "<h2>Findings, most costly first</h2>",
        _findings(report),
        "<h2>GPU time by what filled it, per rank</h2>",
        _temporal_chart(report.tables["temporal"]),
    ]
    steps = report.tables["steps"]
    if steps.num_rows:
        parts += ["<h2>Step time per rank (ms)</h2>", _step_chart(steps)]
    for name, table in report.tables.items():
        if table.num_rows:
            parts += [f"<h2>{html.escape(TITLES.get(name, name))}</h2>", _table(table)]
    parts.append("</body></html>")
    return "\n".join(parts)


def _findings(report: Report) -> str:
    if not report.findings:
        return "<p>None: every rule is below its threshold.</p>"
    out = []
    for f in report.findings:
        where = f"rank {f.rank}" + ("" if f.step is None else f", step {f.step}")
        out.append(
            "<div class='finding'>"
            f"<b>{html.escape(f.title)}</b> ({html.escape(f.kind)}, {where}) — "
            f"{f.cost_ns_per_step / 1e3:,.0f} µs per step<br>{html.escape(f.detail)}<br>"
            f"<i>Fix:</i> {html.escape(f.fix)}<br>"
            f"<code>{html.escape(f.evidence_cypher)}</code></div>"
        )
    return "\n".join(out)


def _temporal_chart(temporal: pa.Table) -> str:
    rows = [r for r in temporal.to_pylist() if r["kernel_time_ns"]]
    if not rows:
        return "<p>No GPU activity.</p>"
    width, bar, gap = 900, 18, 6
    height = len(rows) * (bar + gap) + 10
    svg = [f"<svg width='{width + 80}' height='{height}' role='img'>"]
    for i, r in enumerate(rows):
        y, x = 5 + i * (bar + gap), 60.0
        svg.append(f"<text x='0' y='{y + 13}' font-size='12'>rank {r['rank']}</text>")
        for part in ("compute", "non_compute", "idle"):
            w = width * r[f"{part}_ns"] / r["kernel_time_ns"]
            label = f"{part.replace('_', '-')} {r[f'{part}_ns'] / 1e3:,.0f} µs"
            svg.append(
                f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar}' "
                f"fill='{COLOURS[part]}'><title>{label}</title></rect>"
            )
            x += w
    svg.append("</svg>")
    legend = "".join(
        f"<span style='background:{c}'></span>{k.replace('_', '-')}" for k, c in COLOURS.items()
    )
    return "".join(svg) + f"<div class='legend'>{legend}</div>"


def _step_chart(steps: pa.Table) -> str:
    rows = steps.to_pylist()
    by_step: dict[int, list[tuple[int, int]]] = {}
    for r in rows:
        by_step.setdefault(r["step"], []).append((r["rank"], r["step_ns"]))
    top = max(r["step_ns"] for r in rows) or 1
    bar, gap, height = 8, 14, 160
    columns = sum(len(v) for v in by_step.values()) * bar + len(by_step) * gap
    svg = [f"<svg width='{columns + 60}' height='{height + 30}' role='img'>"]
    x = 40
    for number, ranks in sorted(by_step.items()):
        worst = max(ns for _, ns in ranks)
        for rank, ns in sorted(ranks):
            h = height * ns / top
            fill = "#c0392b" if ns == worst and len(ranks) > 1 else "#5d6d7e"
            svg.append(
                f"<rect x='{x}' y='{height - h:.1f}' width='{bar - 1}' height='{h:.1f}' "
                f"fill='{fill}'><title>step {number} rank {rank}: {ns / 1e6:,.2f} ms</title>"
                "</rect>"
            )
            x += bar
        svg.append(f"<text x='{x - bar * len(ranks)}' y='{height + 14}' font-size='10'>"
                   f"{number}</text>")  # fmt: skip
        x += gap
    svg.append(f"<text x='0' y='12' font-size='10'>{top / 1e6:,.1f}</text></svg>")
    return "".join(svg) + "<div>the slowest rank of each step in red</div>"


def _table(table: pa.Table) -> str:
    shown = _in_us(table.drop_columns([c for c in table.column_names if c in ("waits_ns",)]))
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) for t in shown.schema.types]
    columns = [_cells(shown.column(i).to_pylist()) for i in range(shown.num_columns)]
    head = "".join(f"<th>{html.escape(n)}</th>" for n in shown.column_names)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='n'>{c}</td>" if num else f"<td>{c}</td>"
            for c, num in zip(row, numeric, strict=True)
        ) + "</tr>"
        for row in zip(*columns, strict=True)
    )  # fmt: skip
    return f"<table><tr>{head}</tr>{body}</table>"


def _cells(values: Sequence[object]) -> list[str]:
    text = ["" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v)) for v in values]
    return [html.escape(t) for t in shorten_all(text, 90)]
