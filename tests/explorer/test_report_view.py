"""The text report of a job of many ranks: per-rank tables keep the ranks that matter (those
that stand out, the findings' and stragglers', a typical one) and say how to get every rank."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.truth_jobs import BASE
from tracegraph.explorer import report_view

from ..conftest import synthetic_db

JOB = replace(
    BASE, ranks=12, late_rank=5, late_us=20_000, slow_kernel_rank=9, slow_kernel_factor=25.0
)


def _text(db: Path, every_table: bool = True) -> str:
    out = io.StringIO()
    report = tracegraph.open(db).report()
    report_view.write_report(out, report, db, "table", width=200, every_table=every_table)
    return out.getvalue()


def test_many_ranks_keep_the_ones_that_matter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = synthetic_db(JOB, tmp_path, "many")
    whole = _text(db)  # 12 ranks: every rank's rows
    monkeypatch.setattr(report_view, "MANY_RANKS", 8)
    report = tracegraph.open(db).report()
    kept = report_view.ranks_that_matter(report)
    assert {5, 9} <= set(kept) and len(kept) < JOB.ranks
    steps = report.tables["steps"].to_pylist()
    first = sorted((r["compute_ns"], r["rank"]) for r in steps if r["step"] == 0)
    typical = first[(len(first) - 1) // 2][1]  # the median compute of the first step
    assert typical in kept
    trimmed = _text(db)
    section = trimmed.split("per step: its GPU work")[1].split("\n\n")[0]
    rows = [line.split() for line in section.splitlines()[4:]]
    assert sorted({int(r[0]) for r in rows}) == kept and len(rows) == len(kept) * JOB.steps
    assert "every rank: --table steps" in section
    assert re.search(rf"ranks [\d, –]+ of {JOB.ranks}:", section)
    assert len(trimmed.splitlines()) < len(whole.splitlines())
    # the findings and the spread are whole
    assert trimmed.split("per step across ranks")[0] == whole.split("per step across ranks")[0]


def test_the_short_text_tells_the_story_and_names_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default: each step, who bound it and who was late; the findings; the ranks at a
    glance (past MANY_RANKS, those that matter); the tables with rows, by name. Far shorter."""
    db = synthetic_db(JOB, tmp_path, "many")
    monkeypatch.setattr(report_view, "MANY_RANKS", 8)
    short, whole = _text(db, every_table=False), _text(db)
    report = tracegraph.open(db).report()
    assert len(short.splitlines()) * 4 < len(whole.splitlines())
    steps = short.split("steps (ms:")[1].split("\n\n")[0].splitlines()[3:]
    verdicts = {s["step"]: s for s in report.to_json()["steps"]}
    assert [int(line.split()[0]) for line in steps] == sorted(verdicts)
    for line in steps:
        verdict = verdicts[int(line.split()[0])]
        assert f"rank {verdict['bound_by']['rank']}: " in line
        if verdict["straggler"]:
            assert f"rank {verdict['straggler']['rank']} +" in line
    glance = short.split("ranks at a glance")[1].split("\n\n")[0].splitlines()[3:]
    assert sorted(int(line.split()[0]) for line in glance) == report_view.ranks_that_matter(report)
    assert short.split("findings, what fixing")[1].split("ranks at a glance")[0] in whole
    listed = short.split("every table (rows): ")[1].splitlines()[0]
    for name, table in report.tables.items():
        assert (f"{name} ({table.num_rows:,})" in listed) == (table.num_rows > 0)
