"""A real edge set (the native builder emulating HTA 0.5.0) on the step screen and inspector."""

from __future__ import annotations

from pathlib import Path

from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.screens.step import PATH_HEADERS, SEGMENT_HEADERS, StepScreen
from tracegraph.explorer.widgets.paged_table import PagedTable
from tracegraph.explorer.widgets.timeline import TimelineStrip

from .conftest import SIZE, make_app, pilot_test, settle


@pilot_test
async def test_native_critical_path_of_a_step_and_its_dep_neighbours(native_db: Path) -> None:
    app = make_app(native_db, mode="step")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen) and step.window is not None and step.path is not None
        assert step.path.edge_set == "native:hta-0.5.0"
        edges = step.path.edges
        assert edges.num_rows > 0
        orders = edges["path_order"].to_pylist()
        assert orders == sorted(orders)
        times = edges["src_time"].to_pylist()
        assert all(step.window.ts <= t < step.window.end for t in times)
        assert 0 < step.path.length_ns <= step.window.dur
        strip = step.query_one(TimelineStrip)
        assert strip.timeline is not None and strip.timeline.critical_ids
        table = step.query_one("#path", PagedTable)
        assert table.headers == SEGMENT_HEADERS  # the path in segments first
        table.focus()
        await pilot.press("t")  # then its edges one by one
        await settle(pilot)
        assert table.headers == PATH_HEADERS
        await pilot.press("enter")
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, InspectorScreen) and inspector.detail is not None
        assert inspector.detail.id == edges["src_id"][0].as_py()
        dep = [
            r
            for r in inspector.detail.neighbours.to_pylist()
            if r["relation"] == "DEP native:hta-0.5.0"
        ]
        assert any(r["detail"].endswith("(critical)") for r in dep)
