"""Collective instances across ranks: which NCCL/RCCL kernels and gloo ranges are one all-reduce.

Participants are GPU activities named `nccl*`/`rccl*` and CPU ranges named `gloo:*`. They are
matched across ranks by (process group, sequence number) where the trace records `Seq`, else by
order: the k-th collective of a given name in a given group on each rank is one instance.
Grouping is by hash over all ranks at once, so the cost is linear in the number of ranks.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import ints

_KERNEL_PATTERN = r"^(?i)(nccl|rccl)"
_KERNEL_NAME = r"(?i)^(?:nccl|rccl)(?:Dev)?Kernel_(?P<op>[A-Za-z]+)"
_GLOO_PREFIX = "gloo:"


def is_collective_kernel(events: pa.Table) -> pa.ChunkedArray:
    """Per event, whether its name is an NCCL/RCCL kernel's (of GPU rows, the participants):
    the pattern is matched once per distinct name (a rank has some dozens)."""
    out = []
    for chunk in events["name"].chunks:
        names = pc.dictionary_encode(chunk)
        out.append(pc.match_substring_regex(names.dictionary, _KERNEL_PATTERN).take(names.indices))
    return pa.chunked_array(out, pa.bool_())


def collective_kernels(events: pa.Table) -> pa.ChunkedArray:
    """Per event, whether it is a collective's kernel (a Kernel row of an NCCL/RCCL name)."""
    return pc.and_(pc.equal(events["label"], "Kernel"), is_collective_kernel(events))


def participants(
    events: pa.Table, launches: pa.Table, is_kernel: pa.ChunkedArray | None = None
) -> pa.Table:
    """One rank's collective participants: id, label, rank, ts, group, op, seq, and what the
    fleet questions read of each (`CollectiveArrival`): dur, args, and anchor (what places it
    in a step: a kernel's launching call's start, from the rank's LAUNCHES edges `launches`,
    as the GPU runs behind the CPU; a range's own start). `is_kernel`: which events are
    collective kernels (`collective_kernels`), where the caller has it already."""
    if is_kernel is None:
        is_kernel = collective_kernels(events)
    is_gloo = pc.and_(pc.equal(events["label"], "Op"), pc.starts_with(events["name"], _GLOO_PREFIX))
    columns = ["id", "label", "rank", "ts", "dur", "args", "name", "pg_name", "coll_name",
               "coll_seq"]  # fmt: skip
    part = events.select(columns).filter(pc.or_(is_kernel, is_gloo))
    from_kernel = pc.struct_field(pc.extract_regex(part["name"], _KERNEL_NAME), "op")
    from_gloo = pc.utf8_slice_codeunits(part["name"], len(_GLOO_PREFIX))
    derived = pc.if_else(pc.equal(part["label"], "Kernel"), from_kernel, from_gloo)
    op = pc.coalesce(part["coll_name"], derived, part["name"])
    op = pc.replace_substring(pc.utf8_lower(op), "_", "")
    group = pc.coalesce(part["pg_name"], pa.scalar("default"))
    return pa.table(
        {
            "id": part["id"],
            "label": part["label"],
            "rank": part["rank"],
            "ts": part["ts"],
            "group": group,
            "op": op,
            "seq": part["coll_seq"],
            "dur": part["dur"],
            "args": pa.array([message_args(a) for a in part["args"].to_pylist()], pa.string()),
            "anchor": _anchors(part, events, launches),
        }
    )


# What the report reads of a participant's args: its message size (NCCL's element counts and
# dtype; a gloo range's first input's dims and type). NCCL kernels' args also list every rank of
# the process group, kilobytes each at 1,024 ranks: kept whole they would grow with the square
# of the job.
MESSAGE_ARGS = ("In msg nelems", "Out msg nelems", "dtype")
FIRST_INPUT_ARGS = ("Input Dims", "Input type")


# those fields alone, in that order: the others (the group's ranks) are skipped, not built
_MessageArgs = msgspec.defstruct(
    "_MessageArgs",
    [(f"f{i}", Any, msgspec.field(default=msgspec.UNSET, name=key))
     for i, key in enumerate(MESSAGE_ARGS + FIRST_INPUT_ARGS)],
)  # fmt: skip
_MESSAGE_ARGS = msgspec.json.Decoder(_MessageArgs)


def message_args(args: str | None) -> str | None:
    """The args JSON text reduced to what says a collective's message size (None: none, or
    the args are no JSON object)."""
    if not args:
        return None
    try:
        values = msgspec.structs.astuple(_MESSAGE_ARGS.decode(args))
    except msgspec.DecodeError:  # a ValidationError too: not an object
        return None
    message = values[: len(MESSAGE_ARGS)]
    kept = {k: v for k, v in zip(MESSAGE_ARGS, message, strict=True) if v is not msgspec.UNSET}
    for key, value in zip(FIRST_INPUT_ARGS, values[len(MESSAGE_ARGS) :], strict=True):
        if isinstance(value, list) and value:
            kept[key] = value[:1]
    return msgspec.json.encode(kept).decode() if kept else None


def _anchors(part: pa.Table, events: pa.Table, launches: pa.Table) -> pa.Array:
    """Per participant, its launching call's earliest start, else its own start."""
    calls = events.select(["id", "ts"]).filter(pc.equal(events["label"], "Runtime"))
    call_id = ints(calls["id"])
    order = np.argsort(call_id, kind="stable")
    call_id, call_ts = call_id[order], ints(calls["ts"])[order]
    src, dst = ints(launches["from_id"]), ints(launches["to_id"])
    at = np.minimum(np.searchsorted(call_id, src), max(len(call_id) - 1, 0))
    known = call_id[at] == src if len(call_id) else np.zeros(len(src), bool)
    # per launched id, its earliest call: the first of its launches by (id, ts)
    dst, ts = dst[known], call_ts[at[known]]
    first = np.lexsort((ts, dst))
    dst, ts = dst[first], ts[first]
    lead = np.ones(len(dst), bool)
    lead[1:] = dst[1:] != dst[:-1]
    dst, ts = dst[lead], ts[lead]
    ids = ints(part["id"])
    pos = np.minimum(np.searchsorted(dst, ids), max(len(dst) - 1, 0))
    found = dst[pos] == ids if len(dst) else np.zeros(len(ids), bool)
    own = ints(part["ts"])
    return pa.array(np.where(found, ts[pos] if len(dst) else own, own), pa.int64())


def match(parts: pa.Table, run: str, run_idx: int) -> tuple[pa.Table, pa.Table]:
    """Collective nodes and PART_OF edges (from_id, to_id, from_label) for one run."""
    n = parts.num_rows
    has_seq = pc.is_valid(parts["seq"]).to_numpy(zero_copy_only=False)
    order_in_group = _order_within(parts)
    seq_or_order = np.where(has_seq, ints(parts["seq"]), order_in_group)
    # by seq: one instance per (group, seq); by order: per (group, op, k)
    op_key = pc.if_else(pa.array(has_seq), pa.scalar(""), parts["op"])
    keys = pa.table(
        {
            "group": parts["group"],
            "op_key": op_key,
            "k": pa.array(seq_or_order, pa.int64()),
            "by_seq": pa.array(has_seq),
        }
    )
    instances = keys.group_by(["group", "op_key", "k", "by_seq"]).aggregate([])
    instances = instances.append_column("cid", pa.array(np.arange(instances.num_rows), pa.int64()))
    joined = (
        keys.append_column("row", pa.array(np.arange(n), pa.int64()))
        .join(instances, ["group", "op_key", "k", "by_seq"], join_type="inner")
        .sort_by("row")
    )
    cid = joined["cid"].to_numpy()
    collective_id = (np.int64(run_idx) << np.int64(40)) | cid
    first_op = (
        pa.table({"cid": cid, "op": parts["op"]})
        .group_by("cid")
        .aggregate([("op", "min"), ("op", "count")])
        .sort_by("cid")
    )
    inst = instances.sort_by("cid")
    nodes = pa.table(
        {
            "id": (np.int64(run_idx) << np.int64(40)) | inst["cid"].to_numpy(),
            "run": pa.array([run] * inst.num_rows, pa.string()),
            "name": first_op["op_min"],
            "process_group": inst["group"],
            "seq": inst["k"],
            "matched_by": pc.if_else(inst["by_seq"], pa.scalar("seq"), pa.scalar("order")),
            "participants": first_op["op_count"],
        }
    )
    edges = pa.table({"from_id": parts["id"], "to_id": collective_id, "from_label": parts["label"]})
    return nodes, edges


def arrivals(parts: pa.Table, part_of: pa.Table, run: str) -> pa.Table:
    """CollectiveArrival rows: each participant (`participants`, as matched by `match`, whose
    PART_OF edges `part_of` are in the same order) with its Collective's id."""
    return pa.table(
        {
            "id": parts["id"],
            "run": pa.repeat(pa.scalar(run, pa.string()), parts.num_rows),
            "rank": parts["rank"],
            "collective": part_of["to_id"],
            "ts": parts["ts"],
            "dur": parts["dur"],
            "anchor": parts["anchor"],
            "args": parts["args"],
        }
    )


def _order_within(parts: pa.Table) -> np.ndarray:
    """k = position of each participant among its rank's collectives of the same group and op."""
    n = parts.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    group_codes = (
        pc.dictionary_encode(pc.binary_join_element_wise(parts["group"], parts["op"], "\x1f"))
        .combine_chunks()
        .indices.to_numpy()
    )
    rank = parts["rank"].to_numpy()
    ts = parts["ts"].to_numpy()
    order = np.lexsort((ts, group_codes, rank))
    r, g = rank[order], group_codes[order]
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = (r[1:] != r[:-1]) | (g[1:] != g[:-1])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
    k = np.empty(n, dtype=np.int64)
    k[order] = np.arange(n) - run_start
    return k
