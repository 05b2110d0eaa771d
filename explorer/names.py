"""Kernel and op names shortened by their structure, for tables: the return type, parameter
lists, namespaces and template arguments go, in that order, as far as the names of one column
stay told apart; a name still too wide is cut around where it differs from its neighbours,
never by dropping its distinguishing part.

`void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, ...>(int, ...)`
becomes `vectorized_elementwise_kernel<…>(…)` where that is unique in its column, and keeps its
template arguments (without their namespaces) where two kernels differ only there.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Sequence

ELLIPSIS = "…"
_RETURN_TYPE = re.compile(r"^(?:void|auto|int|float|bool|unsigned|static|__global__)\s+(?=\S)")
_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")


def shorten_all(names: Sequence[str], width: int) -> list[str]:
    """Each name at most `width` characters, shortened only as far as needed, and no two that
    differ made alike where the width allows it."""
    distinct = list(dict.fromkeys(names))  # a column repeats names: each is shortened once
    short = dict(zip(distinct, _shorten_distinct(distinct, width), strict=True))
    return [short[n] for n in names]


def _shorten_distinct(names: list[str], width: int) -> list[str]:
    out = list(names)
    long = [i for i, n in enumerate(out) if len(n) > width]
    if not long:
        return out
    steps: list[Callable[[str], str]] = [
        _drop_return_type, _drop_parameters, _drop_namespaces, _drop_templates
    ]  # fmt: skip
    forms: list[list[str]] = [names]  # each level's form of every name (level 0: as they are)
    for step in steps:
        forms.append([step(n) for n in forms[-1]])
    owners = [Counter(level) for level in forms]  # form → how many different names take it
    alike: list[dict[str, int] | None] = [None] * len(forms)  # form → its longest shared prefix
    for i in long:
        level = 0
        for following in range(1, len(forms)):
            if owners[following][forms[following][i]] > 1:
                break  # this much would make two names alike
            level = following
            if len(forms[level][i]) <= width:
                break
        best = forms[level][i]
        if len(best) > width:
            shared = alike[level]
            if shared is None:
                shared = alike[level] = _shared_prefixes(forms[level])
            best = _cut(best, shared[best], width)
        out[i] = best
    return out


def _shared_prefixes(forms: Sequence[str]) -> dict[str, int]:
    """Each distinct form's longest common prefix with any other (its neighbours once sorted)."""
    ordered = sorted(set(forms))
    shared = dict.fromkeys(ordered, 0)
    for a, b in itertools.pairwise(ordered):
        n = _common_prefix(a, b)
        shared[a], shared[b] = max(shared[a], n), max(shared[b], n)
    return shared


def _drop_return_type(name: str) -> str:
    return _RETURN_TYPE.sub("", name, count=1)


def _drop_parameters(name: str) -> str:
    """`f(int, float*)` → `f(…)`: the outermost trailing parameter list."""
    if not name.endswith(")"):
        return name
    depth = 0
    for k in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[k], 0)
        if depth == 0:
            return name if k == len(name) - 2 else f"{name[:k]}({ELLIPSIS})"
    return name


def _drop_namespaces(name: str) -> str:
    """`at::native::f<at::Half>` → `f<Half>`: every qualifier, in template arguments too."""
    return _QUALIFIER.sub("", name)


def _drop_templates(name: str) -> str:
    """`f<a, b<c>>` → `f<…>`: every outermost template argument list (`operator<` spared;
    a `>` inside parentheses, as in `enable_if<(8 > 0)>`, compares, it does not close)."""
    out, depth, parens = [], 0, 0
    for k, ch in enumerate(name):
        if depth > 0 and ch in "()":
            parens += 1 if ch == "(" else -1
        elif ch == "<" and parens == 0 and not name[:k].endswith("operator"):
            if depth == 0:
                out.append("<" + ELLIPSIS)
            depth += 1
            continue
        elif ch == ">" and depth > 0 and parens == 0:
            depth -= 1
            if depth == 0:
                out.append(">")
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def _cut(name: str, differs: int, width: int) -> str:
    """`width` characters of `name` that show where it first differs (at `differs`) from the
    most similar other name (its start, where nothing is alike)."""
    start = 0 if differs < width - 8 else min(differs - width // 3, len(name) - width + 1)
    start = max(start, 0)
    head = ELLIPSIS if start > 0 else ""
    room = width - len(head)
    body = name[start:]
    return head + (body if len(body) <= room else body[: room - 1] + ELLIPSIS)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n
