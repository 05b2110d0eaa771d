"""Write the README's picture: the first screen of `report --html` on a synthetic 8-rank job
(rank 5's host 20 ms late each step, rank 2's GEMMs 25x slower), as headless Chromium shows it.

    python -m tests.explorer.make_images docs/images

The job is deterministic and the page holds no clock, so the picture changes only when the
report does. Needs Debian's Chromium (tests/explorer/chromium.py).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import tracegraph
from tracegraph.examples.synthetic import write_per_rank
from tracegraph.examples.truth_jobs import BASE
from tracegraph.explorer.cli import main

from .chromium import CHROMIUM, CHROMIUM_ARGS

JOB = replace(BASE, ranks=8, late_rank=5, late_us=20_000, slow_kernel_rank=2,
              slow_kernel_factor=25.0)  # fmt: skip
WINDOW = {"width": 1280, "height": 900}


def report_picture(out: Path) -> None:
    """The report page's first screen of JOB, as PNG at `out`."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        db = base / "job.kz"
        tracegraph.open(db).ingest(*write_per_rank(JOB, base / "traces"), run="eight-ranks")
        page_file = base / "report.html"
        if main(["report", str(db), "--html", str(page_file)]) != 0:
            raise SystemExit("report --html failed")
        # the page names its database: a temporary path says nothing to a reader
        page_file.write_text(page_file.read_text().replace(str(db), "job.kuzu"))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=WINDOW)
                page.goto(page_file.as_uri(), wait_until="load")
                page.screenshot(path=out)
            finally:
                browser.close()


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    folder.mkdir(parents=True, exist_ok=True)
    report_picture(folder / "report.png")
    print(f"wrote {folder / 'report.png'}")
