"""Per step, how the ranks compare: the spread of each rank's GPU compute time (`compute`:
kernels other than communication, as the per-step table counts them) and of its lateness at the
step's collectives (`late`: its largest arrival after the median of the other participants, the
straggler's measure), and the ranks that stand out.

In a synchronous job every rank's step lasts as long as the slowest's (the others wait at the
collectives), so step time cannot say who is slow; compute time (a slow GPU) and arrival
lateness (a late host) can. A rank stands out when it is above the median by more than
OUTLIER_Z robust standard deviations (1.4826 × the median absolute deviation, Iglewicz and
Hoaglin's modified z-score), the deviation taken as at least MIN_SCALE_SHARE of the step's
median time, so that equal ranks' jitter is no outlier: at least 3.5% of the step. Robust: one
rank 20 ms late among 1,024 moves neither the median nor the MAD. Percentiles are
nearest-rank: each is some rank's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

OUTLIER_Z = 3.5
MIN_SCALE_SHARE = 0.01
MIN_RANKS = 3  # below this, no rank stands out from the others
SCHEMA = pa.schema(
    [("step", pa.int64()), ("metric", pa.string()), ("ranks", pa.int64()),
     ("min_ns", pa.int64()), ("p50_ns", pa.int64()), ("p90_ns", pa.int64()),
     ("max_ns", pa.int64()), ("max_rank", pa.int64()), ("outliers", pa.string())]
)  # fmt: skip


def spread_rows(
    metric: str, values: Mapping[tuple[int, int], int], step_ns: Mapping[int, int]
) -> list[dict[str, Any]]:
    """One row per step of `values` ((step, rank) → ns): the ranks' spread and, in
    `outliers`, the ranks that stand out ("37 200", the highest first); `step_ns`: each
    step's median time (0 where unknown)."""
    by_step: dict[int, list[tuple[int, int]]] = {}
    for (step, rank), ns in values.items():
        by_step.setdefault(step, []).append((rank, int(ns)))
    out = []
    for step in sorted(by_step):
        ranks = np.array([r for r, _ in sorted(by_step[step])], np.int64)
        ns = np.array([v for _, v in sorted(by_step[step])], np.int64)
        top = int(np.lexsort((ranks, -ns))[0])  # the largest, the lowest rank of equals
        out.append(
            {
                "step": step,
                "metric": metric,
                "ranks": len(ns),
                "min_ns": int(ns.min()),
                "p50_ns": _nearest_rank(ns, 50),
                "p90_ns": _nearest_rank(ns, 90),
                "max_ns": int(ns[top]),
                "max_rank": int(ranks[top]),
                "outliers": " ".join(str(r) for r in outliers(ranks, ns, step_ns.get(step, 0))),
            }
        )
    return out


def outliers(ranks: np.ndarray, ns: np.ndarray, step_ns: int) -> list[int]:
    """The ranks above the others' robust spread (see the module docstring), highest first."""
    if len(ns) < MIN_RANKS:
        return []
    median = float(np.median(ns))
    mad = float(np.median(np.abs(ns - median)))
    scale = max(1.4826 * mad, MIN_SCALE_SHARE * step_ns, 1.0)
    high = np.nonzero((ns - median) / scale > OUTLIER_Z)[0]
    return [int(ranks[i]) for i in high[np.lexsort((ranks[high], -ns[high]))]]


def _nearest_rank(ns: np.ndarray, pct: int) -> int:
    ordered = np.sort(ns)
    return int(ordered[max(0, -(-pct * len(ordered) // 100) - 1)])


def step_medians(step_rows: list[dict[str, Any]]) -> dict[int, int]:
    """Each step's median time over its ranks, from the report's per-step rows."""
    times: dict[int, list[int]] = {}
    for row in step_rows:
        times.setdefault(row["step"], []).append(row["step_ns"])
    return {step: int(np.median(ns)) for step, ns in times.items()}
