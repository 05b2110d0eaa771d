"""Screens look the same however they were built and shown: the shortcuts that spare Textual's
restyling (explorer/screens/base.py) and the footer's skipped rebuilds leave no stale styles."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from tracegraph.explorer.app import TraceExplorer

from .conftest import SIZE, make_app, pilot_test, settle


async def _restyled(pilot: Pilot[object]) -> str:
    """The screen after Textual restyled all of it, as a screenshot."""
    pilot.app.screen.update_node_styles(animate=False)
    pilot.app.screen.refresh(layout=True)
    await settle(pilot)
    return pilot.app.export_screenshot()


async def _round_trip(pilot: Pilot[object], key: str, away: str, theme: str | None) -> None:
    await pilot.press(away)
    await settle(pilot)
    if theme is not None:
        pilot.app.theme = theme
        await settle(pilot)
    await pilot.press(key)
    await settle(pilot)


@pytest.mark.parametrize("theme", [None, "textual-light"])
@pytest.mark.parametrize("warm_up", [False, True])
@pilot_test
async def test_a_screen_shown_again_is_styled_as_anew(
    synthetic_db: Path, warm_up: bool, theme: str | None
) -> None:
    app: TraceExplorer = make_app(synthetic_db, warm_up=warm_up)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        while warm_up and not app.warmed:
            await pilot.pause(0.05)
        await _round_trip(pilot, "2", "1", None)  # step: built, shown, left
        await _round_trip(pilot, "1", "2", theme)  # the overview again, the theme changed away
        shown = app.export_screenshot()
        assert shown == await _restyled(pilot)
        await pilot.press("2")
        await settle(pilot)
        shown = app.export_screenshot()
        assert shown == await _restyled(pilot)
