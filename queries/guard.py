"""Which user queries may run: read-only statements over the database, nothing else.

A database is often shared, and a read-only Kuzu connection is not harmless: `CHECKPOINT` leaves
files behind that make every later open fail, `LOAD FROM` reads any host file, `COPY … TO` and
`EXPORT DATABASE` write anywhere, `LOAD EXTENSION` runs a shared library's constructor, and
`BEGIN TRANSACTION` or `CALL threads=…` crash the process. So a user's Cypher (the `query`
command, the explorer's console) is classified before it reaches Kuzu, by an allow-list:

- one statement (no `;` followed by another);
- it starts with a reading clause (`MATCH`, `OPTIONAL MATCH`, `UNWIND`, `WITH`, `RETURN`, `CALL`
  of a read-only function), or `EXPLAIN` / `PROFILE` of one;
- every clause in it is a reading or projecting clause; `CALL` names a function of
  `READ_ONLY_FUNCTIONS`; `LOAD FROM` only with `allow_files` (it reads host files); `COPY … TO`
  never (it writes host files, and on a read-only connection Kuzu 0.11.3 crashes on it: write
  the result with `--format csv` instead);
- `range()` with literal bounds of more than `MAX_RANGE` values is refused: Kuzu materializes it
  whole, ignoring the query timeout (`range(1, 10^11)` took 17 GB and crashed).

Keywords are found by a small tokenizer that skips string literals, backquoted names, comments,
properties (`n.set`) and labels (`:Load`), so a name never trips it.
"""

from __future__ import annotations

import re

from tracegraph.ingest.errors import TracegraphError

# Statement kinds a user query may be (its first keyword).
READ_STATEMENTS = frozenset({"MATCH", "OPTIONAL", "UNWIND", "WITH", "RETURN", "CALL"})
# Clause keywords of statements that write, manage the database or touch the host.
WRITE_WORDS = frozenset(
    {
        "CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "ALTER", "RENAME",
        "EXPORT", "IMPORT", "INSTALL", "UNINSTALL", "UPDATE", "ATTACH", "USE", "CHECKPOINT",
        "BEGIN", "COMMIT", "ROLLBACK", "TRANSACTION", "EXTENSION", "FORCE", "COMMENT", "MACRO",
        "SEQUENCE",
    }
)  # fmt: skip
FILE_WORDS = frozenset({"LOAD", "COPY"})
MAX_RANGE = 1_000_000  # ~0.6 GB materialized (10 M: 5.8 GB, measured)
READ_ONLY_FUNCTIONS = frozenset(
    {
        "show_tables", "table_info", "show_connection", "db_version", "show_functions",
        "current_setting", "show_indexes", "show_sequences", "show_warnings", "show_macros",
        "show_attached_databases", "show_loaded_extensions", "show_official_extensions",
        "show_projected_graphs", "stats_info", "storage_info",
    }
)  # fmt: skip

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<quoted>`[^`]*(?:`|\Z))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>\d+)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class QueryRefused(TracegraphError, ValueError):
    """A query that is not a single read-only statement (the message says why)."""


def check_read_only(cypher: str, allow_files: bool = False) -> None:
    """Refuse anything but one read-only statement (see the module docstring)."""
    tokens = _tokens(cypher)
    if not tokens:
        raise QueryRefused("the query is empty")
    words = [(i, t) for i, t in enumerate(tokens) if _is_keyword(tokens, i)]
    semis = [i for i, t in enumerate(tokens) if t == ";"]
    if semis and semis[0] < len(tokens) - 1:
        raise QueryRefused("one statement at a time: the query has several (';')")
    first = words[0][1].upper() if words else ""
    at = 0
    if first in ("EXPLAIN", "PROFILE"):
        at = 1
        first = words[1][1].upper() if len(words) > 1 else ""
    if first == "COPY" or (first in FILE_WORDS and not allow_files):
        raise QueryRefused(_file_message(first))
    if first not in READ_STATEMENTS and first != "LOAD":
        raise QueryRefused(
            f"'{first or tokens[0]}' statements are not allowed: queries are read-only "
            "(MATCH, OPTIONAL MATCH, UNWIND, WITH, RETURN, CALL of a read-only function)"
        )
    for i, word in words[at:]:
        upper = word.upper()
        if upper in WRITE_WORDS:
            raise QueryRefused(f"'{upper}' is not allowed: queries are read-only")
        if upper == "COPY" or (upper in FILE_WORDS and not allow_files):
            raise QueryRefused(_file_message(upper))
        if upper == "CALL":
            _check_call(tokens, i)
        if upper == "RANGE":
            _check_range(tokens, i)


def _file_message(word: str) -> str:
    if word == "COPY":
        return (
            "'COPY' writes host files and is refused: write a result with --format csv or "
            "json and redirect the output"
        )
    return f"'{word}' reads host files: refused unless the query is run with --allow-files"


def _check_range(tokens: list[str], i: int) -> None:
    """range(a, b[, step]) with integer literals: refuse more than MAX_RANGE values."""
    args, j = [], i + 2
    if i + 1 >= len(tokens) or tokens[i + 1] != "(":
        return
    while j < len(tokens) and tokens[j] != ")":
        sign = -1 if tokens[j] == "-" else 1
        j += tokens[j] == "-"
        if j >= len(tokens) or not tokens[j].isdigit():
            return  # not literals: nothing to tell before it runs
        args.append(sign * int(tokens[j]))
        j += 1
        if j < len(tokens) and tokens[j] == ",":
            j += 1
    if len(args) not in (2, 3):
        return
    step = args[2] if len(args) == 3 else 1
    if step and (args[1] - args[0]) // step + 1 > MAX_RANGE:
        raise QueryRefused(
            f"range() of more than {MAX_RANGE:,} values is refused: Kuzu materializes it "
            "whole, past any timeout"
        )


def _check_call(tokens: list[str], i: int) -> None:
    name = tokens[i + 1] if i + 1 < len(tokens) else ""
    after = tokens[i + 2] if i + 2 < len(tokens) else ""
    if after != "(" or name.lower() not in READ_ONLY_FUNCTIONS:
        allowed = ", ".join(sorted(READ_ONLY_FUNCTIONS))
        raise QueryRefused(f"CALL {name}: only read-only functions may be called ({allowed})")


def _tokens(cypher: str) -> list[str]:
    """Words and punctuation, without space, comments and the text of literals."""
    out = []
    for m in _TOKEN.finditer(cypher):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        out.append("'…'" if kind == "string" else "`…`" if kind == "quoted" else m.group())
    return out


def _is_keyword(tokens: list[str], i: int) -> bool:
    """A bare word in clause position: not a property (`.x`), label (`:X`) or parameter."""
    word = tokens[i]
    if not (word[0].isalpha() or word[0] == "_"):
        return False
    before = tokens[i - 1] if i > 0 else ""
    return before not in (".", ":", "$", "|")
