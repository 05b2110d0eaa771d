"""`report --html`: one self-contained page (no scripts, nothing fetched) holding every finding,
the charts (drawn with matplotlib from the report's figures) and every table, row for row; the
same database gives the same bytes, and `report` without `--html` never loads matplotlib."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.queries.report import Report

TRACES = (Path(__file__).resolve().parents[2] / ".." / "shared" / "traces").resolve()
TRACE_FILTER = TRACES / "hta" / "trace_filter"  # 2 ranks, NCCL, 2 ProfilerSteps


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[int] = []  # data rows per table (its rows under "the other N rows"
        self.folded = False  # included: a table in a <details> continues the one before it)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "details":
            self.folded = True
        elif tag == "table" and self.folded:
            self.tables[-1] -= 1  # its header row repeats the table's
        elif tag == "table":
            self.tables.append(-1)  # the header row is not data
        elif tag == "tr":
            self.tables[-1] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.folded = False


class Chart:
    """One inline `<svg>`: its titled groups (gid → hover title, path) and its text."""

    def __init__(self, svg: str) -> None:
        titled = re.findall(r'<g id="([^"]+)"><title>([^<]*)</title>', svg)
        self.titles = {gid: html.unescape(title) for gid, title in titled}
        # a bar's or line's outline (a scatter's points reuse one marker: no path of their own)
        groups = re.findall(r'<g id="([^"]+)"><title>[^<]*</title>\s*<path d="([^"]*)"', svg)
        self.paths = dict(groups)
        self.texts = {html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)}

    def width(self, gid: str) -> float:
        """The horizontal extent of a bar's outline."""
        xs = [float(x) for x in re.findall(r"[ML] (-?[\d.]+) ", self.paths[gid])]
        return max(xs) - min(xs)

    def height(self, gid: str) -> float:
        """The vertical extent of a bar's outline."""
        ys = [float(y) for y in re.findall(r"[ML] -?[\d.]+ (-?[\d.]+)", self.paths[gid])]
        return max(ys) - min(ys)


def charts(text: str) -> dict[str, Chart]:
    """The page's charts by what their groups are named after (steps, temporal, critical)."""
    found = {}
    for svg in re.findall(r"<svg.*?</svg>", text, re.S):
        chart = Chart(svg)
        found[next(iter(chart.titles)).split("-")[0]] = chart
    return found


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """A 2-rank synthetic run with a late rank 1, without edge sets."""
    base = tmp_path_factory.mktemp("synthetic")
    write_per_rank(SyntheticConfig(ranks=2, steps=3, layers=2, late_rank=1, late_us=2_000),
                   base / "t")  # fmt: skip
    db = base / "r.kuzu"
    g = tracegraph.open(db)
    g.ingest(base / "t", run="job")
    return db, g.report("job")


@pytest.fixture(scope="module")
def trace_filter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """HTA's 2-rank trace_filter job with a native edge set over every step."""
    if len(list(TRACE_FILTER.glob("*.json.gz"))) != 2:
        pytest.skip(f"real traces not at {TRACE_FILTER}")
    db = tmp_path_factory.mktemp("trace_filter") / "r.kuzu"
    g = tracegraph.open(db)
    g.ingest(TRACE_FILTER, run="tf")
    g.edges("native", run="tf", all_steps=True)
    return db, g.report("tf")


def render(db: Path, out: Path) -> str:
    assert main(["report", str(db), "--html", str(out)]) == 0
    return out.read_text()


def test_the_page_holds_the_whole_report_and_nothing_from_outside(
    synthetic: tuple[Path, Report], tmp_path: Path
) -> None:
    db, report = synthetic
    text = render(db, tmp_path / "report.html")
    page = Page()
    page.feed(text)
    shown = [n for n, t in report.tables.items() if t.num_rows]
    segments = [len(report.bound_by[s]["segments"]) for s in sorted(report.bound_by)]
    assert len(segments) == 3 and all(segments)  # built in memory: no edge set needed
    assert page.tables == segments + [report.tables[n].num_rows for n in shown]
    assert text.count("class='finding'") == len(report.findings) > 0
    assert sorted(charts(text)) == ["arrivals", "critical", "stack", "temporal"]  # an <svg> each
    assert sum(1 for tag, _ in page.tags if tag == "svg") == 4
    assert "No critical path in this report" not in text
    assert not [t for t, _ in page.tags if t in ("script", "link", "img", "iframe")]
    assert "http" not in text  # nothing fetched: it opens offline


def test_the_charts_draw_the_reports_figures(
    trace_filter: tuple[Path, Report], tmp_path: Path
) -> None:
    db, report = trace_filter
    text = render(db, tmp_path / "report.html")
    assert text.count("<svg") == 4 and "<script" not in text and "http" not in text
    assert text.index("<svg") < text.index("Findings, most costly first")  # charts first
    drawn = charts(text)
    assert {f"rank {r}" for r in report.ranks} <= drawn["temporal"].texts
    _check_step_stacks(drawn["stack"], report)
    _check_arrivals(drawn["arrivals"], report)
    _check_temporal_bars(drawn["temporal"], report)
    _check_critical_bars(drawn["critical"], report)


def _check_step_stacks(chart: Chart, report: Report) -> None:
    """A bar per rank and step as tall as the step (one scale for every bar), its waiting
    part the rank's waits at the step's collectives."""
    waits: dict[tuple[int, int], int] = {}
    for c in report.tables["collectives"].to_pylist():
        for rank, ns in json.loads(c["waits_ns"]).items():
            waits[(int(rank), c["step"])] = max(waits.get((int(rank), c["step"]), 0), ns)
    px_per_ns = []
    for row in report.tables["steps"].to_pylist():
        bar = f"stack-rank{row['rank']}-step{row['step']}-"
        parts = [gid for gid in chart.titles if gid.startswith(bar)]
        assert parts
        px_per_ns.append(sum(chart.height(gid) for gid in parts) / row["step_ns"])
        waited = min(waits.get((row["rank"], row["step"]), 0), row["step_ns"])
        if waited:
            assert (
                f"waiting at collectives: {waited / 1e3:,.0f} µs" in chart.titles[bar + "waiting"]
            )
            px_per_ns.append(chart.height(bar + "waiting") / waited)
    assert max(px_per_ns) == pytest.approx(min(px_per_ns), rel=1e-3)


def _check_arrivals(chart: Chart, report: Report) -> None:
    """A line per rank, its latest arrival after the first rank's at any collective: the
    longest wait of the instance less the rank's own."""
    latest: dict[int, float] = {}
    for c in report.tables["collectives"].to_pylist():
        waits = {int(r): ns for r, ns in json.loads(c["waits_ns"]).items()}
        for rank, ns in waits.items():
            latest[rank] = max(latest.get(rank, 0.0), (max(waits.values()) - ns) / 1e6)
    assert sorted(chart.titles) == [f"arrivals-rank{r}" for r in sorted(latest)]
    for rank, ms in latest.items():
        assert chart.titles[f"arrivals-rank{rank}"] == (
            f"rank {rank}: up to {ms:,.2f} ms after the first arrival"
        )


def _check_temporal_bars(chart: Chart, report: Report) -> None:
    """A bar per rank whose parts fill the rank's GPU span, each part as long as its time on
    the one x axis of every rank."""
    px_per_ns = []
    for row in report.tables["temporal"].to_pylist():
        bar = f"temporal-rank{row['rank']}-"
        parts = [gid for gid in chart.titles if gid.startswith(bar)]
        assert f"compute: {row['compute_ns'] / 1e3:,.0f} µs" in chart.titles[bar + "compute"]
        px_per_ns += [
            chart.width(bar + "compute") / row["compute_ns"],
            chart.width(bar + "idle_host_wait") / row["idle_host_wait_ns"],
            sum(chart.width(gid) for gid in parts) / row["kernel_time_ns"],
        ]
    assert len(px_per_ns) == 3 * len(report.ranks)
    assert max(px_per_ns) == pytest.approx(min(px_per_ns), rel=1e-4)


def _check_critical_bars(chart: Chart, report: Report) -> None:
    """A bar per rank and op that bound a step, as long as the steps it bound."""
    bound: dict[tuple[object, object], list[int]] = {}
    for step, b in sorted(report.bound_by.items()):
        bound.setdefault((b["rank"], b["op"]), []).append(step)
    assert len(chart.titles) == len(bound) > 0
    px_per_step = []
    for gid, title in chart.titles.items():
        (rank, op), steps = next(
            (k, v) for k, v in bound.items() if title.startswith(f"rank {k[0]} at {k[1]}:")
        )
        assert title.endswith(": " + ", ".join(map(str, steps)))
        assert f"rank {rank}" in " ".join(chart.texts)
        px_per_step.append(chart.width(gid) / len(steps))
    assert max(px_per_step) == pytest.approx(min(px_per_step), rel=1e-4)


def test_the_same_database_gives_the_same_page(
    trace_filter: tuple[Path, Report], tmp_path: Path
) -> None:
    db, _ = trace_filter
    first = render(db, tmp_path / "a.html")
    assert render(db, tmp_path / "b.html") == first


def test_report_without_html_leaves_matplotlib_unloaded(synthetic: tuple[Path, Report]) -> None:
    db, _ = synthetic
    code = (
        "import sys\n"
        "from tracegraph.explorer import report_html\n"  # the page's module loads it lazily
        "from tracegraph.explorer.cli import main\n"
        f"assert main(['report', {str(db)!r}, '--format', 'json']) == 0\n"
        "assert 'matplotlib' not in sys.modules, 'report imported matplotlib'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_ranks_by_steps_maps_show_the_slow_gpu_and_the_late_host(tmp_path: Path) -> None:
    """From 8 ranks the page opens with the ranks × steps maps: the slow GPU's row is far
    above the step's median compute, the late host's lateness is what was injected (20 ms), and
    an ordinary rank is near 100% and on time; below 8 ranks there are none."""
    from dataclasses import replace

    import numpy as np

    from tracegraph.examples.truth_jobs import BASE
    from tracegraph.explorer.report_html import heat_values, report_html

    job = replace(BASE, ranks=8, late_rank=5, late_us=20_000, slow_kernel_rank=2,
                  slow_kernel_factor=25.0)  # fmt: skip
    db = tmp_path / "eight.kz"
    tracegraph.open(db).ingest(*write_per_rank(job, tmp_path / "t"), run="eight")
    report = tracegraph.open(db).report()
    heat = heat_values(report)
    assert heat is not None
    ranks, steps, compute, late = heat
    assert ranks == list(range(8)) and len(steps) == job.steps
    assert (compute[2] > 1000).all()  # 25x GEMMs
    assert np.allclose(compute[0], 100, rtol=0.05)
    assert np.allclose(late[5], 20.0, rtol=0.05) and (np.abs(late[0]) < 1).all()
    assert "Ranks × steps" in report_html(report, str(db))
    small = tracegraph.open(tmp_path / "four.kz")
    small.ingest(*write_per_rank(replace(job, ranks=4, late_rank=None, slow_kernel_rank=None),
                                 tmp_path / "t4"))  # fmt: skip
    assert heat_values(small.report()) is None


def test_the_allocator_chart_draws_each_ranks_peak_per_step(tmp_path: Path) -> None:
    files = sorted((TRACES / "cpu_ddp_2r_memory").glob("rank*.json.gz"))
    if len(files) != 2:
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "r.kuzu"
    g = tracegraph.open(db)
    g.ingest(*files, run="memory")
    rows = g.report("memory").tables["allocator"].to_pylist()
    drawn = charts(render(db, tmp_path / "report.html"))["allocator"]
    assert sorted(drawn.titles) == ["allocator-rank0-cpu", "allocator-rank1-cpu"]
    for row in rows:
        point = f"step {row['step']}: {row['peak_bytes'] / 2**20:,.1f} MiB in {row['peak_in']}"
        assert point in drawn.titles[f"allocator-rank{row['rank']}-{row['device']}"]
    assert {"rank 0 cpu", "rank 1 cpu"} <= drawn.texts


def test_the_roofline_chart_draws_each_operator_shape(tmp_path: Path) -> None:
    path = TRACES / "tracelens" / "traces" / "mi300" / "resnet_act_checkpoint.json.gz"
    if not path.is_file():
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "r.kuzu"
    g = tracegraph.open(db)
    g.ingest(path, run="mi300")
    rows = [r for r in g.report("mi300").tables["op_perf"].to_pylist() if r["tflops"] > 0]
    drawn = charts(render(db, tmp_path / "report.html"))["roofline"]
    assert len(drawn.titles) == len(rows) > 0
    for i, r in enumerate(rows):
        title = drawn.titles[f"roofline-rank{r['rank']}-{i}"]
        assert title.startswith(f"rank {r['rank']} {r['name']} {r['input_dims']}: ")
        assert f"{r['tflops']:,.1f} TFLOP/s" in title
    assert any(t.startswith("MI300X") for t in drawn.texts)  # the roof is labelled


def test_html_prints_one_line_not_the_text_report(
    synthetic: tuple[Path, Report], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, report = synthetic
    out = tmp_path / "page.html"
    assert main(["report", str(db), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1 and printed.startswith(f"wrote {out}: the report of run")
    assert f"{len(report.findings)} finding(s)" in printed and out.stat().st_size > 10_000
