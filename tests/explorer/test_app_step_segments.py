"""The Step screen shows a native edge set's path in segments (with what fixing each saves),
across ranks with `a`, by path time with `w`, and the edges one by one with `t`."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.screens.step import PATH_HEADERS, SEGMENT_HEADERS, StepScreen
from tracegraph.explorer.widgets.paged_table import PagedTable

from .conftest import SIZE, make_app, pilot_test, settle

LATE = SyntheticConfig(ranks=2, steps=2, layers=4, late_rank=1, late_us=5_000,
                       straggler_factor=1.0, stall_every=0)  # fmt: skip


@pytest.fixture(scope="module")
def late_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("segments")
    db = folder / "late.kuzu"
    g = tracegraph.open(db)
    g.ingest(*write_per_rank(LATE, folder / "traces"), run="late")
    g.edges("native", all_steps=True)
    return db


def _column(table: PagedTable, name: str) -> list[str]:
    assert table.data is not None
    return [str(v) for v in table.data[name].to_pylist()]


@pilot_test
async def test_segments_across_ranks_by_weight_and_edges(late_db: Path) -> None:
    app = make_app(late_db, mode="step")
    async with app.run_test(size=SIZE) as pilot:
        app.update_focus(run="late", rank=0, edge_set="native")
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen)
        table = step.query_one("#path", PagedTable)
        assert table.headers == SEGMENT_HEADERS
        assert set(_column(table, "rank")) <= {"0", ""}  # rank 0's own path
        await pilot.press("a")
        await settle(pilot)
        assert "1" in _column(table, "rank")  # across ranks: the late rank bounds the step
        top = [r for r in _column(table, "segment") if not r.startswith("  ")]
        assert any("DataLoader" in name for name in top)
        await pilot.press("w")
        await settle(pilot)
        tops = [
            float(us.replace(",", ""))
            for us, seg in zip(_column(table, "µs"), _column(table, "segment"), strict=True)
            if not seg.startswith("  ")
        ]
        assert tops == sorted(tops, reverse=True)
        await pilot.press("t")
        await settle(pilot)
        assert table.headers == PATH_HEADERS
