"""Widgets whose size follows their content even when it changes twice before a layout.

Textual 8.2 keys a widget's cached box model on a counter that only the first layout request
between two layouts increments. When another widget's layout runs in between ("loading…" shown,
then the loaded text), the box model of the first text stays cached and the widget keeps its
old height: a two-line status shown on one line. These widgets increment it on every request.
"""

from __future__ import annotations

from typing import Self

from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static


class FreshLayout(Widget):
    """Mixin, listed after the widget class (whose name the CSS matches): every
    `refresh(layout=True)` invalidates the cached box model."""

    def refresh(
        self,
        *regions: Region,
        repaint: bool = True,
        layout: bool = False,
        recompose: bool = False,
    ) -> Self:
        if layout:
            self._layout_updates += 1
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class StatusLine(Static, FreshLayout):
    """A Static (status lines, notes, details) laid out anew whenever its text changes."""
