"""The report screen: findings of the synthetic run (launch-bound by construction), their
detail, and Enter opening the first evidence event in the inspector."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Static

from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.screens.report import ReportScreen
from tracegraph.queries.report import build_report

from .conftest import SIZE, make_app, pilot_test, settle


async def _open_report(app, pilot) -> ReportScreen:  # noqa: ANN001
    """The Report screen (key 6), its report loaded."""
    await settle(pilot)
    await pilot.press("6")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, ReportScreen) and screen.report is not None
    return screen


@pilot_test
async def test_findings_open_their_evidence_in_the_inspector(synthetic_db: Path) -> None:
    app = make_app(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_report(app, pilot)
        want = build_report(synthetic_db, app.store, screen.report.run)
        assert [f.kind for f in screen.report.findings] == [f.kind for f in want.findings]
        table = screen.query_one("#findings", DataTable)
        assert table.row_count == len(want.findings) > 0
        first = want.findings[0]
        assert first.title in str(screen.query_one("#finding-detail", Static).render())
        steps = screen.query_one("#steps", DataTable)
        assert steps.row_count == want.tables["steps"].num_rows > 0
        assert table.has_focus  # the arrow keys move in the findings at once, without Tab
        row = next(i for i, f in enumerate(want.findings) if f.evidence_ids)
        for _ in range(row):
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, InspectorScreen)
        assert app.focus_state.event_id == want.findings[row].evidence_ids[0]


@pilot_test
async def test_operators_roofline_modules_and_memory_tabs(tmp_path: Path) -> None:
    """On a real H100 step (shapes, python stacks, [memory] events): the Operators, Roofline,
    Modules and Memory tabs hold the report's rows, the module tree as an outline."""
    import tracegraph

    from ..conftest import TRACES

    trace = TRACES / "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    if not trace.is_file():
        import pytest

        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "h100.kuzu"
    tracegraph.open(db).ingest(trace, run="h100")
    app = make_app(db)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_report(app, pilot)
        for name in ("op_shapes", "op_perf", "module_tree", "allocator"):
            table = screen.query_one(f"#{name}", DataTable)
            assert table.row_count == screen.report.tables[name].num_rows > 0, name
        modules = screen.query_one("#module_tree", DataTable)
        assert str(modules.get_row_at(0)[1]) == "Qwen2Model_0"
        assert str(modules.get_row_at(1)[1]) == "  Embedding_0"  # indented under its parent
