"""Aligning ranks' clocks from their collectives (one rule, for the cross-rank path and the
report's collective tables alike).

Each rank's timestamps come from its own host's clock. A collective ends on every participant at
about the same moment (the last arrival releases them all), so a rank's offset is the median,
over the run's collectives, of its end minus the median end of that collective's participants.
Ranks whose traces name one host share its clock and get one offset (the median over all their
collectives): a rank's own estimate is off by the time its collectives take to release it (up to
~2 ms seen on one host), which would shift a lateness by that much. When every rank names the
same host nothing is shifted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np


def offsets_from_ends(
    ends: Mapping[int, Mapping[int, int]], hosts: Mapping[int, str | None] | None = None
) -> dict[int, int]:
    """Each rank's clock offset (ns, subtracted from its times) from `ends`: collective →
    rank → that rank's end of it; `hosts`: rank → the host its trace names (or None)."""
    diffs: dict[int, list[int]] = defaultdict(list)
    for by_rank in ends.values():
        if len(by_rank) < 2:
            continue
        middle = float(np.median(list(by_rank.values())))
        for rank, end in by_rank.items():
            diffs[rank].append(int(round(end - middle)))
    hosts = hosts or {}
    named = {hosts.get(rank) for rank in diffs}
    if len(named) == 1 and None not in named:
        return dict.fromkeys(diffs, 0)  # one host, one clock: nothing to align
    pooled: dict[str, list[int]] = defaultdict(list)
    for rank, d in diffs.items():
        if hosts.get(rank):
            pooled[str(hosts[rank])] += d
    return {
        rank: int(np.median(pooled[str(hosts[rank])] if hosts.get(rank) else d))
        for rank, d in diffs.items()
    }
