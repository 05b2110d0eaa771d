"""Overview → step → timeline → inspector, screen switching at 80x24, help, palette, keymaps."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets._footer import FooterKey

from tracegraph.explorer import keymap
from tracegraph.explorer.app import TraceExplorer
from tracegraph.explorer.screens.dialogs import HelpScreen, PromptDialog
from tracegraph.explorer.screens.overview import OverviewScreen
from tracegraph.explorer.screens.step import StepScreen
from tracegraph.explorer.widgets.timeline import TimelineStrip
from tracegraph.queries.overview import run_overview
from tracegraph.queries.runs import list_runs

from .conftest import SIZE, make_app, pilot_test, settle


def _text(app: TraceExplorer, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


@pilot_test
async def test_overview_to_the_slowest_rank_of_a_step_and_its_timeline(synthetic_db: Path) -> None:
    app = make_app(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        expected = run_overview(app.store, list_runs(app.store)[0])
        steps = overview.query_one("#steps", DataTable)
        ranks = overview.query_one("#ranks", DataTable)
        assert steps.row_count == 2 and ranks.row_count == 2
        for i, row in enumerate(expected.steps.to_pylist()):
            times = expected.step_times.filter(pc.equal(expected.step_times["step"], row["step"]))
            slowest = times["rank"][pc.index(times["dur"], pc.max(times["dur"])).as_py()].as_py()
            assert str(steps.get_row_at(i)[7]) == f"rank {slowest}"
            assert "red" in str(ranks.get_cell(str(slowest), f"step{row['step']}").style)
        assert all(str(ranks.get_row_at(i)[-1]).endswith("%") for i in range(2))  # GPU busy
        assert "run syn" in _text(app, "#run-line").replace("[b]", "")

        steps.focus()
        await pilot.press("down", "enter")  # step 1 → its slowest rank
        await settle(pilot)
        step = app.screen
        assert isinstance(step, StepScreen) and step.window is not None
        assert step.window.step == 1
        assert step.window.rank == int(str(steps.get_row_at(1)[7]).split()[-1])
        assert "No edge set" in _text(app, "#path-note")
        strip = step.query_one(TimelineStrip)
        assert strip.timeline is not None
        assert {lane.kind for lane in strip.timeline.lanes} == {"cpu", "gpu"}
        full = strip.view_end - strip.view_start
        await pilot.press("plus")  # the step screen's keys drive the strip
        assert strip.view_end - strip.view_start < full
        start = strip.view_start
        await pilot.press("right_square_bracket")
        assert strip.view_start > start
        await pilot.press("0")
        assert strip.view_end - strip.view_start == full
        await pilot.press("comma")
        await settle(pilot)
        assert step.window.step == 0
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PromptDialog)
        app.screen.query_one(Input).value = "0"
        await pilot.press("enter")
        await settle(pilot)
        assert (step.window.rank, step.window.step) == (0, 0)

        strip.focus()  # the strip's own keys: lanes, zoom, pan, Enter inspects
        await pilot.press("down", "down")
        assert strip.timeline.lanes[strip.lane].kind == "gpu"
        await pilot.press("plus", "plus", "left", "right", "l")
        hit = strip.event_at_cursor()
        while hit is None:
            await pilot.press("right")
            hit = strip.event_at_cursor()
        await pilot.press("enter")
        await settle(pilot)
        assert app.current_mode == "inspector"
        assert app.focus_state.event_id == hit[0]


@pilot_test
async def test_screens_at_80x24_help_palette_and_user_keys(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, keys={"app.console": "f6"})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key, mode in (("2", "step"), ("3", "inspector"), ("4", "diff"), ("f6", "console")):
            await pilot.press(key)
            await settle(pilot)
            assert app.current_mode == mode
            footer = app.screen.query_one(Footer)
            assert footer.region.bottom == 24 and footer.region.height == 1
            _screens_and_help_in_view(footer)
            if mode == "step":  # the timeline's eight keys fill the line: still in view
                app.screen.query_one(TimelineStrip).focus()
                await settle(pilot)
                _screens_and_help_in_view(app.screen.query_one(Footer))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "query: run" in titles and "overview: open step" not in titles
        await pilot.press("f1")
        await settle(pilot)
        assert app.current_mode == "overview"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "screen: query console" in titles and "overview: open step" in titles
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text", Static).render())
        assert "overview: open step" in text and "screen: query console" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


def _screens_and_help_in_view(footer: Footer, width: int = 80) -> None:
    """The footer's screen keys and Help lie inside the terminal's width, whatever else the
    screen binds."""
    keys = {key.description: key.region for key in footer.query(FooterKey)}
    screens = "Screens" if "Screens" in keys else "Overview"  # the six as one, or each
    for description in (screens, "Help"):
        assert description in keys and 0 < keys[description].right <= width, sorted(keys)


@pilot_test
async def test_the_step_timelines_keys_leave_the_screen_keys_and_help_in_view(
    synthetic_db: Path,
) -> None:
    """Focused, the step timeline adds eight keys of its own: at 200 columns too many to show
    with the six screen keys and Help, which then come first, as at 80."""
    app = make_app(synthetic_db)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        _screens_and_help_in_view(app.screen.query_one(Footer), 200)
        app.screen.query_one(TimelineStrip).focus()
        await settle(pilot)
        footer = app.screen.query_one(Footer)
        keys = {key.description: key.region for key in footer.query(FooterKey)}
        assert "Screens" in keys and "Zoom in" in keys  # the screen keys as one
        assert 0 < keys["Help"].right <= 200 and 0 < keys["Screens"].right <= 200


def test_keymap_ids_are_unique_and_documented(tmp_path: Path) -> None:
    ids = [keymap.binding_id(s, k) for s, specs in keymap.KEYMAP.items() for k in specs]
    assert len(ids) == len(set(ids))
    table = keymap.markdown_table()
    assert all(spec.command in table for specs in keymap.KEYMAP.values() for spec in specs)
    bad = tmp_path / "keys.json"
    bad.write_text('{"app.nope": "x"}')
    try:
        keymap.load_keymap(bad)
    except ValueError as exc:
        assert "app.nope" in str(exc)
    else:
        raise AssertionError("unknown binding id accepted")
    assert keymap.key_label("ctrl+up,alt+up") == "Ctrl+↑ / Alt+↑"


@pilot_test
async def test_a_toml_keymap_rebinds_keys(synthetic_db: Path, tmp_path: Path) -> None:
    """`explore --keymap keys.toml`: the console opens with F7 instead of 5."""
    keys = tmp_path / "keys.toml"
    keys.write_text('"app.console" = "f7"\n')
    app = make_app(synthetic_db, keys=keymap.load_keymap(keys))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f7")
        await settle(pilot)
        assert type(app.screen).__name__ == "ConsoleScreen"


def test_a_keymap_file_that_cannot_be_used_is_one_line(tmp_path: Path, capsys) -> None:
    from tracegraph.explorer.cli import main

    db = tmp_path / "x.kuzu"
    bad = tmp_path / "keys.toml"
    bad.write_text("this is = not toml =")
    from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank

    write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "t")
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["explore", str(db), "--keymap", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tracegraph: error: {bad}: cannot read the keymap") and "\n" not in err
