"""A local pool's worker starts without pandas, and parses and summarises as ever without it."""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tracegraph.ingest.parallel import prepare_file
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.queries.report.summary_tier import SUMMARY_TIER

RANK = Path(__file__).resolve().parents[1] / "data" / "gloo_4r" / "clean" / "rank0.json.gz"


def _summarised_without_pandas(path: Path) -> tuple[int, bool, str]:
    outcome = prepare_file(path, True, ParseOptions(), "run", 0, summarise=SUMMARY_TIER)
    why = ""
    try:
        import pandas  # noqa: F401

        importable = True
    except ModuleNotFoundError as exc:
        importable, why = False, str(exc)
    return len(outcome.ranks), "pandas" in sys.modules or importable, why


def test_a_worker_never_imports_pandas_and_still_summarises() -> None:
    from tracegraph.ingest.worker_start import start_worker

    with ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=start_worker,
        initargs=(os.getpid(),),
    ) as pool:
        ranks, pandas_there, why = pool.submit(_summarised_without_pandas, RANK).result()
    assert ranks == 1 and not pandas_there
    assert "not in an ingest worker" in why
