"""Cypher tokens and `$parameters`, never from inside strings, backquoted names or comments
(ingest/cypher_text.py)."""

from __future__ import annotations

import pytest

from tracegraph.ingest.cypher_text import QUOTED, STRING, parameter_names, tokens


def test_tokens_hide_the_text_of_literals_names_and_comments() -> None:
    cypher = "MATCH (n:Op) // DELETE n\nWHERE n.name = 'CREATE $x' RETURN n.`$y` /* $z */, $run"
    assert tokens(cypher) == [
        "MATCH", "(", "n", ":", "Op", ")", "WHERE", "n", ".", "name", "=", STRING,
        "RETURN", "n", ".", QUOTED, ",", "$run",
    ]  # fmt: skip


def test_numbers_are_one_token_each() -> None:
    assert tokens("RETURN 1e11, 2.5, 10, 1E-3") == [
        "RETURN", "1e11", ",", "2.5", ",", "10", ",", "1E-3",
    ]  # fmt: skip
    assert tokens("MATCH (a)-[*1..3]->(b)")[6:11] == ["*", "1", ".", ".", "3"]


@pytest.mark.parametrize(
    ("cypher", "names"),
    [
        ("RETURN '$x'", set()),
        ('RETURN "$x" AS a', set()),
        ("RETURN 'it''s $x'", set()),
        (r"RETURN 'a\'$x'", set()),
        ("RETURN 1 AS `$x`", set()),
        ("RETURN 1 // $x", set()),
        ("RETURN /* $x */ 1", set()),
        ("RETURN $x", {"x"}),
        (
            "MATCH (o:Op) WHERE o.run = $run AND o.rank = $rank RETURN '$ignored', $run",
            {"run", "rank"},
        ),
        ("RETURN $_a1+$b", {"_a1", "b"}),
    ],
)
def test_parameters_are_only_those_outside_literals(cypher: str, names: set[str]) -> None:
    assert parameter_names(cypher) == names
