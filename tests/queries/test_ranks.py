"""Rank lists in the report's text: ranges where ranks run on, the count where that shortens."""

from __future__ import annotations

import pytest

from tracegraph.queries.report.ranks import rank_ranges, ranks_phrase


@pytest.mark.parametrize(
    ("ranks", "ranges", "phrase"),
    [
        ([3], "3", "rank 3"),
        ([37, 2], "2, 37", "ranks 2, 37"),
        ([0, 1], "0, 1", "ranks 0, 1"),
        ([0, 1, 2], "0–2", "3 ranks (0–2)"),
        ([r for r in range(256) if r != 37], "0–36, 38–255", "255 ranks (0–36, 38–255)"),
        ([5, 1, 2, 3, 9, 10, 3], "1–3, 5, 9, 10", "6 ranks (1–3, 5, 9, 10)"),
    ],
)
def test_rank_lists_read_as_ranges(ranks: list[int], ranges: str, phrase: str) -> None:
    assert rank_ranges(ranks) == ranges
    assert ranks_phrase(ranks) == phrase


def test_every_rank_listed_is_in_the_ranges_and_no_other() -> None:
    """The ranges expand back to the ranks given (held over many random sets)."""
    import random

    rng = random.Random(0)
    for _ in range(500):
        ranks = set(rng.sample(range(64), rng.randint(1, 64)))
        back: set[int] = set()
        for part in rank_ranges(ranks).split(", "):
            lo, _, hi = part.partition("–")
            back.update(range(int(lo), int(hi or lo) + 1))
        assert back == ranks
