"""`report --html` looked at in a real browser (headless Chromium): at 8 and 64 ranks, and on a
real 2-rank NCCL job, the page opens offline, the charts come first and the first of them is
in the first screen, nothing widens the page past the window, no chart's labels overlap, and
the ranks the job was made slow on are named where the eye lands (the ranks × steps maps).

Each page's first screen and whole length are kept as PNGs beside the test's files (and in
$TRACEGRAPH_SCREENSHOTS when set) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import tracegraph
from tracegraph.examples.synthetic import write_per_rank
from tracegraph.examples.truth_jobs import BASE
from tracegraph.explorer.cli import main

from .chromium import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")

TRACE_FILTER = (Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "hta" /
                "trace_filter").resolve()  # fmt: skip
WINDOW = {"width": 1280, "height": 900}
# (ranks, the rank made late at the host, the rank whose GEMMs are 25x slower)
JOBS = {"8 ranks": (8, 5, 2), "64 ranks": (64, 45, 12)}
# every <svg>'s text labels and the findings heading, as laid out (page coordinates, px)
LAYOUT = """() => {
  const box = e => { const b = e.getBoundingClientRect();
                     return [b.left, b.top + scrollY, b.right, b.bottom + scrollY]; };
  const heading = [...document.querySelectorAll('h2')]
      .find(h => h.textContent.startsWith('Findings'));
  return {
    pageWidth: document.documentElement.scrollWidth,
    findings: heading ? box(heading)[1] : null,
    charts: [...document.querySelectorAll('svg')].map(svg => ({
      box: box(svg),
      heading: [...document.querySelectorAll('h2')].filter(
                 h => h.getBoundingClientRect().top < svg.getBoundingClientRect().top).pop()
                 ?.textContent,
      labels: [...svg.querySelectorAll('text')].map(t => [t.textContent, ...box(t)]),
    })),
  };
}"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each job's report page, and HTA's trace_filter's where the shared traces are."""
    made = {}
    for name, (ranks, late, slow) in JOBS.items():
        base = tmp_path_factory.mktemp(name.replace(" ", "_"))
        job = replace(BASE, ranks=ranks, late_rank=late, late_us=20_000, slow_kernel_rank=slow,
                      slow_kernel_factor=25.0)  # fmt: skip
        db = base / "job.kz"
        tracegraph.open(db).ingest(*write_per_rank(job, base / "t"), run="job")
        assert main(["report", str(db), "--html", str(base / "report.html")]) == 0
        made[name] = base / "report.html"
    if len(list(TRACE_FILTER.glob("*.json.gz"))) == 2:
        base = tmp_path_factory.mktemp("trace_filter")
        db = base / "tf.kz"
        tracegraph.open(db).ingest(TRACE_FILTER, run="tf")
        assert main(["report", str(db), "--html", str(base / "report.html")]) == 0
        made["trace_filter"] = base / "report.html"
    return made


@pytest.fixture(scope="module")
def looked(pages: dict[str, Path]) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """Each page as Chromium lays it out (one browser per page, for every test of it)."""
    return {name: look(page) for name, page in pages.items()}


def look(page_file: Path) -> tuple[dict[str, Any], list[str]]:
    """The page's layout in Chromium at WINDOW, the requests it tried to make beyond its own
    file, and its screenshots beside it."""
    pytest.importorskip("playwright", reason="Playwright comes with the [test] extra")
    from playwright.sync_api import Route, sync_playwright

    fetched: list[str] = []

    def own_file_only(route: Route) -> None:
        if route.request.url == page_file.as_uri():
            route.continue_()
        else:
            fetched.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=WINDOW)
            page.route("**/*", own_file_only)
            page.goto(page_file.as_uri(), wait_until="load")
            layout = page.evaluate(LAYOUT)
            page.screenshot(path=page_file.with_name("first_screen.png"))
            page.screenshot(path=page_file.with_name("whole_page.png"), full_page=True)
        finally:
            browser.close()
    keep = os.environ.get("TRACEGRAPH_SCREENSHOTS")
    if keep:
        for shot in ("first_screen.png", "whole_page.png"):
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(page_file.with_name(shot), Path(keep) / f"{page_file.parent.name}_{shot}")
    return layout, fetched


def ranks_of(label: str) -> list[int]:
    """The ranks a map's axis label names: "5", "2, 5", "100–115" (a run)."""
    if "–" in label:
        first, last = label.split("–")
        return list(range(int(first), int(last) + 1))
    return [int(r) for r in label.split(" +")[0].split(", ")]


def overlapping(labels: list[list[Any]]) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes overlap by more than a pixel each way."""
    pairs = []
    for i, (a, *ab) in enumerate(labels):
        for b, *bb in labels[i + 1 :]:
            if (
                min(ab[2], bb[2]) - max(ab[0], bb[0]) > 1
                and min(ab[3], bb[3]) - max(ab[1], bb[1]) > 1
            ):
                pairs.append((a, b))
    return pairs


@pytest.mark.parametrize("name", [*JOBS, "trace_filter"])
def test_the_page_reads_in_a_browser(name: str, looked: dict[str, tuple]) -> None:
    if name not in looked:
        pytest.skip(f"real traces not at {TRACE_FILTER}")
    layout, fetched = looked[name]
    assert not fetched, f"the page asked for {fetched}"
    assert layout["pageWidth"] <= WINDOW["width"], "something widens the page past the window"
    charts = layout["charts"]
    assert charts and layout["findings"] is not None
    assert charts[0]["box"][1] < WINDOW["height"], "the first chart is below the first screen"
    assert all(c["box"][3] < layout["findings"] for c in charts), "a chart after the findings"
    for chart in charts:
        left, top, right, bottom = chart["box"]
        assert right - left > 200 and bottom - top > 100 and right <= WINDOW["width"]
        assert not overlapping(chart["labels"]), (chart["heading"], overlapping(chart["labels"]))


@pytest.mark.parametrize("name", list(JOBS))
def test_the_ranks_made_slow_are_named_on_the_ranks_by_steps_maps(
    name: str, looked: dict[str, tuple]
) -> None:
    """Both maps label the late host's and the slow GPU's rows with their rank, level with the
    row: at 64 ranks the evenly spaced labels alone (0, 8, 16, ...) would not say whose the
    bright line is."""
    ranks, late, slow = JOBS[name]
    layout, _ = looked[name]
    maps = layout["charts"][0]
    assert maps["heading"] == "Ranks × steps"
    # each map's rank axis: its labels are right-aligned against the map, from the first rank
    # down to the last (a colour bar's labels are left-aligned, and end at 20 ms or so)
    columns: list[list[list[Any]]] = []  # labels whose right edges lie within a pixel
    for label in sorted(maps["labels"], key=lambda label: label[3]):
        if columns and label[3] - columns[-1][-1][3] <= 1:
            columns[-1].append(label)
        else:
            columns.append([label])
    axes = [sorted(column, key=lambda label: label[2]) for column in columns
            if {"0", str(ranks - 1)} <= {label[0] for label in column}]  # fmt: skip
    assert len(axes) == 2, "a map without its rank axis"
    for axis in axes:
        named = [ranks_of(label[0]) for label in axis]
        for rank in (late, slow):
            assert any(rank in group for group in named), f"rank {rank} is not named"
        firsts = [group[0] for group in named]
        assert firsts == sorted(firsts) and len(firsts) > 2  # in rank order, as the rows are
