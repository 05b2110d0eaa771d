"""Constant expressions folded from tokens with Kuzu's semantics (queries/constants.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegraph.ingest.cypher_text import tokens
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.constants import fold, range_length


def value(expression: str, **known: object) -> object:
    result = fold(tokens(expression), known)  # type: ignore[arg-type]
    return list(result) if isinstance(result, range | tuple) else result


FOLDED = [
    ("100000*1000000", 100_000_000_000),
    ("(1000 + 1) * 1000", 1_001_000),
    ("1 + 2 * 3 - 4", 3),
    ("7 / 2", 3),  # Kuzu's integer division truncates toward zero
    ("-7 / 2", -3),
    ("-7 % 2", -1),
    ("2 ^ 3", 8.0),  # `^` is a float in Kuzu
    ("2 ^ 3 ^ 2", 64.0),  # left to right
    ("-2 ^ 2", 4.0),  # the sign binds first
    ("-(-5)", 5),
    ("1e3", 1000.0),
    ("7 / 2.0", 3.5),
    ("[5, 10, 15][1]", 5),
    ("[5, 10, 15][-1]", 15),
    ("range(1, 10, 3)", [1, 4, 7, 10]),
    ("range(5, 1, -2)", [5, 3, 1]),
    ("range(100000000000, 100000000001)[1]", 100_000_000_000),
    ("size(range(1, 1000000)) * 1000000", 1_000_000_000_000),
    ("size(range(1, 100000000000000000000))", 100_000_000_000_000_000_000),
    ("size([1, 2, 3])", 3),
    ("abs(-3)", 3),
    ("CAST(1e11 AS INT64)", 100_000_000_000),
    ("to_int64(10 ^ 11)", 100_000_000_000),
    ("$n * 2", 84),
    ("n + 1", 2),
]


@pytest.mark.parametrize(("expression", "expected"), FOLDED)
def test_constant_expressions_fold(expression: str, expected: object) -> None:
    assert value(expression, **{"$n": 42, "n": 1}) == expected


def test_the_folded_values_are_kuzus(tmp_path: Path) -> None:
    """Each folded expression (but the huge size, which Kuzu would build) run by Kuzu."""
    cases = [(e, v) for e, v in FOLDED if "n" not in e.replace("range", "") and v != 10**20]
    with GraphStore(tmp_path / "empty.kuzu", read_only=False, timeout_ms=0) as store:
        for expression, expected in cases:
            assert store.run(f"RETURN {expression} AS v").table["v"].to_pylist() == [expected]


@pytest.mark.parametrize(
    "expression",
    [
        "o.dur",
        "n + 1",  # n is not known
        "$m",  # no such parameter given
        "size(o.name)",
        "'5'",
        "1 / 0",
        "5 % 0",
        "range(1, 5, 0)",
        "[1, 2][3]",
        "9 ^ 9 ^ 9 ^ 9 ^ 9",  # float overflow
        "(-8) ^ 0.5",  # complex in Python
        "CAST(1 AS STRING)",
        "[1, 2][1:2]",
        "1 2",
        "(" * 200 + "1" + ")" * 200,  # nesting past MAX_DEPTH
        "",
    ],
)
def test_anything_else_is_not_constant(expression: str) -> None:
    assert fold(tokens(expression), {}) is None


def test_range_length_counts_both_ends() -> None:
    assert range_length(1, 10, 1) == 10
    assert range_length(1, 10, 3) == 4
    assert range_length(5, 1, -2) == 3
    assert range_length(5, 1, 1) == 0
