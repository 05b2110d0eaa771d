"""The step screen's critical path, and following edges and back in the event inspector."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from textual.widgets import DataTable, Input

from tracegraph.explorer.screens.dialogs import ErrorDialog, PromptDialog
from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.screens.step import StepScreen
from tracegraph.explorer.widgets.paged_table import PagedTable

from .conftest import SIZE, make_app, pilot_test, settle


def _row_of(screen: InspectorScreen, relation: str, direction: str) -> int:
    assert screen.detail is not None
    rows = screen.detail.neighbours.to_pylist()
    return next(
        i for i, r in enumerate(rows) if (r["relation"], r["direction"]) == (relation, direction)
    )


@pilot_test
async def test_critical_path_rows_open_in_the_inspector_and_edges_follow_back(
    edges_db: Path,
) -> None:
    app = make_app(edges_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen) and step.path is not None
        assert step.path.edge_set == "fake-a"
        assert step.path.edges.num_rows > 0
        assert set(step.path.edges["type"].to_pylist()) == {"kernel_kernel_delay"}
        orders = step.path.edges["path_order"].to_pylist()
        assert orders == sorted(orders)
        await pilot.press("e")  # the next edge set also marks the syncs
        await settle(pilot)
        assert step.path.edge_set == "fake-b"
        assert "sync_dependency" in set(step.path.edges["type"].to_pylist())
        table = step.query_one("#path", PagedTable)
        table.focus()
        await pilot.press("enter")
        await settle(pilot)
        inspector = app.screen
        assert isinstance(inspector, InspectorScreen) and inspector.detail is not None
        first = inspector.detail
        assert first.id == step.path.edges["src_id"][0].as_py()
        assert first.label == "Kernel"
        relations = set(first.neighbours["relation"].to_pylist())
        assert {"LAUNCHES", "NEXT_ON_STREAM"} <= relations
        named = {s for r in relations if r.startswith("DEP ") for s in r[4:].split(", ")}
        assert {"fake-a", "fake-b"} <= named  # an edge both sets hold: one row naming both
        deps = [n for n in first.neighbours.to_pylist() if n["relation"].startswith("DEP ")]
        keys = [(n["direction"], n["id"], n["detail"]) for n in deps]
        assert len(keys) == len(set(keys))

        neighbours = inspector.query_one("#neighbours", DataTable)
        neighbours.move_cursor(row=_row_of(inspector, "LAUNCHES", "launched by"))
        await pilot.press("enter")
        await settle(pilot)
        launch = inspector.detail
        assert launch is not None and launch.label == "Runtime"
        assert inspector.back_stack == [first.id]
        neighbours.move_cursor(row=_row_of(inspector, "CALLS", "parent"))
        await pilot.press("enter")
        await settle(pilot)
        assert inspector.detail is not None and inspector.detail.label == "Op"
        await pilot.press("backspace")
        await settle(pilot)
        assert inspector.detail is not None and inspector.detail.id == launch.id
        await pilot.press("b")
        await settle(pilot)
        assert inspector.detail is not None and inspector.detail.id == first.id
        assert inspector.back_stack == []


@pilot_test
async def test_go_to_events_collective_peers_and_an_unknown_id(edges_db: Path) -> None:
    app = make_app(edges_db, mode="inspector")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        nccl = app.store.run(
            "MATCH (k:Kernel)-[:PART_OF]->(:Collective) WHERE k.rank = 0 RETURN k.id AS id, "
            "k.ev_idx AS ev LIMIT 1"
        ).table.to_pylist()[0]
        app.update_focus(run="syn")
        for value in (f"0/{nccl['ev']}", "12345"):  # rank/ev_idx, then an id no event has
            await pilot.press("g")
            await pilot.pause()
            assert isinstance(app.screen, PromptDialog)
            app.screen.query_one(Input).value = value
            await pilot.press("enter")
            await settle(pilot)
        assert isinstance(app.screen, ErrorDialog)  # a dialog, not a crash
        await pilot.press("escape")
        await pilot.pause()
        inspector = app.screen
        assert isinstance(inspector, InspectorScreen) and inspector.detail is not None
        assert inspector.detail.id == nccl["id"] and inspector.back_stack == []
        rows = inspector.detail.neighbours.to_pylist()
        assert any(r["direction"] == "collective" for r in rows)
        peers = [r for r in rows if r["direction"] == "peer"]
        assert peers and all(r["rank"] == 1 for r in peers)
        inspector.query_one("#neighbours", DataTable).move_cursor(
            row=_row_of(inspector, "PART_OF", "peer")
        )
        await pilot.press("enter")
        await settle(pilot)
        assert inspector.detail.id == peers[0]["id"]
        assert inspector.back_stack == [nccl["id"]]


def test_a_neighbour_several_edge_sets_agree_on_is_listed_once() -> None:
    from tracegraph.explorer.screens.inspector import grouped_by_edge_set

    def row(relation: str, i: int, detail: str) -> dict:
        return {"relation": relation, "direction": "to", "id": i, "label": "Kernel", "rank": 0,
                "name": f"k{i}", "ts": i, "dur": 1, "detail": detail}  # fmt: skip

    table = pa.Table.from_pylist(
        [
            row("LAUNCHES", 1, ""),
            row("DEP hta-0.5.0", 1, "kernel_launch_delay start→start (critical)"),
            row("DEP hta-0.5.0", 2, "kernel_kernel_delay end→start"),
            row("DEP native", 1, "kernel_launch_delay start→start (critical)"),
            row("DEP native", 2, "kernel_kernel_delay end→start (critical)"),
            row("DEP traceinsight-0.6.1", 1, "kernel_launch_delay start→start (critical)"),
        ]
    )
    got = grouped_by_edge_set(table).to_pylist()
    assert [(r["relation"], r["id"]) for r in got] == [
        ("LAUNCHES", 1),
        ("DEP hta-0.5.0, native, traceinsight-0.6.1", 1),
        ("DEP hta-0.5.0", 2),  # not critical there: another edge than native's
        ("DEP native", 2),
    ]
