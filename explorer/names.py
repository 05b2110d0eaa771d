"""Kernel and op names shortened by their structure, for tables: the return type, parameter
lists, namespaces and template arguments go, in that order, as far as the names of one column
stay told apart; a name still too wide is cut around where it differs from its neighbours,
never by dropping its distinguishing part.

`void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, ...>(int, ...)`
becomes `vectorized_elementwise_kernel<…>(…)` where that is unique in its column, and keeps its
template arguments (without their namespaces) where two kernels differ only there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

ELLIPSIS = "…"
_RETURN_TYPE = re.compile(r"^(?:void|auto|int|float|bool|unsigned|static|__global__)\s+(?=\S)")
_QUALIFIER = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::")


def shorten_all(names: Sequence[str], width: int) -> list[str]:
    """Each name at most `width` characters, shortened only as far as needed, and no two that
    differ made alike where the width allows it."""
    out = list(names)
    long = [i for i, n in enumerate(out) if len(n) > width]
    if not long:
        return out
    steps: list[Callable[[str], str]] = [
        _drop_return_type, _drop_parameters, _drop_namespaces, _drop_templates
    ]  # fmt: skip
    forms: list[list[str]] = []  # each level's form of every name
    current = list(names)
    for step in steps:
        current = [step(n) for n in current]
        forms.append(current)
    owners: list[dict[str, set[str]]] = []  # form → the different names that take it
    for shortened in forms:
        owners.append({})
        for original, form in zip(names, shortened, strict=True):
            owners[-1].setdefault(form, set()).add(original)
    for i in long:
        best, peers = names[i], [n for n in names if n != names[i]]
        for level, shortened in enumerate(forms):
            if len(owners[level][shortened[i]]) > 1:
                break  # this much would make two names alike
            best = shortened[i]
            peers = [f for f, n in zip(shortened, names, strict=True) if n != names[i]]
            if len(best) <= width:
                break
        out[i] = best if len(best) <= width else _cut(best, peers, width)
    return out


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


def _cut(name: str, peers: Sequence[str], width: int) -> str:
    """`width` characters of `name` that show where it first differs from the most similar
    of `peers` (its start, where nothing is alike)."""
    differs = max((_common_prefix(name, p) for p in peers), default=0)
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
