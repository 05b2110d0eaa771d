"""What every explorer screen shares: its keymap scope, the app's store, the error dialog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual import events
from textual._context import NoActiveAppError
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from ..messages import QueryFailed
from .dialogs import ErrorDialog

if TYPE_CHECKING:
    from textual.app import App

    from ..app import TraceExplorer


@dataclass
class DatabaseUnusable(Message):
    """The database cannot be explored (not Kuzu, no tracegraph tables, no runs), in words.

    Posted by the app's start-up check and by a screen's worker that found no run; the screen
    shows it on its status line, the app explains it once in a dialog. (Here rather than in
    explorer/messages.py, which the screens' data messages own.)
    """

    problem: str


class ExplorerScreen(Screen[None]):
    """A mode of the explorer; `SCOPE` names its bindings in explorer/keymap.py."""

    SCOPE: ClassVar[str] = "app"
    # classes for app.tcss: "-wide" screens lay panes side by side, "-short" ones cap sections
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    _under_error = False  # an error dialog was pushed on top of this screen
    _styled_as: object = None  # the app's style state its widgets were last styled in

    def __init__(self) -> None:
        super().__init__()
        self._styled_for_app()

    def _styled_for_app(self) -> None:
        """Start with the app's size classes and mark the CSS current, as Textual would set them
        once the screen is shown. Otherwise a screen's first showing styles every widget
        twice more (the breakpoint classes arriving with the first resize restyle the screen,
        and a screen marked behind the app's CSS has the whole stylesheet reparsed and the
        app restyled): 0.2-0.4 s of a first visit. The styles come out the same."""
        try:
            app = self.app
        except NoActiveAppError:  # made outside an app: Textual sets both when it is shown
            return
        if not any(getattr(app, "_screen_stacks", {}).values()):
            return  # the app's first screen: showing it sets the stylesheet's theme variables
        width, height = app.size
        self.add_class(
            *_breakpoint(width, self.HORIZONTAL_BREAKPOINTS),
            *_breakpoint(height, self.VERTICAL_BREAKPOINTS),
            update=False,
        )
        self._css_update_count = getattr(app, "_css_update_count", self._css_update_count)
        self._styled_as = _app_style_state(app)

    @property
    def explorer(self) -> TraceExplorer:
        return cast("TraceExplorer", self.app)

    def on_screen_suspend(self) -> None:
        self._styled_as = _app_style_state(self.app)

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        if self._styled_as is not None and self._styled_as == _app_style_state(self.app):
            # (Runs before Textual's own handler.) Textual restyles every widget of a screen
            # shown again (20-60 ms); its styles cannot have changed when the app's classes,
            # pseudo-classes and theme are as they were (a changed stylesheet is reapplied
            # by the mode switch itself, and widgets restyle as their own classes change).
            event.refresh_styles = False
        if self._under_error:
            # An error dialog closed: syncing would retry what just failed and, where it fails
            # for good (an empty database, a query that always times out), reopen the dialog.
            self._under_error = False
            return
        # Warming up mounts a mode's screen in the background (it gets a resume too): skip it.
        # Otherwise sync after the first refresh: widgets updated while a mode switch is
        # batched stay blank on a freshly mounted screen.
        if self.is_active:
            self.call_after_refresh(self.sync)

    def sync(self) -> None:
        """Load what the app's focus asks for, if it is not what the screen shows."""

    def show_error(self, title: str, message: str) -> None:
        if self.is_active:  # the dialog goes on top of this screen, its closing resumes it
            self._under_error = True
        self.app.push_screen(ErrorDialog(title, message))

    def show_status(self, text: str) -> None:
        """`text` (not markup) on the screen's status line, if it has one."""
        for line in self.query(".status").results(Static):
            line.update(Text(text))
            return

    def on_database_unusable(self, message: DatabaseUnusable) -> None:
        # not stopped: it bubbles on to the app, which explains it (once) in a dialog
        self.show_status(message.problem)

    def on_query_failed(self, message: QueryFailed) -> None:
        message.stop()
        self.query_failed(message)

    def query_failed(self, message: QueryFailed) -> None:
        """A dialog naming what failed; screens override this (not the handler: Textual calls
        the handlers of every class in the MRO). Where the database cannot be explored at all,
        the app explained that once already: the status line repeats it, with no dialog."""
        if self.explorer.unusable is not None:
            self.show_status(self.explorer.unusable)
            return
        self.show_error(f"Could not load {message.cypher}", message.error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_error(f"{event.worker.name} failed", repr(event.worker.error))


def _breakpoint(size: int, breakpoints: list[tuple[int, str]]) -> list[str]:
    """The class of the widest breakpoint `size` reaches (as Textual's Screen picks it)."""
    reached = [name for at, name in sorted(breakpoints, reverse=True) if size >= at]
    return reached[:1]


def _app_style_state(app: App[object]) -> object:
    """What a screen's styles depend on outside it: the app's classes, pseudo-classes (focus,
    dark) and theme."""
    return frozenset(app.classes), frozenset(app.pseudo_classes), app.theme
