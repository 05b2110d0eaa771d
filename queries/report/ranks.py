"""Rank lists as a person reads them: runs of consecutive ranks as ranges, and how many."""

from __future__ import annotations

from collections.abc import Iterable

RANGE_FROM = 3  # this many consecutive ranks or more are written as a range


def rank_ranges(ranks: Iterable[int]) -> str:
    """`0–36, 38–255` for ranks 0 to 255 but 37 (sorted, each once); `2, 37` as they are."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i + 1 >= RANGE_FROM:
            parts.append(f"{ordered[i]}–{ordered[j]}")
        else:
            parts.extend(str(r) for r in ordered[i : j + 1])
        i = j + 1
    return ", ".join(parts)


def ranks_phrase(ranks: Iterable[int]) -> str:
    """`rank 3`, `ranks 2, 37`, or `255 ranks (0–36, 38–255)` where ranges shorten the list."""
    ordered = sorted(set(ranks))
    if len(ordered) == 1:
        return f"rank {ordered[0]}"
    listed = rank_ranges(ordered)
    if listed.count(",") + 1 < len(ordered):
        return f"{len(ordered)} ranks ({listed})"
    return f"ranks {listed}"
