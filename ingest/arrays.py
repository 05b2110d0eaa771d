"""Arrow columns as numpy arrays, for the whole-array passes (`intervals`, `row_codes`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def ints(values: pa.Array | pa.ChunkedArray, missing: int = -1) -> np.ndarray:
    """Integer values as a writable int64 array, `missing` where null (most columns have no
    null: they take no fill pass)."""
    if values.null_count:
        values = pc.fill_null(values, missing)
    return np.array(values.to_numpy(), np.int64)
