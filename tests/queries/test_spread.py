"""The ranks that stand out per step (`spread`): held by synthetic jobs whose slow GPU and late
host are injected (their lateness against the simulation's own arrivals), a clean job that
names none, and real 4-rank gloo captures with a known late rank."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tracegraph
from tracegraph.examples.synthetic import collective_arrivals
from tracegraph.examples.truth_jobs import BASE
from tracegraph.queries.report import Report
from tracegraph.queries.report.spread import outliers, spread_rows

from ..conftest import synthetic_db

GLOO = Path(__file__).resolve().parents[1] / "data" / "gloo_4r"
LATE, SLOW = 5, 11
INJECTED = replace(
    BASE, ranks=16, late_rank=LATE, late_us=20_000, slow_kernel_rank=SLOW, slow_kernel_factor=25.0
)


def _spread(db: Path) -> tuple[dict[tuple[int, str], dict], Report]:
    report = tracegraph.open(db).report()
    return {(r["step"], r["metric"]): r for r in report.tables["spread"].to_pylist()}, report


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_db(INJECTED, tmp_path_factory.mktemp("spread"), "injected")


def test_the_slow_gpu_and_the_late_host_stand_out_in_every_step(injected: Path) -> None:
    spread, report = _spread(injected)
    steps = report.tables["steps"].to_pylist()
    truth = collective_arrivals(INJECTED)
    assert sorted({s for s, _ in spread}) == list(range(INJECTED.steps))
    for step in range(INJECTED.steps):
        compute, late = spread[(step, "compute")], spread[(step, "late")]
        assert compute["outliers"] == str(SLOW) and compute["max_rank"] == SLOW
        ranks = [int(r) for r in late["outliers"].split()]
        assert ranks[0] == LATE and set(ranks) <= {LATE, SLOW}, late  # a slow GPU arrives late too
        # the late host's lateness is the simulation's: its arrival after the others' median
        want = max(
            starts[LATE] - np.median([t for r, t in starts.items() if r != LATE])
            for starts in truth[step].values()
        )
        assert late["max_ns"] == pytest.approx(want, rel=0.05)
        # the figures are the per-step table's, over the ranks; percentiles nearest-rank
        mine = np.array([r["compute_ns"] for r in steps if r["step"] == step])
        assert compute["ranks"] == INJECTED.ranks == len(mine)
        assert (compute["min_ns"], compute["max_ns"]) == (mine.min(), mine.max())
        for pct in (50, 90):
            assert compute[f"p{pct}_ns"] == np.percentile(mine, pct, method="inverted_cdf")
    across = report.to_json()["steps"][0]["across_ranks"]
    assert across["compute"]["outliers"] == [SLOW] and across["late"]["outliers"][0] == LATE


def test_a_clean_job_has_no_rank_that_stands_out(tmp_path: Path) -> None:
    clean = replace(BASE, ranks=16)
    spread, _ = _spread(synthetic_db(clean, tmp_path, "clean"))
    assert len(spread) == 2 * clean.steps
    assert all(row["outliers"] == "" for row in spread.values()), spread


@pytest.mark.parametrize("name", ["data_stall", "gc_python"])
def test_real_captures_name_the_late_rank_and_only_it(name: str, tmp_path: Path) -> None:
    late = _late_outliers(name, tmp_path)
    truth = json.loads((GLOO / name / "truth.json").read_text())["injected_rank"]
    assert len(late) == 4 and set(late.values()) == {str(truth)}, late


def test_a_real_clean_capture_has_no_rank_that_stands_out_twice(tmp_path: Path) -> None:
    """Four processes on two cores: a rank is late now and then (rank 3 by 9.9 ms, 15% of step
    5), never the same one in two steps."""
    late = _late_outliers("clean", tmp_path)
    named = [r for ranks in late.values() for r in ranks.split()]
    assert len(late) == 4 and len(named) == len(set(named)) <= 1, late


def _late_outliers(name: str, tmp_path: Path) -> dict[int, str]:
    db = tmp_path / f"{name}.kuzu"
    tracegraph.open(db).ingest(GLOO / name, run=name)
    spread, _ = _spread(db)
    return {step: row["outliers"] for (step, metric), row in spread.items() if metric == "late"}


def test_one_far_value_among_many_moves_neither_the_median_nor_the_spread() -> None:
    ranks = np.arange(1024)
    ns = 10_000_000 + (ranks % 7) * 1_000  # jitter of a few µs
    ns[37] += 20_000_000
    assert outliers(ranks, ns, step_ns=25_000_000) == [37]
    ns[900] += 3_000_000  # 12% of the step: stands out too, after the larger
    assert outliers(ranks, ns, step_ns=25_000_000) == [37, 900]
    ns[500] += 500_000  # 2% of the step: within the floor of 3.5% of it
    assert outliers(ranks, ns, step_ns=25_000_000) == [37, 900]
    assert outliers(ranks[:2], ns[:2] * [1, 9], step_ns=1) == []  # two ranks: none stands out


def test_rows_per_step_with_the_largest_and_its_rank() -> None:
    values = {(0, 3): 30, (0, 1): 10, (0, 2): 30, (1, 1): 5}
    rows = spread_rows("late", values, {0: 100})
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0] | {"outliers": ""} == {
        "step": 0, "metric": "late", "ranks": 3, "min_ns": 10, "p50_ns": 30, "p90_ns": 30,
        "max_ns": 30, "max_rank": 2, "outliers": "",
    }  # fmt: skip
    assert rows[1]["ranks"] == 1 and rows[1]["outliers"] == ""
