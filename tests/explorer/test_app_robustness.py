"""A database that cannot be explored is explained once; the quit keys work from every dialog.

Bad databases (an empty file, a Kuzu database without tables, the schema without runs) open on
an explanation that closing does not bring back; `q`, Ctrl+C and Ctrl+Q quit from every screen
and dialog (Ctrl+C / Ctrl+Q also where an Input takes `q` as text); `tracegraph explore` refuses a
missing path, a directory and an empty or non-Kuzu file with one line, exit 2. Nothing here
changes a database file.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import kuzu
import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, Static

from tracegraph.explorer import app as app_module
from tracegraph.explorer.app import TraceExplorer, close_store
from tracegraph.explorer.cli import main
from tracegraph.explorer.screens.console import ConsoleScreen
from tracegraph.explorer.screens.dialogs import (
    CannedPicker,
    ErrorDialog,
    HelpScreen,
    ParamsDialog,
    PromptDialog,
    UnusableDatabaseDialog,
)
from tracegraph.explorer.screens.overview import OverviewScreen
from tracegraph.explorer.screens.step import StepScreen
from tracegraph.explorer.widgets.cypher_editor import CypherEditor
from tracegraph.ingest.store import GraphStore

from .conftest import SIZE, make_app, pilot_test, settle

HINT = "tracegraph ingest TRACE --db"


def _zero_bytes(db: Path) -> None:
    db.touch()


def _no_tables(db: Path) -> None:
    kuzu.Database(str(db)).close()


def _no_runs(db: Path) -> None:
    store = GraphStore(db, read_only=False)
    store.create_schema()
    store.close()


BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "0-byte file": (_zero_bytes, "not a Kuzu database (0 bytes)"),
    "empty Kuzu database": (_no_tables, "is empty: it holds no tracegraph tables"),
    "schema, no runs": (_no_runs, "holds no runs yet"),
}


def _hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file in the folder (a new file, a WAL or a lock, shows up too)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _bad_db(tmp_path: Path, kind: str) -> Path:
    db = tmp_path / "x.kuzu"
    BAD[kind][0](db)
    return db


async def _quit_with(pilot: Pilot[object], key: str) -> None:
    await pilot.press(key)
    await pilot.pause()
    assert not pilot.app.is_running, f"{key} did not quit from {type(pilot.app.screen).__name__}"
    assert pilot.app.return_code == 0


def _status(app: TraceExplorer) -> str:
    return str(next(iter(app.screen.query(".status").results(Static))).render())


# ---- databases that cannot be explored ----------------------------------------------------------
@pytest.mark.parametrize("key", ["q", "ctrl+c"])
@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_database_is_explained_once_and_the_app_quits(
    tmp_path: Path, kind: str, key: str
) -> None:
    db = _bad_db(tmp_path, kind)
    before = _hashes(tmp_path)
    expected = BAD[kind][1]

    async def scenario() -> None:
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = app.screen
            assert isinstance(dialog, UnusableDatabaseDialog)
            text = str(dialog.query_one("#unusable-text", Static).render())
            assert expected in text and str(db) in text
            if kind != "0-byte file":
                assert HINT in text
            assert sum(isinstance(s, UnusableDatabaseDialog) for s in app.screen_stack) == 1
            await pilot.press("escape")
            await settle(pilot)
            # closed for good: the overview says why, and nothing reopens
            assert isinstance(app.screen, OverviewScreen)
            assert expected in _status(app)
            await pilot.press("ctrl+l")  # reload: the overview finds no run again, quietly
            await settle(pilot)
            assert isinstance(app.screen, OverviewScreen)
            await pilot.press("2")  # the step screen has no rank to show: its status says why
            await settle(pilot)
            assert isinstance(app.screen, StepScreen)
            assert expected in _status(app)
            for mode in ("f4", "f5", "f1"):  # F-keys: the console's editor takes 1-5 as text
                await pilot.press(mode)
                await settle(pilot)
                assert not isinstance(app.screen, (ErrorDialog, UnusableDatabaseDialog))
            assert isinstance(app.screen, OverviewScreen)
            await _quit_with(pilot, key)

    try:
        asyncio.run(scenario())
    finally:
        close_store(db)
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("key", ["enter", "q", "ctrl+q"])
def test_the_explanation_quits_on_enter_q_and_ctrl_q(tmp_path: Path, key: str) -> None:
    db = _bad_db(tmp_path, "schema, no runs")
    before = _hashes(tmp_path)

    async def scenario() -> None:
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, UnusableDatabaseDialog)
            await _quit_with(pilot, key)

    try:
        asyncio.run(scenario())
    finally:
        close_store(db)
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_database_is_explained_whatever_screen_the_app_starts_on(
    tmp_path: Path, kind: str
) -> None:
    db = _bad_db(tmp_path, kind)

    async def scenario() -> None:
        app = make_app(db, mode="console")
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, UnusableDatabaseDialog)
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, ConsoleScreen)
            # the console still answers what the database holds
            editor = app.screen.query_one(CypherEditor)
            editor.load_text("CALL show_tables() RETURN count(*) AS tables")
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, ConsoleScreen)
            await _quit_with(pilot, "ctrl+c")

    try:
        asyncio.run(scenario())
    finally:
        close_store(db)


# ---- every dialog of a normal database quits ----------------------------------------------------
@pytest.mark.parametrize("key", ["q", "ctrl+c", "ctrl+q"])
@pilot_test
async def test_quit_from_the_error_dialog(synthetic_db: Path, key: str) -> None:
    before = _hashes(synthetic_db.parent)
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.screen.query_one(CypherEditor).load_text("MATCH (n:NoSuchLabel) RETURN n")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ErrorDialog)
        await _quit_with(pilot, key)
    assert _hashes(synthetic_db.parent) == before


@pytest.mark.parametrize("key", ["ctrl+c", "ctrl+q"])
@pilot_test
async def test_quit_from_the_params_dialog_where_q_is_text(synthetic_db: Path, key: str) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.screen.query_one(CypherEditor).load_text(
            "MATCH (o:Op) WHERE o.name = $name RETURN count(*)"
        )
        await pilot.press("ctrl+r")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ParamsDialog)
        field = dialog.query_one("#param-name", Input)
        assert app.focused is field
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and field.value.endswith("q")  # typed, not quit
        await _quit_with(pilot, key)


@pilot_test
async def test_quit_from_the_canned_picker(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, CannedPicker)
        await _quit_with(pilot, "q")


@pilot_test
async def test_quit_from_a_prompt_dialog_where_q_is_text(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="inspector")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, PromptDialog)
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and dialog.query_one(Input).value == "q"
        await _quit_with(pilot, "ctrl+c")


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
@pilot_test
async def test_quit_from_help(synthetic_db: Path, key: str) -> None:
    app = make_app(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await _quit_with(pilot, key)


@pytest.mark.parametrize("key", ["ctrl+c", "ctrl+q"])
@pilot_test
async def test_quit_from_the_command_palette(synthetic_db: Path, key: str) -> None:
    app = make_app(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("q")  # a search
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, CommandPalette)
        await _quit_with(pilot, key)


@pilot_test
async def test_q_is_text_in_the_console_editor_and_quits_elsewhere(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        editor = app.screen.query_one(CypherEditor)
        editor.load_text("")
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and editor.text == "q"
        await pilot.press("1")  # typed too: the editor has the focus
        await pilot.pause()
        assert isinstance(app.screen, ConsoleScreen)
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        await _quit_with(pilot, "q")


@pilot_test
async def test_quit_the_palette_command(synthetic_db: Path) -> None:
    app = make_app(synthetic_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles.count("app: quit") == 1 and "Quit" not in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"quit")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert not app.is_running


def test_quitting_interrupts_a_running_query(synthetic_db: Path) -> None:
    slow = (
        "MATCH (a:Op), (b:Op), (c:Op), (d:Op) WHERE a.dur + b.dur + c.dur > d.dur RETURN count(*)"
    )

    async def scenario() -> None:
        app = make_app(synthetic_db, mode="console")
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            console = app.screen
            assert isinstance(console, ConsoleScreen)
            console.query_one(CypherEditor).load_text(slow)
            await pilot.press("ctrl+r")
            await pilot.pause(0.3)
            assert console.running
            await _quit_with(pilot, "ctrl+c")

    started = time.perf_counter()
    asyncio.run(scenario())  # returns once the query's worker thread ended
    assert time.perf_counter() - started < 10  # not the 20 s timeout of the test store


def test_a_screen_whose_load_fails_for_good_does_not_reopen_its_error(
    synthetic_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracegraph.explorer.screens import overview

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the step scan failed")

    monkeypatch.setattr(overview, "run_overview", broken)

    async def scenario() -> None:
        app = make_app(synthetic_db)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, ErrorDialog)
            assert "the step scan failed" in app.screen.message
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, OverviewScreen)  # not reopened by the resume
            await pilot.press("ctrl+l")  # asked again: it says so again
            await settle(pilot)
            assert isinstance(app.screen, ErrorDialog)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, OverviewScreen)
            await _quit_with(pilot, "q")

    asyncio.run(scenario())


# ---- `tracegraph explore` refuses what is no Kuzu database ---------------------------------------
def _not_a_kuzu_file(db: Path) -> None:
    db.write_text('{"traceEvents": []}')


REFUSED: dict[str, tuple[Callable[[Path], None] | None, str]] = {
    "missing": (None, "no such database"),
    "directory": (Path.mkdir, "a directory, not a Kuzu database file"),
    "0-byte file": (_zero_bytes, "not a Kuzu database (0 bytes)"),
    "non-Kuzu file": (_not_a_kuzu_file, "not a Kuzu database (19 bytes, without Kuzu's header)"),
}


@pytest.fixture
def no_app(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Stands in for the TUI: the dbs `tracegraph explore` would open."""
    opened: list[Path] = []

    def run_app(db: Path, *args: object, **kwargs: object) -> int:
        opened.append(db)
        return 0

    monkeypatch.setattr(app_module, "run_app", run_app)
    return opened


@pytest.mark.parametrize("kind", list(REFUSED))
def test_explore_refuses_what_is_no_kuzu_database(
    tmp_path: Path, kind: str, no_app: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.kuzu"
    make, message = REFUSED[kind]
    if make is not None:
        make(db)
    before = _hashes(tmp_path)
    code = main(["explore", str(db)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and no_app == []
    assert err.count("\n") == 1 and err.startswith("tracegraph: error: ")
    assert f"{db}: {message}" in err
    assert _hashes(tmp_path) == before


@pytest.mark.parametrize("kind", ["empty Kuzu database", "schema, no runs"])
def test_explore_opens_a_kuzu_database_without_runs_to_explain_it(
    tmp_path: Path, kind: str, no_app: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = _bad_db(tmp_path, kind)
    assert main(["explore", str(db)]) == 0
    assert no_app == [db]
