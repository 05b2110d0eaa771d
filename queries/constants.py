"""The value of a constant Cypher expression, worked out from its tokens without running it.

The query guard asks how large a `range()` or `repeat()` would be before Kuzu materializes it:
`range(1, 100000*1000000)` is as dangerous as `range(1, 100000000000)`. Folded here: integer
and float literals, `$parameters` and names whose value is known, `+ - * / % ^` with Kuzu's
semantics (integer `/` and `%` truncate toward zero, `^` is a float), parentheses, list
literals, indexing (`[i]`, from 1), `range()`, `size()`, `abs()`, `to_int64()` and friends, and
`CAST(x AS INT64)`. Anything else (a property, a function of data) is not constant: `fold`
answers None and the guard lets Kuzu decide.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Value = int | float | Sequence[int | float]  # a Python `range` stands for Kuzu's range() list

MAX_DEPTH = 50  # nesting of parentheses and calls folded (deeper: not constant)
_INT_CASTS = frozenset(
    f"{prefix}{bits}" for prefix in ("INT", "UINT") for bits in ("8", "16", "32", "64", "128")
) | {"SERIAL"}


class _NotConstant(Exception):
    """Raised inside the folder where the expression has a part that is not constant."""


def fold(tokens: Sequence[str], known: Mapping[str, Value]) -> Value | None:
    """The value of the whole expression `tokens` (as `ingest.cypher_text.tokens` gives them),
    or None where it is not constant. `known` holds values by name (`$param` or alias)."""
    folder = _Folder(tokens, known)
    try:
        value = folder.expression(0)
    except (_NotConstant, ArithmeticError, ValueError):  # ValueError: fmod(x, 0.0), round(nan)
        return None
    return value if folder.at == len(tokens) else None


def range_length(start: int, stop: int, step: int) -> int:
    """How many values Kuzu's `range(start, stop, step)` holds (both ends included)."""
    return max(0, (stop - start) // step + 1)


def _inclusive_range(start: int, stop: int, step: int) -> range:
    return range(start, stop + (1 if step > 0 else -1), step)


class _Folder:
    """Recursive descent over one expression, Cypher's precedence: `+ -` < `* / %` < `^` <
    unary sign < indexing."""

    def __init__(self, tokens: Sequence[str], known: Mapping[str, Value]) -> None:
        self.tokens = tokens
        self.known = known
        self.at = 0

    def peek(self, ahead: int = 0) -> str:
        i = self.at + ahead
        return self.tokens[i] if i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token.upper() != expected):
            raise _NotConstant
        self.at += 1
        return token

    def expression(self, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise _NotConstant
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            left, right = _number(value), _number(self.term(depth))
            value = left + right if op == "+" else left - right
        return value

    def term(self, depth: int) -> Value:
        value = self.power(depth)
        while self.peek() in ("*", "/", "%"):
            op = self.take()
            value = _arithmetic(op, _number(value), _number(self.power(depth)))
        return value

    def power(self, depth: int) -> Value:
        value = self.unary(depth)
        while self.peek() == "^":
            self.take()
            result = float(_number(value)) ** float(_number(self.unary(depth)))
            if isinstance(result, complex):
                raise _NotConstant
            value = result
        return value

    def unary(self, depth: int) -> Value:
        if self.peek() in ("+", "-"):
            sign = self.take()
            number = _number(self.unary(depth))
            return -number if sign == "-" else number
        value = self.atom(depth)
        while self.peek() == "[":
            self.take()
            index = self.expression(depth + 1)
            self.take("]")
            value = _element(value, index)
        return value

    def atom(self, depth: int) -> Value:
        token = self.take()
        upper = token.upper()
        if token[0].isdigit() or token[0] == ".":
            return int(token) if token.isdigit() else float(token)
        if token == "(":
            value = self.expression(depth + 1)
            self.take(")")
            return value
        if token == "[":
            items: list[int | float] = []
            while self.peek() != "]":
                if items:
                    self.take(",")
                items.append(_number(self.expression(depth + 1)))
            self.take("]")
            return tuple(items)
        if self.peek() == "(" and upper == "CAST":
            self.take("(")
            value = self.expression(depth + 1)
            self.take("AS")
            kind = self.take().upper()
            self.take(")")
            return _to_int(value, kind)
        if self.peek() == "(":
            self.take("(")
            args: list[Value] = []
            while self.peek() != ")":
                if args:
                    self.take(",")
                args.append(self.expression(depth + 1))
            self.take(")")
            return _call(upper, args)
        if token in self.known:
            return self.known[token]
        raise _NotConstant


def _number(value: Value) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _NotConstant
    return value


def _integer(value: Value) -> int:
    number = _number(value)
    if not isinstance(number, int):
        raise _NotConstant
    return number


def _arithmetic(op: str, left: int | float, right: int | float) -> int | float:
    if op == "*":
        return left * right
    if isinstance(left, int) and isinstance(right, int):
        if right == 0:
            raise _NotConstant  # Kuzu: "Divide by zero"
        quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
        return quotient if op == "/" else left - right * quotient
    return left / right if op == "/" else math.fmod(left, right)


def _element(value: Value, index: Value) -> int | float:
    """`list[i]`: Kuzu counts from 1, and from the end for negative i."""
    i = _integer(index)
    if isinstance(value, int | float) or i == 0:
        raise _NotConstant
    try:
        return value[i - 1 if i > 0 else i]
    except IndexError as exc:
        raise _NotConstant from exc


def _to_int(value: Value, kind: str) -> int:
    if kind not in _INT_CASTS:
        raise _NotConstant
    number = _number(value)
    return number if isinstance(number, int) else round(number)


def _call(name: str, args: list[Value]) -> Value:
    if name == "RANGE" and len(args) in (2, 3):
        start, stop = _integer(args[0]), _integer(args[1])
        step = _integer(args[2]) if len(args) == 3 else 1
        if step == 0:
            raise _NotConstant  # Kuzu: "Step of range cannot be 0"
        return _inclusive_range(start, stop, step)
    if name == "SIZE" and len(args) == 1 and not isinstance(args[0], int | float):
        sequence = args[0]
        if isinstance(sequence, range):  # len() overflows past sys.maxsize
            return max(0, -((sequence.start - sequence.stop) // sequence.step))
        return len(sequence)
    if name == "ABS" and len(args) == 1:
        return abs(_number(args[0]))
    if name.startswith("TO_") and name[3:] in _INT_CASTS and len(args) == 1:
        return _to_int(args[0], name[3:])
    raise _NotConstant
