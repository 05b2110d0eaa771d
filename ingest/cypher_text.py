"""Cypher text as tokens: words, numbers, `$parameters` and punctuation, never the text inside
string literals, backquoted names or comments.

The query guard (queries/guard.py) reads keywords from these tokens and the store finds a
query's parameters in them, so `RETURN '$x'` or `// $x` uses no parameter and a keyword
inside a string is no keyword.
"""

from __future__ import annotations

import re

STRING = "'…'"  # what a string literal's token is, whatever it holds
QUOTED = "`…`"  # what a backquoted name's token is

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<quoted>`[^`]*(?:`|\Z))
  | (?P<param>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokens(cypher: str) -> list[str]:
    """Words, numbers, `$name` parameters and punctuation, in order; space and comments
    dropped, each string literal as `STRING` and each backquoted name as `QUOTED`."""
    out = []
    for m in _TOKEN.finditer(cypher):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        out.append(STRING if kind == "string" else QUOTED if kind == "quoted" else m.group())
    return out


def parameter_names(cypher: str) -> set[str]:
    """Names of the `$parameters` a query uses (not `$` inside strings, names or comments)."""
    return {t[1:] for t in tokens(cypher) if t.startswith("$")}
