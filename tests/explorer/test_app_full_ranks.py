"""`f` on the Overview of a summary run (`ingest --summary`) loads the events of the ranks its
report points at, as `ingest --full-ranks auto` does, and shows the run again with them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Static

import tracegraph
from tracegraph.examples.synthetic import write_per_rank
from tracegraph.examples.truth_jobs import BASE

from .conftest import SIZE, make_app, pilot_test, settle

LATE = 3


@pilot_test
async def test_f_loads_the_ranks_a_summary_points_at(tmp_path: Path) -> None:
    files = write_per_rank(replace(BASE, ranks=6, late_rank=LATE, late_us=20_000), tmp_path / "t")
    db = tmp_path / "fleet.kz"
    tracegraph.open(db).ingest(*files, run="fleet", summary=True)
    app = make_app(db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        header = str(app.screen.query_one("#run-line", Static).render())
        assert "6 summary rank(s)" in header and "0 events" in header
        await pilot.press("f")
        for _ in range(20):  # the write runs on a worker thread, then the overview reloads
            await settle(pilot)
            header = str(app.screen.query_one("#run-line", Static).render())
            if "6 summary rank(s)" not in header:
                break
    tiers = (
        tracegraph.open(db)
        .query("MATCH (r:Rank) WHERE r.tier = 'full' RETURN r.rank AS rank ORDER BY rank")["rank"]
        .to_pylist()
    )
    assert LATE in tiers and len(tiers) == 2  # the late rank and a typical one
    assert "4 summary rank(s)" in header and "0 events" not in header
