"""Large host allocations inside steps, read from the recorded arguments of tensor factories.

With `record_shapes=True` Kineto records a factory's size and dtype (`aten::empty([11010048],
6, ...)`). A fresh allocation of megabytes comes from the OS as untouched pages: the op that
first writes it (`fill_`, `copy_`, `zero_` of that shape, next on the thread) pays a page fault
per page, tens to hundreds of ms for tens of MB, every step the buffer is made anew. Without
recorded arguments nothing is told.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .cpu import CpuEvents
from .op_args import OpArgs

FACTORIES = ("aten::empty", "aten::empty_strided", "aten::zeros", "aten::ones", "aten::full",
             "aten::rand", "aten::randn", "aten::new_empty", "aten::new_zeros")  # fmt: skip
LARGE_ALLOCATION_BYTES = 4 << 20
# bytes per element of c10::ScalarType numbers (the factory's dtype argument; float by default)
_ITEM_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 9: 8, 10: 16, 11: 1, 15: 2}


@dataclass(frozen=True)
class LargeAllocations:
    """One rank's large allocations (ev_idx), their sizes, and the ops that first wrote them."""

    allocations: np.ndarray
    bytes: np.ndarray
    first_touch: np.ndarray


NONE = LargeAllocations(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


# a factory call of at least LARGE_ALLOCATION_BYTES: (ev_idx, bytes, shape)
Allocation = tuple[int, int, list[int]]


def factory_calls(ops: OpArgs, ranks: Sequence[int]) -> dict[int, list[Allocation]]:
    """Per rank of `ranks`, its factory calls of at least LARGE_ALLOCATION_BYTES."""
    table = ops.named(FACTORIES, ranks)
    found: dict[int, list[Allocation]] = {int(r): [] for r in ranks}
    columns = (table[c].to_pylist() for c in ("rank", "ev_idx", "args"))
    for rank, ev, args in zip(*columns, strict=True):
        shape, size = _shape_and_bytes(args)
        if size >= LARGE_ALLOCATION_BYTES:
            found[rank].append((int(ev), size, shape))
    return found


def large_allocations(
    ops: OpArgs, rank: int, cpu: CpuEvents, calls: list[Allocation]
) -> LargeAllocations:
    """The rank's large factory `calls` (`factory_calls`) that it made as CPU ops, and the ops
    that first wrote them."""
    position = {int(e): i for i, e in enumerate(cpu.ev_idx.tolist())} if calls else {}
    found = [f for f in calls if f[0] in position]
    if not found:
        return NONE
    allocations = np.array([f[0] for f in found], np.int64)
    nexts = _next_on_thread(cpu, np.array([position[f[0]] for f in found], np.int64))
    touched = _dims(ops, rank, cpu.ev_idx[nexts[nexts >= 0]])
    first = [
        int(cpu.ev_idx[n])
        for n, (_, _, shape) in zip(nexts.tolist(), found, strict=True)
        if n >= 0 and touched.get(int(cpu.ev_idx[n])) == shape
    ]
    return LargeAllocations(
        allocations, np.array([f[1] for f in found], np.int64), np.array(first, np.int64)
    )


def _shape_and_bytes(args: str | None) -> tuple[list[int], int]:
    try:
        data = json.loads(args) if args else {}
        concrete = data.get("Concrete Inputs") or []
        shape = json.loads(concrete[0]) if concrete and concrete[0] else []
        dtype = int(concrete[1]) if len(concrete) > 1 and str(concrete[1]).isdigit() else 6
    except (ValueError, TypeError):
        return [], 0
    if not (isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape)):
        return [], 0
    return shape, int(np.prod(shape)) * _ITEM_BYTES.get(dtype, 4)


def _next_on_thread(cpu: CpuEvents, rows: np.ndarray) -> np.ndarray:
    """The op that starts next on each row's thread after it ends (-1: none)."""
    out = np.full(len(rows), -1, np.int64)
    ops = np.nonzero(~cpu.is_runtime & cpu.cat_is("cpu_op"))[0]
    for t in np.unique(cpu.thread[rows]).tolist():
        mine = ops[cpu.thread[ops] == t]
        mine = mine[np.argsort(cpu.ts[mine], kind="stable")]
        sel = np.nonzero(cpu.thread[rows] == t)[0]
        at = np.searchsorted(cpu.ts[mine], cpu.end[rows[sel]], side="left")
        ok = at < len(mine)
        out[sel[ok]] = mine[at[ok]]
    return out


def _dims(ops: OpArgs, rank: int, ev_idx: np.ndarray) -> dict[int, list[int]]:
    """The first input's dims of these ops."""
    if len(ev_idx) == 0:
        return {}
    table = ops.at(rank, ev_idx.tolist())
    out: dict[int, list[int]] = {}
    for ev, args in zip(table["ev_idx"].to_pylist(), table["args"].to_pylist(), strict=True):
        try:
            dims = (json.loads(args) if args else {}).get("Input Dims") or []
        except ValueError:
            continue
        if dims and isinstance(dims[0], list):
            out[int(ev)] = dims[0]
    return out
