"""row_codes numbers rows exactly as numpy's unique along an axis does (its oracle here)."""

from __future__ import annotations

import numpy as np
import pytest

from tracegraph.ingest.row_codes import row_codes


@pytest.mark.parametrize("columns", [1, 2, 3])
def test_codes_and_first_rows_equal_numpys_unique_along_an_axis(columns: int) -> None:
    rng = np.random.default_rng(columns)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        # few distinct values: many equal rows; int64 extremes: no overflow in the comparison
        pool = np.array([np.iinfo(np.int64).min, -1, 0, 3, np.iinfo(np.int64).max], np.int64)
        cols = [pool[rng.integers(0, len(pool), n)] for _ in range(columns)]
        codes, first = row_codes(*cols)
        unique, inverse = np.unique(np.stack(cols), axis=1, return_inverse=True)
        assert codes.tolist() == inverse.reshape(-1).tolist()
        assert np.stack(cols)[:, first].tolist() == unique.tolist()
        # the first row of each code is its earliest
        assert all(first[c] == np.flatnonzero(codes == c)[0] for c in range(len(first)))


def test_no_rows() -> None:
    codes, first = row_codes(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(codes) == 0 and len(first) == 0
