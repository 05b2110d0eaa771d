"""Databases and helpers for the explorer's Pilot tests (built once per session)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tracegraph.explorer.app import TraceExplorer, close_store, open_store
from tracegraph.ingest.store import GraphStore

from . import dbs

SIZE = (100, 30)
TIMEOUT_S = 20.0


@pytest.fixture(scope="session")
def tui_dbs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tui-dbs")


def _store(db: Path) -> Iterator[GraphStore]:
    store = open_store(db, TIMEOUT_S)
    try:
        yield store
    finally:
        close_store(db)


@pytest.fixture(scope="session")
def synthetic_db(tui_dbs: Path) -> Iterator[Path]:
    db = dbs.synthetic_db(tui_dbs)
    for _ in _store(db):
        yield db


@pytest.fixture(scope="session")
def edges_db(tui_dbs: Path) -> Iterator[Path]:
    db = dbs.with_edges_db(tui_dbs)
    for _ in _store(db):
        yield db


@pytest.fixture(scope="session")
def native_db(tui_dbs: Path) -> Iterator[Path]:
    db = dbs.native_db(tui_dbs)
    if db is None:
        pytest.skip("no native edge-set builder (tracegraph.ingest.edgesets.native.edge_set)")
    for _ in _store(db):
        yield db


@pytest.fixture(scope="session")
def alexnet_db(tui_dbs: Path) -> Iterator[Path]:
    db = dbs.alexnet_db(tui_dbs)
    if db is None:
        pytest.skip(f"real traces not at {dbs.TRACES}")
    for _ in _store(db):
        yield db


def make_app(db: Path, **kwargs: object) -> TraceExplorer:
    """An app on the session's store of `db` (one store per path per process)."""
    kwargs.setdefault("warm_up", False)
    app = TraceExplorer(db, open_store(db, TIMEOUT_S), TIMEOUT_S, **kwargs)  # type: ignore[arg-type]
    app.animation_level = "none"  # nothing to wait for between key presses
    return app


async def settle(pilot: Pilot[object], rounds: int = 4) -> None:
    """Let screens refresh, start their workers, and handle what the workers posted."""
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def pilot_test(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async Pilot test in its own event loop (no pytest async plugin needed)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


@pytest.fixture(scope="session")
def late_db(tui_dbs: Path) -> Iterator[Path]:
    db = dbs.late_rank_db(tui_dbs)
    for _ in _store(db):
        yield db


@pytest.fixture(autouse=True)
def _console_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's console history in its own file, never the user's."""
    path = tmp_path / "history.json"
    monkeypatch.setenv("TRACEGRAPH_HISTORY", str(path))
    return path
