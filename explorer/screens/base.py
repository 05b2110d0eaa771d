"""What every explorer screen shares: its keymap scope, the app's store, the error dialog."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from ..messages import QueryFailed
from .dialogs import ErrorDialog

if TYPE_CHECKING:
    from ..app import TraceExplorer


class ExplorerScreen(Screen[None]):
    """A mode of the explorer; `SCOPE` names its bindings in explorer/keymap.py."""

    SCOPE: ClassVar[str] = "app"

    @property
    def explorer(self) -> TraceExplorer:
        return cast("TraceExplorer", self.app)

    def on_screen_resume(self) -> None:
        # Warming up mounts a mode's screen in the background (it gets a resume too): skip it.
        # Otherwise sync after the first refresh: widgets updated while a mode switch is
        # batched stay blank on a freshly mounted screen.
        if self.is_active:
            self.call_after_refresh(self.sync)

    def sync(self) -> None:
        """Load what the app's focus asks for, if it is not what the screen shows."""

    def show_error(self, title: str, message: str) -> None:
        self.app.push_screen(ErrorDialog(title, message))

    def on_query_failed(self, message: QueryFailed) -> None:
        message.stop()
        self.query_failed(message)

    def query_failed(self, message: QueryFailed) -> None:
        """A dialog naming what failed; screens override this (not the handler: Textual calls
        the handlers of every class in the MRO)."""
        self.show_error(f"Could not load {message.cypher}", message.error)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.show_error(f"{event.worker.name} failed", repr(event.worker.error))
