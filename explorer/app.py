"""The tracegraph explorer: a keyboard-first Textual app over one database.

Screens are modes (`MODES`), one module each under `explorer/screens/`. Every database call runs in
a thread worker that posts a past-tense message (explorer/messages.py); handlers update the UI.
The app holds only UI state (`Focus`: which run, rank, step, edge set and event the user looks
at) and the one read-only `GraphStore` of its database. A database that cannot be explored (not
Kuzu, no tracegraph tables, no runs) is explained once, in words (`database_problem`); the quit
keys work from every screen and dialog.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from textual import work
from textual.actions import SkipAction
from textual.app import App, SystemCommand
from textual.reactive import reactive
from textual.screen import Screen

from tracegraph.ingest.store import GraphStore
from tracegraph.queries.guard import read_only_check
from tracegraph.queries.runs import RunRef
from tracegraph.queries.usable import store_problem

from . import keymap
from .messages import EventChosen, StepChosen
from .screens.base import DatabaseUnusable
from .screens.console import ConsoleScreen
from .screens.dialogs import HelpScreen, UnusableDatabaseDialog
from .screens.diff import DiffScreen
from .screens.inspector import InspectorScreen
from .screens.overview import OverviewScreen
from .screens.report import ReportScreen
from .screens.step import StepScreen

DEFAULT_TIMEOUT_S = 30.0
WARM_UP_AFTER_S = 0.5
WARM_UP_POLL_S = 0.05

_STORES: dict[Path, GraphStore] = {}
_STORES_LOCK = threading.Lock()


def open_store(db: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> GraphStore:
    """The process's one read-only store for `db` (Kuzu wants one Database per path)."""
    key = Path(db).resolve()
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = _read_only_store(key, timeout_s)
        return _STORES[key]


def _read_only_store(db: Path, timeout_s: float) -> GraphStore:
    """Every statement checked as the console's are: the app runs nothing that writes."""
    return GraphStore(db, read_only=True, timeout_ms=int(timeout_s * 1000), check=read_only_check())


def close_store(db: Path) -> None:
    with _STORES_LOCK:
        store = _STORES.pop(Path(db).resolve(), None)
    if store is not None:
        store.close()


@dataclass(frozen=True)
class Focus:
    """What the user looks at; screens read it when they are shown."""

    run: str | None = None
    rank: int | None = None
    step: int | None = None
    edge_set: str | None = None
    event_id: int | None = None


class TraceExplorer(App[int]):
    """Overview, step, inspector, edge-set diff, query console and report over one database."""

    TITLE = "tracegraph"
    CSS_PATH = "app.tcss"
    MODES = {
        "overview": OverviewScreen,
        "step": StepScreen,
        "inspector": InspectorScreen,
        "diff": DiffScreen,
        "console": ConsoleScreen,
        "report": ReportScreen,
    }
    DEFAULT_MODE = "overview"
    BINDINGS = keymap.bindings("app")

    focus_state: reactive[Focus] = reactive(Focus, always_update=True)

    def __init__(
        self,
        db: Path,
        store: GraphStore | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        keys: dict[str, str] | None = None,
        mode: str = "overview",
        warm_up: bool = True,
        served: bool = False,
    ) -> None:
        self.DEFAULT_MODE = mode  # type: ignore[misc]  # read by App.__init__: the first mode
        super().__init__()
        self.db = Path(db)
        self.store = store if store is not None else open_store(self.db, timeout_s)
        self._first_store = self.store
        self.timeout_s = timeout_s
        self._keys = keys or {}
        self._warm = warm_up
        self.warmed = False  # every mode's screen is built (see _warm_up)
        self._runs: list[RunRef] | None = None
        self._problem: str | None = None
        self._runs_lock = threading.Lock()
        self._opened = _identity(self.db)  # the file the store reads (a write replaces it)
        self._own_stores: list[GraphStore] = []  # opened by reopen_if_replaced: closed at exit
        self.unusable: str | None = None  # why the database cannot be explored, once explained
        self.sub_title = str(self.db)
        self._served = served

    @property
    def served(self) -> bool:
        """Run for a browser client (`tracegraph serve`, or any web driver): nothing is
        written on the server on its behalf; exports download to the browser."""
        return self._served or self.is_web

    def on_mount(self) -> None:
        if self._keys:
            self.set_keymap(self._keys)
        self.check_database()
        self.call_after_refresh(self._freeze_long_lived)
        if self._warm:
            self.set_timer(WARM_UP_AFTER_S, self._warm_up)

    @work(thread=True, exclusive=True, exit_on_error=False, group="database")
    def check_database(self) -> None:
        """Explain a database that cannot be explored, whichever screen the app starts on."""
        try:
            problem = self.database_problem()
        except Exception:  # noqa: BLE001 - the screens' own queries report what failed
            return
        if problem is not None:
            self.post_message(DatabaseUnusable(problem))

    def on_database_unusable(self, message: DatabaseUnusable) -> None:
        """The explanation, once: closing the dialog does not bring it back."""
        if self.unusable is not None:
            return
        self.unusable = message.problem
        self.push_screen(UnusableDatabaseDialog(message.problem), self._unusable_closed)

    def _unusable_closed(self, quit_app: bool | None) -> None:
        if quit_app:
            self.exit()

    async def action_quit(self) -> None:
        """Quit, first interrupting a running query (its worker thread would hold the exit) on
        every store the app has read (a worker may still use one Ctrl+L replaced)."""
        self.interrupt_all()
        self.exit()

    def interrupt_all(self) -> None:
        for store in (self._first_store, *self._own_stores):  # `store` is one of these
            store.interrupt()

    async def action_quit_unless_typing(self) -> None:
        """`q`: quit, unless the focused widget takes the key as text (an Input, the editor)."""
        focused = self.focused
        if focused is not None and focused.check_consume_key("q", "q"):
            raise SkipAction()
        await self.action_quit()

    def _warm_up(self) -> None:
        """Build the screens of the other modes in the background, one per idle moment.

        Building a screen's widgets the first time (Textual's CSS work) costs far more than its
        queries; done ahead, switching to a mode only loads data. Uses App._init_mode, the step
        switch_mode takes before showing a mode; without it (another Textual) nothing is done.
        """
        init_mode = getattr(self, "_init_mode", None)
        stacks = getattr(self, "_screen_stacks", None)
        if init_mode is None or stacks is None:
            return
        pending = [m for m in self.MODES if m not in stacks]
        if not pending:
            if all(screen.is_mounted for stack in stacks.values() for screen in stack):
                self.warmed = True
                self._freeze_long_lived()
            else:  # the last ones are still being built
                self.set_timer(WARM_UP_POLL_S, self._warm_up)
            return
        init_mode(pending[0])  # styled as it mounts (see ExplorerScreen._styled_for_app)
        self.call_after_refresh(self._warm_up)

    def _freeze_long_lived(self) -> None:
        """Leave what exists now (modules, the app, its screens' widgets) out of the garbage
        collector's full passes: they live as long as the app, and walking them all (hundreds of
        thousands of objects) paused the UI 100-270 ms at random moments. `on_unmount` gives
        them back to the collector."""
        gc.collect()  # what is garbage now is collected, not frozen with the rest
        gc.freeze()

    # ---- data shared by screens (called from workers) --------------------------------------
    def runs(self) -> list[RunRef]:
        """The database's runs, read once; none where it cannot be explored (workers only: this
        queries the store)."""
        self._read_runs()
        return self._runs or []

    def database_problem(self) -> str | None:
        """Why the database cannot be explored (not Kuzu, no tracegraph tables, no runs), in
        words; None when it holds runs (workers only)."""
        self._read_runs()
        return self._problem

    def _read_runs(self) -> None:
        with self._runs_lock:
            if self._runs is None:
                self._problem, self._runs = store_problem(self.db, self.store)

    def reopen_if_replaced(self) -> bool:
        """Read the database a write put in place of the file the app opened (an ingest, an
        edge-set build: each replaces the file whole); True when it did (workers only).

        The store read so far stays open until the app exits: a worker may still be using it.
        """
        with self._runs_lock:
            now = _identity(self.db)
            if now is None or now == self._opened:
                return False
            fresh = _read_only_store(self.db.resolve(), self.timeout_s)
            self._own_stores.append(fresh)
            self.store, self._opened = fresh, now
            self._runs = self._problem = None
            return True

    def on_unmount(self) -> None:
        gc.unfreeze()
        self.close_stores()

    def close_stores(self) -> None:
        """Close the stores `reopen_if_replaced` opened (the app's first store is its caller's),
        each query on them interrupted first (closing a store a query runs on hangs it)."""
        self.interrupt_all()
        for store in self._own_stores:
            store.close()
        self._own_stores.clear()

    def run_ref(self, name: str | None) -> RunRef | None:
        runs = self.runs()
        if not runs:
            return None
        return next((r for r in runs if r.name == name), runs[0])

    # ---- navigation ----------------------------------------------------------------------------
    def update_focus(self, **changes: object) -> None:
        self.focus_state = replace(self.focus_state, **changes)  # type: ignore[arg-type]

    def on_step_chosen(self, message: StepChosen) -> None:
        self.update_focus(run=message.run, rank=message.rank, step=message.step)
        self.switch_mode("step")

    def on_event_chosen(self, message: EventChosen) -> None:
        self.update_focus(event_id=message.event_id)
        self.switch_mode("inspector")

    def action_help(self) -> None:
        scope = getattr(self.screen, "SCOPE", "app")
        self.push_screen(HelpScreen(scope))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Palette entries from the keymap ("namespace: verb"), then Textual's own."""
        scope = getattr(screen, "SCOPE", None)
        for spec in keymap.KEYMAP["app"]:
            if spec.palette:
                yield SystemCommand(
                    spec.command, spec.description, partial(self._palette, spec, None)
                )
        if scope in keymap.KEYMAP:
            for spec in keymap.KEYMAP[scope]:
                if spec.palette:
                    yield SystemCommand(
                        spec.command, spec.description, partial(self._palette, spec, screen)
                    )
        yield from (c for c in super().get_system_commands(screen) if c.title != "Quit")

    def _palette(self, spec: keymap.KeySpec, screen: Screen | None) -> None:
        self.call_later(self.run_action, spec.action, screen)


def _identity(db: Path) -> tuple[int, int, int] | None:
    """What tells a replaced database file from the one opened (None: not there)."""
    try:
        st = db.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def run_app(
    db: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    keymap_file: Path | None = None,
    served: bool = False,
) -> int:
    """Open the explorer on `db` (read-only) until the user quits; the exit code. `served`:
    for a browser client of `tracegraph serve` (see `TraceExplorer.served`)."""
    keys = keymap.load_keymap(keymap_file) if keymap_file else None
    store = open_store(db, timeout_s)
    try:
        app = TraceExplorer(db, store, timeout_s, keys, served=served)
        try:
            app.run()
        finally:
            app.close_stores()
        return app.return_code or 0
    finally:
        close_store(db)


def screen_text(app: App[object]) -> str:
    """The current screen as plain text (what a terminal of the app's size shows), for docs."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        record=True,
        color_system=None,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    lines = console.export_text(styles=False).splitlines()
    return "\n".join(line.rstrip() for line in lines[:height])
