"""A real trace (HTA's alexnet, one rank, no ProfilerStep annotations) through every screen."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from tracegraph.explorer.messages import EventChosen
from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.screens.step import StepScreen
from tracegraph.explorer.widgets.timeline import TimelineStrip

from .conftest import SIZE, make_app, pilot_test, settle


@pilot_test
async def test_whole_trace_step_timeline_and_a_kernel_launch(alexnet_db: Path) -> None:
    app = make_app(alexnet_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        steps = app.screen.query_one("#steps", DataTable)
        assert steps.row_count == 1 and str(steps.get_row_at(0)[0]) == "whole trace"
        await pilot.press("2")
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen) and step.window is not None
        assert step.window.step == -1 and step.window.id is None
        assert "No edge set" in str(step.query_one("#path-note", Static).render())
        strip = step.query_one(TimelineStrip)
        assert strip.timeline is not None
        gpu = sorted(lane.key for lane in strip.timeline.lanes if lane.kind == "gpu")
        assert gpu == ["GPU0 s20", "GPU0 s7"]
        kernel = app.store.run(
            "MATCH (r:Runtime)-[:LAUNCHES]->(k:Kernel) RETURN k.id AS k, r.id AS r LIMIT 1"
        ).table.to_pylist()[0]
        app.post_message(EventChosen(kernel["k"]))
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, InspectorScreen) and inspector.detail is not None
        rows = inspector.detail.neighbours.to_pylist()
        launched_by = [r["id"] for r in rows if r["direction"] == "launched by"]
        assert launched_by == [kernel["r"]]
        assert not any(r["relation"].startswith("DEP") for r in rows)


@pilot_test
async def test_a_cpu_only_run_says_no_gpu_rather_than_zero(tmp_path: Path) -> None:
    """The real 2-rank gloo job has no GPU: the overview says so, not "GPU busy 0.0%"."""
    import pytest

    import tracegraph

    from ..conftest import TRACES

    folder = TRACES / "cpu_ddp_2r"
    if not folder.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "cpu.kuzu"
    tracegraph.open(db).ingest(folder, run="cpu")
    app = make_app(db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ranks = app.screen.query_one("#ranks", DataTable)
        assert ranks.row_count == 2
        assert {str(ranks.get_cell(str(r), "busy")) for r in (0, 1)} == {"no GPU"}
