"""The late rank of a job, named on the Overview (per step) and the Step screen."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from tracegraph.explorer.screens.overview import OverviewScreen
from tracegraph.explorer.screens.step import StepScreen

from .conftest import SIZE, make_app, pilot_test, settle
from .dbs import LATE_RANK, LATE_US


@pilot_test
async def test_overview_and_step_name_the_late_rank(late_db: Path) -> None:
    app = make_app(late_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        steps = overview.query_one("#steps", DataTable)
        assert steps.row_count == 2
        for i in range(2):
            cell = str(steps.get_row_at(i)[2])  # the straggler column
            found = re.fullmatch(r"rank (\d+) \+([\d.,]+)", cell)
            assert found, cell
            assert int(found[1]) == LATE_RANK
            assert float(found[2]) == pytest.approx(LATE_US / 1000, rel=0.05)  # ms late
        waits = overview.query_one("#waits", DataTable)
        assert waits.row_count == 3
        # the late rank waits least, and its cells are marked
        late_cells = [waits.get_cell(str(LATE_RANK), f"step{s}") for s in range(2)]
        assert all("red" in str(c.style) for c in late_cells)
        waited = {r: float(str(waits.get_cell(str(r), "step0")).split(" / ")[1]) for r in range(3)}
        assert min(waited, key=waited.__getitem__) == LATE_RANK
        assert all(waited[r] > 0.9 * LATE_US / 1000 for r in waited if r != LATE_RANK)

        await pilot.press("2")
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen)
        note = str(step.query_one("#path-note", Static).render())
        assert f"straggler rank {LATE_RANK}" in note
