"""Clock alignment from collectives' ends (ingest/clocks.py): one host is one clock."""

from __future__ import annotations

from tracegraph.ingest.clocks import offsets_from_ends

# three collectives; rank 2 ends each 1.5 ms after the others (its release latency, or a clock)
ENDS = {
    c: {0: 1_000_000 * c, 1: 1_000_000 * c + 10_000, 2: 1_000_000 * c + 1_500_000} for c in range(3)
}


def test_ranks_naming_one_host_are_not_shifted() -> None:
    assert offsets_from_ends(ENDS, dict.fromkeys((0, 1, 2), "node-a")) == {0: 0, 1: 0, 2: 0}


def test_unnamed_hosts_are_aligned_rank_by_rank() -> None:
    offsets = offsets_from_ends(ENDS)
    assert offsets[2] - offsets[0] == 1_500_000
    assert offsets[1] - offsets[0] == 10_000


def test_ranks_of_one_host_share_one_offset() -> None:
    hosts = {0: "node-a", 1: "node-a", 2: "node-b"}
    offsets = offsets_from_ends(ENDS, hosts)
    assert offsets[0] == offsets[1]  # one clock, one offset (their pooled median)
    assert offsets[2] - offsets[0] >= 1_490_000
