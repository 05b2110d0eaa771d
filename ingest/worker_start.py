"""What a spawned ingest worker does before its first task (a local pool's initializer): it dies
with its parent (`lifeline.die_with_parent`), and it never imports pandas.

A worker only parses and summarises, in Arrow and numpy; but pyarrow imports pandas (0.2 s of a
worker's 0.5 s start) at its first `pa.array` of a list, only to ask whether the list is a pandas
object. Standard library only at the top: the initializer's module is imported first of all."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.machinery import ModuleSpec
from types import ModuleType

from .lifeline import die_with_parent

KEPT_OUT = "pandas"


class _KeptOut:
    """A meta path finder under which `KEPT_OUT` and its submodules cannot be imported."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == KEPT_OUT or name.startswith(KEPT_OUT + "."):
            raise ModuleNotFoundError(f"not in an ingest worker: {name}", name=name)
        return None


@contextmanager
def pandas_kept_out() -> Iterator[None]:
    """Within: pandas cannot be imported (unless it already is)."""
    finder = _KeptOut()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def start_worker(parent: int, summary: bool = False) -> None:
    """A local pool worker's initializer (`parent`: the ingest's process id); a `summary`
    worker, which summarises small ranks one after another, keeps its freed heap for the next
    (`memory.keeping_freed_heap`)."""
    die_with_parent(parent)
    if KEPT_OUT not in sys.modules:
        sys.meta_path.insert(0, _KeptOut())
    if summary:
        from .memory import keeping_freed_heap  # imports pyarrow: after pandas is kept out

        keeping_freed_heap()
