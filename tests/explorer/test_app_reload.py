"""Ctrl+L reads the database a write put in place of the one the app opened (a run ingested,
an edge set built while the explorer is open)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.app import close_store
from tracegraph.explorer.screens.overview import OverviewScreen
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.queries.runs import list_runs

from .conftest import SIZE, make_app, pilot_test, settle


@pilot_test
async def test_ctrl_l_shows_a_run_ingested_after_the_app_opened(
    synthetic_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "growing.kuzu"
    shutil.copyfile(synthetic_db, db)
    shutil.copytree(synthetic_db.with_name(f"{synthetic_db.name}.archive"),
                    db.with_name(f"{db.name}.archive"))  # fmt: skip
    app = make_app(db)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            overview = app.screen
            assert isinstance(overview, OverviewScreen) and overview.loaded is not None
            assert [r.name for r in overview.loaded.runs] == ["syn"]
            first_store = app.store

            files = write_per_rank(SyntheticConfig(ranks=3, steps=1, layers=1), tmp_path / "t")
            ingest(files, db, IngestOptions(run="later"))
            await pilot.press("ctrl+l")
            await settle(pilot)
            assert app.store is not first_store
            assert [r.name for r in overview.loaded.runs] == [r.name for r in list_runs(app.store)]
            assert {r.name for r in overview.loaded.runs} == {"syn", "later"}

            await pilot.press("ctrl+l")  # nothing written since: the same store, no reopen
            await settle(pilot)
            reopened = app.store
            assert not app.reopen_if_replaced() and app.store is reopened
            # the old store still answers (a worker may have been using it)
            assert [r.name for r in list_runs(first_store)] == ["syn"]
    finally:
        close_store(db)
