"""Textual's Footer, rebuilt only when the keys it shows change.

Textual recomposes the footer (a widget per key, each styled anew) whenever the screen's bindings
are refreshed: on every mode switch, focus move and table fill, two to four times per screen
shown, 20-70 ms each on a busy UI thread. Most of those refreshes leave the shown keys as they
were; this footer keeps its keys then.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

COMPACT_BELOW = 120  # columns: a narrower terminal gets the compact footer (every key fits)


class StableFooter(Footer):
    """A Footer that skips recomposing to the keys it already shows, compact where the terminal
    is narrow (at 80 columns the screen keys, Help and the palette fit only so)."""

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < COMPACT_BELOW
        self.compact = narrow
        # Ctrl+P still opens the palette (the Help screen lists it): its key gives way to the
        # screens' keys
        self.show_command_palette = not narrow

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._composed: object = None  # what the last compose showed

    def _keys_shown(self) -> object:
        """What Footer.compose reads: the shown bindings (enabled, tooltip, key display) and the
        command palette's key."""
        if not self._bindings_ready:
            return None
        app = self.app
        bindings = self.screen.active_bindings
        palette = bindings.get(app.COMMAND_PALETTE_BINDING)
        return (
            tuple(
                (binding, enabled, tooltip, app.get_key_display(binding))
                for (_, binding, enabled, tooltip) in bindings.values()
                if binding.show
            ),
            palette[1:] if palette else None,
            self.show_command_palette and app.ENABLE_COMMAND_PALETTE,
            self.compact,
        )

    async def recompose(self) -> None:
        if self._composed is not None and self._keys_shown() == self._composed:
            return
        await super().recompose()

    def compose(self) -> ComposeResult:
        self._composed = self._keys_shown()
        screens_shown = False
        for widget in super().compose():
            if self.compact and isinstance(widget, FooterKey) and "switch_mode" in widget.action:
                # narrow: the six screen keys as one (the Help screen lists them)
                if not screens_shown:
                    screens_shown = True
                    yield FooterKey(widget.key, "1-6", "Screens", widget.action)
                continue
            if isinstance(widget, FooterKey) and "compact" in (widget._reactive_connect or ()):
                # A key bound to our `compact` would be styled compact (its default) as it
                # mounts, then not compact (the binding): two restylings per key for nothing.
                # (The palette's key is not bound: it stays compact.)
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget
