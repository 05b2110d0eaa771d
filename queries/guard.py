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
- `range()` of more than `MAX_RANGE` values, and `repeat()` / `lpad()` / `rpad()` of more than
  `MAX_STRING` characters, are refused where their arguments are constant: literals, the
  query's parameters, names bound to constants (`WITH 10 AS n`) and arithmetic on them
  (queries/constants.py folds them). Kuzu materializes such a value whole, ignoring the query
  timeout (`range(1, 100000*1000000)` reached 6.5 GB in 7.5 s under a 5 s timeout). A bound
  that comes from the data (`range(0, n.count)`) cannot be told before the query runs and is
  not refused; Kuzu 0.11.3 has no memory limit for it (the reader's buffer pool holds strings,
  not lists), so only the timeout ends it (`range(1, 999999 + o.rank)` over 5,505 ops: 5.3 GB
  in 5 s).

Keywords are found from `ingest.cypher_text.tokens`, which skip string literals, backquoted
names and comments; properties (`n.set`) and labels (`:Load`) are no keywords either, so a
name never trips it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tracegraph.ingest.cypher_text import tokens as cypher_tokens
from tracegraph.ingest.errors import TracegraphError

from .constants import Value, fold, range_length

if TYPE_CHECKING:
    from tracegraph.ingest.store import StatementCheck

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
MAX_STRING = 10_000_000  # characters of one repeat() / lpad() / rpad() string
# functions whose result Kuzu builds whole: name → the argument that sizes it
SIZED_STRINGS = {"REPEAT": 1, "LPAD": 1, "RPAD": 1}
READ_ONLY_FUNCTIONS = frozenset(
    {
        "show_tables", "table_info", "show_connection", "db_version", "show_functions",
        "current_setting", "show_indexes", "show_sequences", "show_warnings", "show_macros",
        "show_attached_databases", "show_loaded_extensions", "show_official_extensions",
        "show_projected_graphs", "stats_info", "storage_info",
    }
)  # fmt: skip


def read_only_check(allow_files: bool = False) -> StatementCheck:
    """`check_read_only` as a read-only store's `check`, run on every statement it is given."""

    def check(cypher: str, params: Mapping[str, object]) -> None:
        check_read_only(cypher, allow_files=allow_files, params=params)

    return check


class QueryRefused(TracegraphError, ValueError):
    """A query that is not a single read-only statement (the message says why)."""


def check_read_only(
    cypher: str, allow_files: bool = False, params: Mapping[str, object] | None = None
) -> None:
    """Refuse anything but one read-only statement (see the module docstring); `params`, the
    values the query will run with, count as constants."""
    tokens = cypher_tokens(cypher)
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
        if upper == "RANGE" or upper in SIZED_STRINGS:
            _check_size(tokens, i, params or {})


def _file_message(word: str) -> str:
    if word == "COPY":
        return (
            "'COPY' writes host files and is refused: write a result with --format csv or "
            "json and redirect the output"
        )
    return f"'{word}' reads host files: refused unless the query is run with --allow-files"


def _check_size(tokens: list[str], i: int, params: Mapping[str, object]) -> None:
    """range(a, b[, step]) of more than MAX_RANGE values, repeat(s, n) / lpad(s, n, p) /
    rpad(s, n, p) of more than MAX_STRING characters, where the arguments are constant."""
    args = _arguments(tokens, i)
    if args is None:
        return
    known = _known_before(tokens, i, params)
    values = [fold(arg, known) for arg in args]
    name = tokens[i].upper()
    if name == "RANGE":
        if len(values) not in (2, 3) or not all(_is_int(v) for v in values):
            return  # not constant: nothing to tell before it runs
        start, stop, step = values[0], values[1], values[2] if len(values) == 3 else 1
        if step and range_length(start, stop, step) > MAX_RANGE:  # type: ignore[arg-type]
            raise QueryRefused(
                f"range() of more than {MAX_RANGE:,} values is refused: Kuzu materializes it "
                "whole, past any timeout"
            )
        return
    at = SIZED_STRINGS[name]
    length = values[at] if at < len(values) else None
    if _is_int(length) and length > MAX_STRING:  # type: ignore[operator]
        raise QueryRefused(
            f"{name.lower()}() of more than {MAX_STRING:,} characters is refused: Kuzu builds "
            "the string whole, past any timeout"
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _arguments(tokens: list[str], i: int) -> list[list[str]] | None:
    """The argument tokens of the call whose name is tokens[i] (None: no call, or unclosed)."""
    if i + 1 >= len(tokens) or tokens[i + 1] != "(":
        return None
    args: list[list[str]] = [[]]
    depth = 0
    for token in tokens[i + 2 :]:
        if token in ")]}" and depth == 0:
            return args if args != [[]] else []
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
        if token == "," and depth == 0:
            args.append([])
        else:
            args[-1].append(token)
    return None


def _known_before(tokens: list[str], i: int, params: Mapping[str, object]) -> dict[str, Value]:
    """Constant values by name where tokens[i] stands: the parameters (`$name`), and each alias
    whose latest binding before i (`<expression> AS name`) folds to a constant."""
    known: dict[str, Value] = {}
    for name, value in params.items():
        if _is_int(value) or isinstance(value, float):
            known[f"${name}"] = value  # type: ignore[assignment]
        elif isinstance(value, list | tuple) and all(_is_int(v) for v in value):
            known[f"${name}"] = tuple(value)
    for j in range(1, min(i, len(tokens) - 1)):
        if tokens[j].upper() != "AS" or not _is_keyword(tokens, j):
            continue
        alias = tokens[j + 1]
        expression = _aliased_expression(tokens, j)
        value = fold(expression, known) if expression is not None else None
        if value is None:
            known.pop(alias, None)
        else:
            known[alias] = value
    return known


def _aliased_expression(tokens: Sequence[str], j: int) -> list[str] | None:
    """The tokens of `<expression> AS alias` before tokens[j] (`AS`) in a WITH or RETURN
    projection; None for other `AS` (UNWIND's list, CAST(x AS T), a pattern's path)."""
    depth = 0
    for s in range(j - 1, -1, -1):
        token = tokens[s]
        if token in ")]}":
            depth += 1
        elif token in "([{":
            if depth == 0:
                return None  # inside a call: CAST(x AS INT64)
            depth -= 1
        elif depth == 0 and (token == "," or token.upper() in ("WITH", "RETURN", "DISTINCT")):
            return list(tokens[s + 1 : j])
        elif depth == 0 and token.upper() in ("UNWIND", "MATCH", "CALL"):
            return None
    return None


def _check_call(tokens: list[str], i: int) -> None:
    name = tokens[i + 1] if i + 1 < len(tokens) else ""
    after = tokens[i + 2] if i + 2 < len(tokens) else ""
    if name in ("", ",", ";", ")", "]", "}"):
        return  # a name (`ORDER BY call`): a CALL clause always names what it calls
    if after != "(" or name.lower() not in READ_ONLY_FUNCTIONS:
        allowed = ", ".join(sorted(READ_ONLY_FUNCTIONS))
        raise QueryRefused(f"CALL {name}: only read-only functions may be called ({allowed})")


def _is_keyword(tokens: list[str], i: int) -> bool:
    """A bare word in clause position: not a property (`.x`), label (`:X`) or parameter."""
    word = tokens[i]
    if not (word[0].isalpha() or word[0] == "_"):
        return False
    before = tokens[i - 1] if i > 0 else ""
    # after AS the grammar wants a name (`RETURN k.name AS call`), never a clause
    return before not in (".", ":", "$", "|") and before.upper() != "AS"
