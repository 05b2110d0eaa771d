"""The ranks by node: where the traces name their host (Kineto's `host_name`), one row per host
with its ranks, those of them that stand out across ranks in some step (`spread`), and its
worst lateness at a step's collectives and worst GPU compute against the step's median. A bad
node (a slow NIC, a hot GPU) shows as one host's ranks standing out together. Empty where fewer
than two hosts are named (a merged file names one host for every rank)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .ranks import rank_ranges

SCHEMA = pa.schema(
    [("host", pa.string()), ("ranks", pa.int64()), ("rank_list", pa.string()),
     ("stand_out", pa.string()), ("late_max_ns", pa.int64()), ("late_max_rank", pa.int64()),
     ("compute_max_pct", pa.float64()), ("compute_max_rank", pa.int64())]
)  # fmt: skip


def node_rows(
    hosts: Mapping[int, str | None],
    ranks: Sequence[int],
    spread: Sequence[Mapping[str, Any]],
    lateness: Mapping[tuple[int, int], int],
    compute: Mapping[tuple[int, int], int],
) -> list[dict[str, Any]]:
    """One row per named host of `ranks` (see the module docstring): `spread` the spread rows,
    `lateness` and `compute` by (step, rank)."""
    by_host: dict[str, list[int]] = {}
    for rank in ranks:
        host = hosts.get(rank)
        if host:
            by_host.setdefault(host, []).append(rank)
    if len(by_host) < 2:
        return []
    standing = {int(r) for row in spread for r in str(row["outliers"]).split()}
    median = _step_medians(compute)
    rows = []
    for host, mine in sorted(by_host.items(), key=lambda hr: min(hr[1])):
        own = set(mine)
        late = [(ns, r) for (_, r), ns in lateness.items() if r in own]
        pct = [(ns / median[s] * 100, r) for (s, r), ns in compute.items()
               if r in own and median.get(s)]  # fmt: skip
        worst_late = max(late, key=lambda v: (v[0], -v[1]), default=(None, None))
        worst_pct = max(pct, key=lambda v: (v[0], -v[1]), default=(None, None))
        rows.append(
            {
                "host": host,
                "ranks": len(mine),
                "rank_list": rank_ranges(mine),
                "stand_out": " ".join(str(r) for r in sorted(own & standing)),
                "late_max_ns": worst_late[0],
                "late_max_rank": worst_late[1],
                "compute_max_pct": None if worst_pct[0] is None else round(worst_pct[0], 1),
                "compute_max_rank": worst_pct[1],
            }
        )
    return rows


def _step_medians(compute: Mapping[tuple[int, int], int]) -> dict[int, float]:
    by_step: dict[int, list[int]] = {}
    for (step, _), ns in compute.items():
        by_step.setdefault(step, []).append(ns)
    return {step: float(np.median(values)) for step, values in by_step.items()}
