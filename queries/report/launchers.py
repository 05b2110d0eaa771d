"""Where the GPU time goes by operator: each kernel is credited to its *launcher*, the innermost
CPU operator (`cpu_op`, 2021 `Operator`; python frames and annotations pass through) holding
the runtime call that launched it (the call itself where no operator holds it), as TraceLens's
TreePerf credits it. A launcher's GPU time is the busy time of its kernels (the union of their
intervals). Two views per rank:

- `op_categories`: GEMM, CONV_fwd/bwd, SDPA_fwd/bwd, elementwise, reduce, NORM_fwd/bwd, ...
  (by the operator's name; else by its first kernel's name, TraceLens's rule; else `other`);
- `op_shapes`: per operator and recorded arguments (`Input Dims`, `Input type`, `Input
  Strides`, `Concrete Inputs`, as the trace writes them with `record_shapes=True`), how many
  calls, kernels and their GPU time (total, mean, min, max): the `--top` heaviest per rank.

With `--step`, the launchers that start in the step's window (their kernels may run after it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.link import innermost_holding, one_call_per_correlation

from .activity import launching_calls
from .analyses import Row
from .op_args import OpArgs
from .steps import StepWindow

LAUNCHER_CATEGORIES = ("cpu_op", "Operator")
NO_LAUNCH = "(launch not in the trace)"
COPY_KERNELS = ("Memcpy", "Memset")  # GPU activity that moves or sets memory, no compute
_GEMM = ("aten::mm", "aten::addmm", "aten::_scaled_mm", "aten::bmm", "aten::baddbmm",
         "trtllm::cublas_scaled_mm", "bitsandbytes::int8_linear_matmul", "tex_ts::te_gemm_ts",
         "vllm::gemm_with_dynamic_quant", "aiter::gemm_a4w4", "aiter::gemm_a4w4_asm")  # fmt: skip
_CONV_FWD = ("aten::convolution", "aten::miopen_convolution", "aten::cudnn_convolution",
             "ConvBias_", "ConvBiasReLU_")  # fmt: skip
_CONV_BWD = ("aten::convolution_backward", "ConvBias_Backward", "ConvBiasReLU_Backward")
# beyond TraceLens's lists: the attention kernels' own launchers under the SDPA entry points
_ATTENTION_FWD = ("aten::_flash_attention_forward", "aten::_efficient_attention_forward",
                  "aten::_cudnn_attention_forward")  # fmt: skip
_ATTENTION_BWD = ("aten::_flash_attention_backward", "aten::_efficient_attention_backward",
                  "aten::_cudnn_attention_backward")  # fmt: skip
_SDPA_FWD = (*_ATTENTION_FWD, "FlashAttnFunc", "flash_attn::_flash_attn_forward",
             "flash_attn::_flash_attn_varlen_forward", "aten::_scaled_dot_product_cudnn_attention",
             "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_flash_attention", "aten::_efficient_attention_forward",
             "aiter::_flash_attn_forward", "aiter::wrapper_fmha_v3_fwd", "aiter::mha_fwd",
             "aiter::fmha_v3_fwd", "flash_attn_3::fwd", "vllm::unified_attention_with_output",
             "EvoformerAttention")  # fmt: skip
_SDPA_BWD = (*_ATTENTION_BWD, "FlashAttnFuncBackward", "flash_attn::_flash_attn_backward",
             "flash_attn::_flash_attn_varlen_backward",
             "aten::_scaled_dot_product_cudnn_attention_backward",
             "aten::_scaled_dot_product_efficient_attention_backward",
             "aten::_scaled_dot_product_flash_attention_backward",
             "aten::_efficient_attention_backward", "aiter::_flash_attn_backward",
             "aiter::mha_bwd", "aiter::fmha_v3_bwd", "flash_attn_3::bwd")  # fmt: skip
_ELEMENTWISE = ("aten::copy", "aten::copy_", "aten::clamp_min", "aten::clamp_min_",
                "aten::clamp_max", "aten::clamp_max_", "aten::sigmoid", "aten::rsqrt",
                "aten::silu", "aten::neg", "aten::pow", "aten::div", "aten::div_", "aten::mul",
                "aten::mul_", "aten::add", "aten::add_", "aten::sigmoid_backward",
                "aten::threshold_backward", "LigerSiLUMulFunction")  # fmt: skip
_REDUCE = ("aten::sum", "aten::mean", "aten::max", "aten::min", "aten::norm", "aten::linalg_norm",
           "aten::std", "aten::var", "aten::logsumexp", "aten::cumsum", "aten::cumprod",
           "aten::amin", "aten::amax")  # fmt: skip
_NORMS = [f"aten::{p}{k}_norm" for p in ("", "native_", "miopen_", "cudnn_")
          for k in ("batch", "layer", "group", "instance")]  # fmt: skip
_NORM_FWD = (*_NORMS, "aten::_fused_rms_norm", "primus::fused_ln_modulate")
_NORM_BWD = (*(f"{n}_backward" for n in _NORMS), "aten::_fused_rms_norm_backward")
CATEGORY_OF_OP: dict[str, str] = {
    **dict.fromkeys(_GEMM, "GEMM"),
    **dict.fromkeys(_CONV_FWD, "CONV_fwd"),
    **dict.fromkeys(_CONV_BWD, "CONV_bwd"),
    **dict.fromkeys(_SDPA_FWD, "SDPA_fwd"),
    **dict.fromkeys(_SDPA_BWD, "SDPA_bwd"),
    **dict.fromkeys(_ELEMENTWISE, "elementwise"),
    **dict.fromkeys(_REDUCE, "reduce"),
    **dict.fromkeys(_NORM_FWD, "NORM_fwd"),
    **dict.fromkeys(_NORM_BWD, "NORM_bwd"),
}
# what a kernel of PyTorch's own (`void at::native::...`) says it is, in this order
_KERNEL_WORDS = ("elementwise", "reduce", "multi_tensor_apply")


def category(op_name: str, first_kernel: str, copies_only: bool = False) -> str:
    """The op's category: `memcpy` where every kernel it launched is a Memcpy or Memset
    (whatever the op: a `copy_` between host and device), else by its name, else by its first
    kernel's (TraceLens's rule). A GEMM that clears its workspace first is still a GEMM."""
    if copies_only:
        return "memcpy"
    found = CATEGORY_OF_OP.get(op_name)
    if found is not None:
        return found
    if op_name.startswith("triton"):
        return "triton"
    if op_name.startswith("record_param_comms"):
        return "record_param_comms"
    if first_kernel.startswith("void at::native"):
        for word in _KERNEL_WORDS:
            if word in first_kernel:
                return word
    return "other"


@dataclass(frozen=True)
class Launchers:
    """One rank's kernel launchers: per launcher its event (ev_idx), name, start, CPU time,
    kernels, GPU busy time and first kernel's name."""

    ev_idx: np.ndarray
    name: list[str]
    ts: np.ndarray
    dur: np.ndarray
    kernels: np.ndarray
    busy: np.ndarray
    first_kernel: list[str]
    copies_only: np.ndarray  # every kernel a Memcpy or Memset
    orphan_ts: np.ndarray  # kernels whose launch the trace does not hold
    orphan_end: np.ndarray

    def within(self, window: StepWindow) -> Launchers:
        """The launchers that start in the window, and the orphan kernels that do."""
        at = np.flatnonzero((self.ts >= window.ts) & (self.ts < window.end))
        orphans = (self.orphan_ts >= window.ts) & (self.orphan_ts < window.end)
        return Launchers(
            self.ev_idx[at], [self.name[i] for i in at.tolist()], self.ts[at], self.dur[at],
            self.kernels[at], self.busy[at], [self.first_kernel[i] for i in at.tolist()],
            self.copies_only[at], self.orphan_ts[orphans], self.orphan_end[orphans],
        )  # fmt: skip


@dataclass(frozen=True)
class LaunchedKernels:
    """One rank's kernels whose launching call is known: each one's call (`calls`: its pid,
    tid, ts, ev_idx; `call`: its position in `runtime`, the rank's runtime calls), start, end
    and name."""

    runtime: pa.Table
    calls: pa.Table
    call: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    name: np.ndarray
    orphan_ts: np.ndarray  # the kernels whose launch the trace does not hold
    orphan_end: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ts)


def launched_kernels(rows: pa.Table) -> LaunchedKernels:
    """The launched kernels of one rank's archived rows (`FrameSource.rows`, in file order),
    each paired with its call by correlation (the runtime call before the driver's)."""
    kernels = rows.select(["ev_idx", "name", "ts", "dur", "correlation", "label"]).filter(
        pc.equal(rows["label"], "Kernel")
    )
    calls = rows.select(["ev_idx", "cat", "name", "pid", "tid", "ts", "dur", "correlation",
                         "label"]).filter(pc.equal(rows["label"], "Runtime"))  # fmt: skip
    owner = one_call_per_correlation(
        calls.select(["ev_idx", "cat", "correlation", "ts"]).rename_columns(
            ["id", "cat", "correlation", "ts"]
        )
    )
    call_of = launching_calls(kernels, calls, owner)  # position in `calls`, -1: none
    launched = call_of >= 0
    all_ts = _ints(kernels, "ts")
    all_end = all_ts + _ints(kernels, "dur")
    names = pc.fill_null(kernels["name"], "").to_numpy(zero_copy_only=False)[launched]
    return LaunchedKernels(
        calls,
        calls.take(pa.array(call_of[launched], pa.int64())),
        call_of[launched],
        all_ts[launched],
        all_end[launched],
        names,
        all_ts[~launched],
        all_end[~launched],
    )


def busy_times(key: np.ndarray, ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct `key`, the length of the union of its rows' intervals; and the keys."""
    order = np.lexsort((end, ts, key))
    groups, first, counts = np.unique(key[order], return_index=True, return_counts=True)
    return _busy(ts[order], end[order], first, counts), groups


def launchers(rows: pa.Table, kernels: LaunchedKernels | None = None) -> Launchers:
    """The launchers of one rank's archived rows (`FrameSource.rows`, in file order), and the
    kernels no launcher holds (their start, end)."""
    kernels = launched_kernels(rows) if kernels is None else kernels
    calls = kernels.runtime
    ops = rows.select(["ev_idx", "cat", "name", "pid", "tid", "ts", "dur"]).filter(
        pc.is_in(rows["cat"], value_set=pa.array(LAUNCHER_CATEGORIES))
    )
    op_of_call = innermost_holding(ops, calls)  # position in `ops`, -1: none
    # a launcher: an op (its position) or, where no op holds the call, the call (n_ops + its)
    n_ops = ops.num_rows
    owner_op = op_of_call[kernels.call]
    key = np.where(owner_op >= 0, owner_op, n_ops + kernels.call)
    order = np.lexsort((kernels.end, kernels.ts, key))
    key, k_ts, k_end, k_names = (
        key[order],
        kernels.ts[order],
        kernels.end[order],
        kernels.name[order],
    )
    groups, first, counts = np.unique(key, return_index=True, return_counts=True)
    busy = _busy(k_ts, k_end, first, counts)
    on_op = groups < n_ops
    at = np.where(on_op, groups, groups - n_ops)
    picked = {
        column: np.where(on_op, _ints(ops, column)[np.where(on_op, at, 0)] if n_ops else 0,
                         _ints(calls, column)[np.where(on_op, 0, at)])
        for column in ("ev_idx", "ts", "dur")
    }  # fmt: skip
    op_names = pc.fill_null(ops["name"], "").to_numpy(zero_copy_only=False)
    call_names = pc.fill_null(calls["name"], "").to_numpy(zero_copy_only=False)
    from_ops = op_names[np.where(on_op, at, 0)] if n_ops else np.full(len(at), "", object)
    from_calls = call_names[np.where(on_op, 0, at)] if len(call_names) else from_ops
    names = np.where(on_op, from_ops, from_calls).tolist()
    copy = np.array([str(n).startswith(COPY_KERNELS) for n in k_names], bool)
    copies_only = np.logical_and.reduceat(copy, first) if len(first) else np.zeros(0, bool)
    return Launchers(picked["ev_idx"], names, picked["ts"], picked["dur"],
                     counts.astype(np.int64), busy, k_names[first].tolist(), copies_only,
                     kernels.orphan_ts, kernels.orphan_end)  # fmt: skip


def _busy(ts: np.ndarray, end: np.ndarray, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group (rows first[g] .. first[g]+counts[g]-1, sorted by start), the length of the
    union of its intervals: each row adds what it reaches beyond the group's rows before it (a
    running maximum of their ends, restarted per group by offsetting each group's times)."""
    if not len(first):
        return np.zeros(0, np.int64)
    group = np.repeat(np.arange(len(first)), counts)
    base = ts[first][group]  # each group's earliest start (rows sorted by start)
    start, stop = ts - base, np.maximum(end - base, ts - base)
    width = int(stop.max()) + 1
    if len(first) * width >= 1 << 62:  # offsets would overflow: one group at a time
        groups = zip(first.tolist(), counts.tolist(), strict=True)
        return np.array([_busy_one(start[f : f + c], stop[f : f + c]) for f, c in groups], np.int64)
    offset = group * width
    reach = np.maximum.accumulate(stop + offset) - offset  # the furthest end so far, per group
    before = np.empty_like(reach)
    before[0] = 0
    before[1:] = reach[:-1]
    before[first] = start[first]  # nothing before a group's first row
    covered = np.maximum(stop - np.maximum(start, before), 0)
    return np.add.reduceat(covered, first).astype(np.int64)


def _busy_one(start: np.ndarray, stop: np.ndarray) -> int:
    covered, reach = 0, int(start[0])
    for s, e in zip(start.tolist(), stop.tolist(), strict=True):
        if e > reach:
            covered += e - max(s, reach)
            reach = e
    return covered


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return ints(table[column])


class _ShapeArgs(msgspec.Struct):
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Strides")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")


_SHAPE_FIELDS = ("dims", "types", "strides", "concrete")
_SHAPES = msgspec.json.Decoder(list[_ShapeArgs | None])
_NO_SHAPE = _ShapeArgs()


def shape_args(args: Sequence[str | None]) -> list[tuple[str, str, str, str]]:
    """Each op's recorded arguments as the trace writes them (compact JSON text, "" where
    absent), read in one pass (an op's text that is no JSON object gives "" throughout)."""
    texts = [t if t else "null" for t in args]
    try:
        decoded = _SHAPES.decode(("[" + ",".join(texts) + "]").encode())
    except (msgspec.DecodeError, msgspec.ValidationError):
        decoded = [_one_shape(t) for t in texts]
    found = [d or _NO_SHAPE for d in decoded]
    # one layer's calls repeat their shapes: each distinct text formatted once
    columns = []
    for f in _SHAPE_FIELDS:
        raws = [bytes(getattr(d, f)) for d in found]
        compact = {raw: _compact(raw) for raw in dict.fromkeys(raws)}
        columns.append([compact[raw] for raw in raws])
    return list(zip(*columns, strict=True))


def _one_shape(text: str) -> _ShapeArgs | None:
    try:
        return msgspec.json.decode(text.encode(), type=_ShapeArgs | None)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _compact(raw: bytes) -> str:
    return msgspec.json.format(raw, indent=0).decode() if raw else ""


def launcher_rows(
    rank: int,
    rows: pa.Table,
    window: StepWindow | None,
    ops: OpArgs,
    top: int,
    kernels: LaunchedKernels | None = None,
) -> tuple[list[Row], list[Row]]:
    """The rank's `op_categories` and `op_shapes` rows (`kernels`: `launched_kernels(rows)`,
    where the caller has them)."""
    found = launchers(rows, kernels)
    if window is not None:
        found = found.within(window)
    if not len(found.ev_idx) and not len(found.orphan_ts):
        return [], []
    pairs = list(zip(found.name, found.first_kernel, found.copies_only.tolist(), strict=True))
    category_of = {pair: category(*pair) for pair in dict.fromkeys(pairs)}
    cats = [category_of[pair] for pair in pairs]
    return _category_rows(rank, found, cats), _shape_rows(rank, found, cats, ops, top)


def _category_rows(rank: int, found: Launchers, cats: list[str]) -> list[Row]:
    orphans = 0
    if len(found.orphan_ts):
        one = np.zeros(len(found.orphan_ts), np.int64)
        orphans = int(busy_times(one, found.orphan_ts, found.orphan_end)[0][0])
    total = int(found.busy.sum()) + orphans
    out = []
    if len(found.orphan_ts):  # GPU work whose launch the trace does not hold (no op to credit)
        out.append({"rank": rank, "category": NO_LAUNCH, "launchers": 0,
                    "kernels": len(found.orphan_ts), "gpu_ns": orphans,
                    "pct": 100.0 * orphans / total if total else 0.0})  # fmt: skip
    for name in sorted(set(cats)):
        mine = np.array([c == name for c in cats])
        gpu = int(found.busy[mine].sum())
        out.append(
            {
                "rank": rank,
                "category": name,
                "launchers": int(mine.sum()),
                "kernels": int(found.kernels[mine].sum()),
                "gpu_ns": gpu,
                "pct": 100.0 * gpu / total if total else 0.0,
            }
        )
    out.sort(key=lambda r: (-r["gpu_ns"], r["category"]))
    return out


def _shape_rows(rank: int, found: Launchers, cats: list[str], ops: OpArgs, top: int) -> list[Row]:
    args = ops.at(rank, found.ev_idx.tolist())
    text_of = dict(zip(args["ev_idx"].to_pylist(), args["args"].to_pylist(), strict=True))
    texts = [text_of.get(e) for e in found.ev_idx.tolist()]
    # calls of one layer repeat their arguments' text: read each text once
    distinct = list(dict.fromkeys(texts))
    shape_of = dict(zip(distinct, shape_args(distinct), strict=True))
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (name, cat, text) in enumerate(zip(found.name, cats, texts, strict=True)):
        groups.setdefault((name, cat, *shape_of[text]), []).append(i)
    out = []
    for (name, cat, dims, types, strides, concrete), members in groups.items():
        busy = found.busy[members]
        out.append(
            {
                "rank": rank,
                "name": name,
                "category": cat,
                "input_dims": dims,
                "input_types": types,
                "input_strides": strides,
                "concrete_inputs": concrete,
                "count": len(members),
                "kernels": int(found.kernels[members].sum()),
                "gpu_total_ns": int(busy.sum()),
                "gpu_mean_ns": float(busy.mean()),
                "gpu_min_ns": int(busy.min()),
                "gpu_max_ns": int(busy.max()),
                "cpu_total_ns": int(found.dur[members].sum()),
            }  # fmt: skip
        )
    out.sort(key=lambda r: (-r["gpu_total_ns"], r["name"], r["input_dims"]))
    return out[:top]


_I, _F, _S = pa.int64(), pa.float64(), pa.string()
CATEGORY_SCHEMA = pa.schema(
    [("rank", _I), ("category", _S), ("launchers", _I), ("kernels", _I), ("gpu_ns", _I),
     ("pct", _F)]
)  # fmt: skip
SHAPE_SCHEMA = pa.schema(
    [("rank", _I), ("name", _S), ("category", _S), ("input_dims", _S), ("input_types", _S),
     ("input_strides", _S), ("concrete_inputs", _S), ("count", _I), ("kernels", _I),
     ("gpu_total_ns", _I), ("gpu_mean_ns", _F), ("gpu_min_ns", _I), ("gpu_max_ns", _I),
     ("cpu_total_ns", _I)]
)  # fmt: skip
