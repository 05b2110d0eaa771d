"""Textual's Footer, rebuilt only when the keys it shows change.

Textual recomposes the footer (a widget per key, each styled anew) whenever the screen's bindings
are refreshed: on every mode switch, focus move and table fill, two to four times per screen
shown, 20-70 ms each on a busy UI thread. Most of those refreshes leave the shown keys as they
were; this footer keeps its keys then.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

HELP_ACTIONS = ("help", "app.help")  # the Help key's action, bound on the app or a screen
COMPACT_BELOW = 120  # columns: a narrower terminal gets the compact footer (every key fits)


class StableFooter(Footer):
    """A Footer that skips recomposing to the keys it already shows, compact where the terminal
    is narrow (at 80 columns the screen keys, Help and the palette fit only so), and where the
    keys do not fit on one line the screen keys and Help first: never cut off. While a text
    field has focus it shows the F-keys that still switch screens and open Help."""

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < COMPACT_BELOW
        self.compact = narrow
        # Ctrl+P still opens the palette (the Help screen lists it): its key gives way to the
        # screens' keys
        self.show_command_palette = not narrow
        # whether the keys fit side by side depends on the width: compose again if it changed
        # that (recompose itself skips when it did not)
        self.call_after_refresh(self.recompose)

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
            app.size.width,
        )

    async def recompose(self) -> None:
        if self._composed is not None and self._keys_shown() == self._composed:
            return
        await super().recompose()

    def compose(self) -> ComposeResult:
        self._composed = self._keys_shown()
        keys = list(super().compose())
        for widget in keys:
            if isinstance(widget, FooterKey) and "compact" in (widget._reactive_connect or ()):
                # A key bound to our `compact` would be styled compact (its default) as it
                # mounts, then not compact (the binding): two restylings per key for nothing.
                # (The palette's key is not bound: it stays compact.)
                widget.set_reactive(FooterKey.compact, self.compact)
        screens = [w for w in keys if isinstance(w, FooterKey) and "switch_mode" in w.action]
        helps = [w for w in keys if isinstance(w, FooterKey) and w.action in HELP_ACTIONS]
        palette = [w for w in keys if w.has_class("-command-palette")]
        rest = [w for w in keys if w not in screens and w not in helps and w not in palette]
        if not screens and not helps:
            # a text field has focus (the Console's editor): digits and `?` are typed text, and
            # the F-keys are what switch screens and open Help
            screens, helps = self._function_keys()
        if not self.compact and _width(rest + screens + helps) <= self.app.size.width - 12:
            yield from rest + screens + helps + palette
            return
        # narrow, or a screen with many keys of its own (the step timeline has eight): the six
        # screen keys as one (the Help screen lists them), then Help, then the screen's keys,
        # so that what is cut off is what Help lists
        if len(screens) > 1:
            screens = [self._key(screens[0].key, "1-6", "Screens", screens[0].action)]
        yield from screens + helps + rest + palette

    def _function_keys(self) -> tuple[list[Widget], list[Widget]]:
        """The keys "F1-6 Screens" and "F9 Help", where the screen binds those F-keys."""
        actions = {b.action: b for (_, b, enabled, _) in self.screen.active_bindings.values()
                   if enabled and b.key.startswith("f") and b.key[1:].isdigit()}  # fmt: skip
        screens: list[Widget] = []
        switches = [a for a in actions if a.startswith("switch_mode")]
        switch = next((a for a in switches if "overview" in a), switches[0] if switches else None)
        if switch is not None:
            screens.append(self._key(actions[switch].key, "F1-6", "Screens", switch))
        help_key = next((actions[a] for a in HELP_ACTIONS if a in actions), None)
        first: list[Widget] = []
        if help_key is not None:
            first.append(self._key(help_key.key, help_key.key.upper(), "Help", help_key.action))
        return screens, first

    def _key(self, key: str, display: str, description: str, action: str) -> FooterKey:
        widget = FooterKey(key, display, description, action)
        widget.set_reactive(FooterKey.compact, self.compact)
        return widget


def _width(keys: list[Widget]) -> int:
    """Columns the keys take side by side: each key, its description and their padding."""
    return sum(
        len(w.key_display) + len(w.description) + 3 for w in keys if isinstance(w, FooterKey)
    )
