"""The query console: canned queries with parameters, errors, Esc, paging, history, CSV export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from tracegraph.explorer.screens.console import ConsoleScreen
from tracegraph.explorer.screens.dialogs import (
    CannedPicker,
    ErrorDialog,
    ParamsDialog,
    PromptDialog,
)
from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.widgets.cypher_editor import CypherEditor, completions
from tracegraph.explorer.widgets.paged_table import PagedTable
from tracegraph.queries.catalog import canned_query

from .conftest import SIZE, make_app, pilot_test, settle

SLOW = "MATCH (a:Op), (b:Op), (c:Op), (d:Op) WHERE a.dur + b.dur + c.dur > d.dur RETURN count(*)"


async def _console(pilot: Pilot[object]) -> ConsoleScreen:
    await settle(pilot)
    pilot.app.update_focus(run="syn")  # type: ignore[attr-defined]
    screen = pilot.app.screen
    assert isinstance(screen, ConsoleScreen)
    return screen


@pilot_test
async def test_canned_query_with_parameters(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, CannedPicker)
        options = picker.query_one(OptionList)
        options.highlighted = list(picker.queries).index("top-kernels")
        await pilot.press("enter")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ParamsDialog)
        assert dialog.query_one("#param-run", Input).value == "syn"  # the run in focus
        dialog.query_one("#param-rank", Input).value = "1"
        dialog.query_one("#param-rank", Input).focus()
        await pilot.pause()
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is console
        results = console.query_one("#results", PagedTable)
        assert results.data is not None and results.data.num_rows > 0
        assert results.data.column_names == canned_query("top-kernels").columns
        assert console.query_one(CypherEditor).query_history[-1].startswith("MATCH (k:Kernel)")


@pilot_test
async def test_a_bad_query_shows_an_error_and_the_app_carries_on(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        editor.load_text("MATCH (n:NoSuchLabel) RETURN n")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ErrorDialog)
        assert "NoSuchLabel" in app.screen.message
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is console
        editor.load_text("MATCH (k:Kernel) RETURN k.id AS id, k.name AS name ORDER BY id")
        await pilot.press("ctrl+r")
        await settle(pilot)
        results = console.query_one("#results", PagedTable)
        assert results.data is not None and results.data.num_rows == 140
        assert results.row_count == 100  # the first page
        await pilot.press("ctrl+n")
        assert results.page == 1 and results.row_count == 40
        await pilot.press("ctrl+b")
        assert results.page == 0
        results.focus()
        await pilot.press("down", "enter")  # a row with an id opens in the inspector
        await settle(pilot)
        assert isinstance(app.screen, InspectorScreen)
        assert app.screen.detail is not None
        assert app.screen.detail.id == results.data["id"][1].as_py()


@pilot_test
async def test_escape_interrupts_then_history_and_csv_export(
    synthetic_db: Path, tmp_path: Path
) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        editor.load_text(SLOW)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert console.running
        await pilot.press("escape")
        await settle(pilot)
        assert not console.running
        assert "query interrupted" in str(console.query_one("#console-status").render())
        assert not isinstance(app.screen, ErrorDialog)
        for n in (1, 2):  # the connection still works
            editor.load_text(f"MATCH (k:Rank) RETURN k.rank AS rank, {n} AS n ORDER BY rank")
            await pilot.press("ctrl+r")
            await settle(pilot)
        await pilot.press("ctrl+up")
        assert editor.text.endswith("1 AS n ORDER BY rank")
        await pilot.press("ctrl+up")
        assert editor.text == SLOW
        await pilot.press("ctrl+down", "ctrl+down")
        assert editor.text.endswith("2 AS n ORDER BY rank")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PromptDialog)
        target = tmp_path / "ranks.csv"
        app.screen.query_one(Input).value = str(target)
        await pilot.press("enter")
        await settle(pilot)
        with target.open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows == [{"rank": "0", "n": "2"}, {"rank": "1", "n": "2"}]


@pilot_test
async def test_editor_completes_labels_and_properties(synthetic_db: Path) -> None:
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        editor.load_text("")
        editor.focus()
        await pilot.press(*"MATCH (k:Ker")
        assert editor.suggestion == "nel"
        await pilot.press("tab")
        await pilot.press(*") RETURN k.str")
        await pilot.press("tab")
        assert editor.text == "MATCH (k:Kernel) RETURN k.stream"


def test_completions_by_context() -> None:
    assert completions("MATCH (r:Run", "") == ["Runtime"]
    assert "LAUNCHES" in completions("MATCH (a)-[:LA", "")
    text = "MATCH (o:Op) RETURN o.st"
    assert completions(text, text) == []  # Op has no `stream`
    text = "MATCH (k:Kernel) RETURN k.st"
    assert completions(text, text) == ["stream"]
    assert completions("MATCH (k) WHERE k.na", "") == ["name"]
    assert completions("MATCH (k) RET", "") == ["RETURN"]
    assert completions("MATCH (k) ", "") == []


@pilot_test
async def test_a_query_that_would_harm_the_database_is_refused_before_kuzu(
    synthetic_db: Path,
) -> None:
    before = _files(synthetic_db)
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        for cypher, says in (
            ("CHECKPOINT", "not allowed"),
            ("LOAD FROM '/etc/passwd' (file_format='csv') RETURN *", "--allow-files"),
        ):
            editor.load_text(cypher)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, ErrorDialog)
            assert says in app.screen.message
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is console
    after = _files(synthetic_db)
    assert after == before  # no .shadow / .wal left behind, the file unchanged


def _files(db: Path) -> dict[str, bytes]:
    """Every file of the database (the file, and any .wal / .shadow beside it)."""
    return {p.name: p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file()}


@pilot_test
async def test_the_history_is_kept_between_sessions(synthetic_db: Path, _console_history) -> None:
    """A query run in one session is the first Ctrl+↑ of the next (and the file is the only
    state: each test has its own)."""
    query = "MATCH (k:Kernel) RETURN count(*) AS kernels"
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        editor = app.screen.query_one(CypherEditor)
        editor.load_text(query)
        await pilot.press("ctrl+r")
        await settle(pilot)
    assert json.loads(_console_history.read_text()) == [query]
    again = make_app(synthetic_db, mode="console")
    async with again.run_test(size=SIZE) as pilot:
        await settle(pilot)
        editor = again.screen.query_one(CypherEditor)
        await pilot.press("ctrl+up")
        assert editor.text == query


@pilot_test
async def test_an_export_never_replaces_the_database(synthetic_db: Path) -> None:
    """Issue #22: a CSV exported to the database's own path replaced the database."""
    before = _files(synthetic_db)
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        console.query_one(CypherEditor).load_text("RETURN 'overwritten' AS x")
        await pilot.press("ctrl+r")
        await settle(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, PromptDialog)
        app.screen.query_one(Input).value = str(synthetic_db)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ErrorDialog)
        assert "is a Kuzu database" in app.screen.message
    assert _files(synthetic_db) == before


@pilot_test
async def test_a_served_console_keeps_no_history_file_and_asks_for_no_path(
    synthetic_db: Path, _console_history
) -> None:
    """For a browser client (`serve`): the history starts empty and stays in the tab, and an
    export is a download (its delivery is tested through a real server in test_serve.py)."""
    _console_history.write_text(json.dumps(["MATCH (n:Op) RETURN 'the server user's' AS q"]))
    app = make_app(synthetic_db, mode="console", served=True)
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        assert editor.query_history == []
        editor.load_text("RETURN 1 AS one")
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert editor.query_history == ["RETURN 1 AS one"]
        delivered: list[str | None] = []
        app.deliver_binary = lambda data, **kw: delivered.append(kw.get("save_filename"))
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, PromptDialog) and delivered == ["tracegraph-result.csv"]
    assert json.loads(_console_history.read_text()) == [
        "MATCH (n:Op) RETURN 'the server user's' AS q"
    ]


@pilot_test
async def test_the_console_starts_empty_and_f_keys_leave_it(synthetic_db: Path) -> None:
    """Typing goes into an empty editor (the example is Ctrl+T away, Ctrl+L clears); digits are
    text there, and the F-keys still switch screens (the editor binds F6 and F7 itself)."""
    app = make_app(synthetic_db, mode="console")
    async with app.run_test(size=SIZE) as pilot:
        console = await _console(pilot)
        editor = console.query_one(CypherEditor)
        assert editor.text == "" and editor.has_focus
        await pilot.press("R", "E", "T", "U", "R", "N", "space", "6")
        assert editor.text == "RETURN 6" and app.screen is console  # "6" typed, not Report
        await pilot.press("ctrl+l")
        assert editor.text == ""
        await pilot.press("ctrl+t")
        assert editor.text.startswith("MATCH (k:Kernel) WHERE k.run = $run")
        await pilot.press("f6")
        await settle(pilot)
        assert app.current_mode == "report"
        await pilot.press("f5")
        await settle(pilot)
        assert app.current_mode == "console"
