"""Every screen at 80x24 and 200x50, on the synthetic run and on a real trace (alexnet).

pytest-textual-snapshot compares SVG screenshots with tests/explorer/__snapshots__/. After a
deliberate change of the UI, regenerate them (`pytest tests/explorer/test_snapshots.py
--snapshot-update`) and look at each. The pictures depend on the data alone: timings read
"<time>", the subtitle names the database file (not its temporary folder), toasts are cleared,
no text field has the focus (a cursor blinks), and every worker has finished first.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, TabbedContent

from tracegraph.explorer import screens
from tracegraph.explorer.messages import EventChosen
from tracegraph.explorer.screens.dialogs import CannedPicker, ParamsDialog
from tracegraph.explorer.widgets.paged_table import PagedTable

from .conftest import make_app, settle

pytest.importorskip("pytest_textual_snapshot", reason="the `test` extra installs the plugin")

SIZES = {"80x24": (80, 24), "200x50": (200, 50)}
SCREENS = ("overview", "step", "inspector", "diff", "console", "report")
# the synthetic run without edge sets, except where a screen shows them
SYNTHETIC_DB = {"step": "edges_db", "diff": "edges_db"}


@pytest.fixture(autouse=True)
def _same_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elapsed times in status lines and toasts as "<time>" (they differ from run to run), and
    colours whatever the terminal asks for (Textual drops them under NO_COLOR)."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    for info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{info.name}")
        if hasattr(module, "duration"):
            monkeypatch.setattr(module, "duration", lambda seconds: "<time>")


async def _loaded(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    await pilot.pause(0.1)  # past the short delay of a mode switch's refresh


async def _inspector(pilot: Pilot[Any]) -> None:
    """The longest kernel, opened as the other screens open an event."""
    app: Any = pilot.app
    longest = app.store.run(
        "MATCH (k:Kernel) RETURN k.id AS id ORDER BY k.dur DESC, k.id LIMIT 1"
    ).table["id"][0]
    app.post_message(EventChosen(longest.as_py()))


async def _diff(pilot: Pilot[Any]) -> None:
    """Compare the first two edge sets (where there are two) and show the differing edges."""
    await pilot.press("c")
    await _loaded(pilot)
    pilot.app.screen.query_one(TabbedContent).active = "tab-edges"
    await pilot.pause()
    pilot.app.screen.query_one("#edges", PagedTable).focus()


async def _console(pilot: Pilot[Any]) -> None:
    """The canned top-kernels query of rank 0, picked and run as a user does."""
    app: Any = pilot.app
    app.update_focus(run=app.runs()[0].name)
    await pilot.press("ctrl+o")
    await pilot.pause()
    picker = app.screen
    assert isinstance(picker, CannedPicker)
    picker.query_one(OptionList).highlighted = list(picker.queries).index("top-kernels")
    await pilot.press("enter")
    await pilot.pause()
    dialog = app.screen
    assert isinstance(dialog, ParamsDialog)
    rank = dialog.query_one("#param-rank", Input)
    rank.value = "0"
    rank.focus()
    await pilot.pause()
    await pilot.press("enter")
    await _loaded(pilot)
    app.screen.query_one("#results", PagedTable).focus()  # the editor's cursor would blink


async def _nothing(pilot: Pilot[Any]) -> None:
    pass


OPEN: dict[str, Callable[[Pilot[Any]], Any]] = {
    "inspector": _inspector,
    "diff": _diff,
    "console": _console,
}


def _screen_in(screen: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _loaded(pilot)
        await OPEN.get(screen, _nothing)(pilot)
        await _loaded(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("trace", ["synthetic", "alexnet"])
def test_screen(
    trace: str, screen: str, size: str, request: pytest.FixtureRequest, snap_compare: Any
) -> None:
    fixture = "alexnet_db" if trace == "alexnet" else SYNTHETIC_DB.get(screen, "synthetic_db")
    db: Path = request.getfixturevalue(fixture)
    # the inspector is opened from the overview, like Enter on an event elsewhere
    mode = "overview" if screen == "inspector" else screen
    app = make_app(db, mode=mode)
    app.sub_title = db.name  # not the session's temporary folder
    assert snap_compare(app, terminal_size=SIZES[size], run_before=_screen_in(screen))
