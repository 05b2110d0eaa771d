"""Which `aten::_to_copy` calls change a tensor's dtype, read from their recorded arguments.

With `record_shapes=True` Kineto records each op's `Input type` (the source tensor's C++ type
name) and `Concrete Inputs` (scalar arguments as text). `_to_copy(self, *, dtype, layout,
device, ...)` has the target dtype second, as c10's ScalarType number, or "" when the call keeps
the dtype (a device copy: `.cpu()`, `.to("cuda")`). A cast is a call whose target dtype differs
from its source's; without recorded arguments nothing can be told, and nothing is called a cast.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from .op_args import OpArgs

# c10::ScalarType numbers of the C++ type names Kineto records as `Input type`
SCALAR_TYPE = {
    "unsigned char": 0, "signed char": 1, "short int": 2, "short": 2, "int": 3, "long int": 4,
    "long": 4, "c10::Half": 5, "float": 6, "double": 7, "c10::complex<c10::Half>": 8,
    "c10::complex<float>": 9, "c10::complex<double>": 10, "bool": 11, "c10::BFloat16": 15,
    "c10::Float8_e5m2": 23, "c10::Float8_e4m3fn": 24,
}  # fmt: skip
TO_COPY = "aten::_to_copy"


def changes_dtype(args: str | None) -> bool:
    """Whether one `_to_copy`'s recorded arguments show a dtype change."""
    try:
        data = json.loads(args) if args else {}
    except ValueError:
        return False
    types, concrete = data.get("Input type"), data.get("Concrete Inputs")
    if not (isinstance(types, list) and isinstance(concrete, list) and types and len(concrete) > 1):
        return False
    dims = data.get("Input Dims")
    if isinstance(dims, list) and dims and dims[0] == []:
        return False  # a 0-dim tensor (a Python scalar's): no activation or weight
    target, source = str(concrete[1]), SCALAR_TYPE.get(str(types[0]))
    return target.isdigit() and source is not None and int(target) != source


def dtype_casts(ops: OpArgs, ranks: Sequence[int]) -> dict[int, np.ndarray]:
    """Per rank of `ranks`, the ev_idx of its `_to_copy` calls that change a dtype."""
    table = ops.named([TO_COPY], ranks)
    hits: dict[int, list[int]] = {int(r): [] for r in ranks}
    columns = (table[c].to_pylist() for c in ("rank", "ev_idx", "args"))
    for rank, ev, args in zip(*columns, strict=True):
        if changes_dtype(args):
            hits[rank].append(ev)
    return {rank: np.array(ev, np.int64) for rank, ev in hits.items()}
