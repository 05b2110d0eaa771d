"""CUPTI counters (`counters`): the kernels of CUPTI's range-profiler mode, each counter joined
to the operators that launched the kernel, as HTA's `get_cupti_counter_data_with_operators`.

In that mode (`torch.profiler` with `_ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)`) Kineto writes each kernel as a `cuda_profiler_range` event
whose args are the counters' values, and no kernel activity: nothing ties a range to its launch
but their order. As HTA does, a rank's i-th range (by start) is the kernel of its i-th
`cudaLaunchKernel*` runtime call (by start); where the counts differ HTA gives nothing for the
rank, tracegraph its ranges without a launch or operators. A launch's operators are the `cpu_op`
ranges holding it on its thread (an op that ends as the call starts does not, as in HTA's call
stack), outermost first: `op_stack` (joined by " > "), its first
(`top_level_op`) and its last (`bottom_level_op`). One row per range and counter, the value as
recorded, in start order (a range's place in the trace: `ev_idx`). A range's times are
Kineto's placeholders (the profiled span shared out evenly), not its kernel's: no time is given,
and the table covers the whole trace, `--step` or not.

The values are in the events' args, which the archive's rows do not keep: a rank whose rows
hold such ranges is re-read from its trace (the run's archived copy), once per report.
"""

from __future__ import annotations

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.link import ancestor_paths, innermost_holding, range_parents

from .analyses import Row

CATEGORY = "cuda_profiler_range"
LAUNCH_CATEGORY = "cuda_runtime"
LAUNCH_NAME = "cudaLaunchKernel"  # a prefix: cudaLaunchKernelExC too, as HTA's match
OP_CATEGORY = "cpu_op"
STACK_SEPARATOR = " > "

_I, _F, _S = pa.int64(), pa.float64(), pa.string()
SCHEMA = pa.schema(
    [("rank", _I), ("ev_idx", _I), ("kernel", _S),
     ("launch_ev_idx", _I), ("top_level_op", _S), ("bottom_level_op", _S), ("op_stack", _S),
     ("counter", _S), ("value", _F)]
)  # fmt: skip


def has_counters(rows: pa.Table) -> bool:
    """Whether a rank's rows (archived, or parsed) hold any `cuda_profiler_range` event."""
    return bool(pc.any(pc.equal(pc.fill_null(rows["cat"], ""), CATEGORY)).as_py())


def counter_rows(rank: int, events: pa.Table) -> list[Row]:
    """The rank's rows of `counters` from its parsed events (with their `args` text)."""
    cats = pc.fill_null(events["cat"], "")
    complete = pc.equal(pc.fill_null(events["ph"], ""), "X")
    ranges = _by_start(events.filter(pc.and_(complete, pc.equal(cats, CATEGORY))))
    if ranges.num_rows == 0:
        return []
    launch = pc.and_(
        pc.starts_with(cats, LAUNCH_CATEGORY),
        pc.starts_with(pc.fill_null(events["name"], ""), LAUNCH_NAME),
    )
    launches = _by_start(events.filter(pc.and_(complete, launch)))
    paired = launches.num_rows == ranges.num_rows
    stacks = _op_stacks(events.filter(pc.and_(complete, pc.equal(cats, OP_CATEGORY))), launches)
    names = pc.fill_null(ranges["name"], "").to_pylist()
    launched = launches["ev_idx"].to_pylist() if paired else [None] * ranges.num_rows
    out: list[Row] = []
    for i, (ev_idx, text) in enumerate(
        zip(*(ranges[c].to_pylist() for c in ("ev_idx", "args")), strict=True)
    ):
        stack = stacks[i] if paired else []
        common = {
            "rank": rank,
            "ev_idx": ev_idx,
            "kernel": names[i],
            "launch_ev_idx": launched[i],
            "top_level_op": stack[0] if stack else None,
            "bottom_level_op": stack[-1] if stack else None,
            "op_stack": STACK_SEPARATOR.join(stack) if paired else None,
        }
        for counter, value in _counters(text):
            out.append(common | {"counter": counter, "value": value})
    return out


def _by_start(events: pa.Table) -> pa.Table:
    """`events` by start (ties: file order)."""
    return events.take(pc.sort_indices(events, [("ts", "ascending"), ("ev_idx", "ascending")]))


def _op_stacks(ops: pa.Table, launches: pa.Table) -> list[list[str]]:
    """Each launch's `cpu_op` ranges on its thread, outermost first (names): those holding the
    call's first ns inside it (an op ending as the call starts holds it not, one of no length
    at its start does), as HTA's call stack nests them."""
    if launches.num_rows == 0:
        return []
    inside = pc.add(launches["ts"], pc.cast(pc.greater(pc.fill_null(launches["dur"], 0), 0), _I))
    holder = innermost_holding(ops, launches.set_column(launches.schema.get_field_index("ts"),
                                                       "ts", inside))  # fmt: skip
    parent = range_parents(ops)
    names = pc.fill_null(ops["name"], "").to_pylist()
    paths = ancestor_paths(names, parent, "\0") if ops.num_rows else []
    return [paths[h].split("\0") if h >= 0 else [] for h in holder.tolist()]


def _counters(text: str | None) -> list[tuple[str, float]]:
    """A range's counters: its args, the numeric ones (a counter's value as recorded)."""
    if not text:
        return []
    try:
        args = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return []
    if not isinstance(args, dict):
        return []
    return [
        (name, float(value))
        for name, value in args.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
