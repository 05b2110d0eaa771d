"""`report --html`: one self-contained page (no scripts, nothing fetched) holding every finding,
the charts and every table of the report, row for row."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[int] = []  # data rows per table

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append(-1)  # the header row is not data
        elif tag == "tr":
            self.tables[-1] += 1


def test_the_page_holds_the_whole_report_and_nothing_from_outside(tmp_path: Path) -> None:
    write_per_rank(SyntheticConfig(ranks=2, steps=3, layers=2, late_rank=1, late_us=2_000),
                   tmp_path / "t")  # fmt: skip
    db = tmp_path / "r.kuzu"
    g = tracegraph.open(db)
    g.ingest(tmp_path / "t", run="job")
    out = tmp_path / "report.html"
    assert main(["report", str(db), "--html", str(out)]) == 0
    text = out.read_text()
    page = Page()
    page.feed(text)
    report = g.report("job")
    shown = [n for n, t in report.tables.items() if t.num_rows]
    assert page.tables == [report.tables[n].num_rows for n in shown]
    assert text.count("class='finding'") == len(report.findings) > 0
    assert sum(1 for tag, _ in page.tags if tag == "svg") == 2  # GPU time, step times
    assert not [t for t, _ in page.tags if t in ("script", "link", "img", "iframe")]
    assert "http" not in text  # nothing fetched: it opens offline
