"""What an operator call must compute and move, from its recorded arguments (`record_shapes`):
FLOPs and bytes for GEMMs (`mm`, `addmm`, `bmm`, `baddbmm`, `_scaled_mm`), attention
(`_flash_attention_*`, `_efficient_attention_*`, `_scaled_dot_product_flash_attention*`,
`_scaled_dot_product_efficient_attention*`), convolution (`convolution`, `_convolution`,
`cudnn_convolution`, `miopen_convolution`, not transposed), elementwise ops (unary and
binary, with broadcasting), reductions (`sum`, `mean`, `amax`, `amin`), softmax and norms
(layer, batch, RMS; vLLM's `rms_norm` and `fused_add_rms_norm`). The GEMM, attention,
convolution and elementwise formulas are TraceLens's (PerfModel), written again:

- GEMM (M x K by K x N): 2 M N K FLOPs (+ M N for a bias / `beta C`), bytes A + B + C_out
  (+ the bias as recorded); batched: x B.
- attention (B batches, H heads, N_q queries, N_kv keys, head dims d_qk, d_v):
  2 B H N_q N_kv (d_qk + d_v) forward (Q K^T and P V), 2 B H N_q N_kv (3 d_qk + 2 d_v) backward
  (the recomputed scores, dV, dP, dQ, dK; flash and efficient attention alike, where TraceLens
  leaves the recomputation out of efficient attention's), half of it when causal with
  N_q = N_kv; bytes Q + K + V + O forward, Q + K + V + dO + dQ + dK + dV
  backward.
- convolution: 2 x output elements x (C_in / groups x kernel elements) FLOPs (+ the output
  elements for a bias); bytes input + weight + bias + output.
- elementwise: one FLOP per output element; bytes every tensor operand in and the output.
- reductions: one FLOP per input element (`mean`'s divides left out, as TraceLens); bytes the
  input and the output (its size from the reduced dims recorded in `Concrete Inputs`; none
  where they are not: `dim=None` records "", as does a trace that records no int lists).
- softmax and log-softmax: 5 FLOPs per element; bytes the input and the output.
- norms: layer and batch norm 5 N + 6 C FLOPs for N elements of C channels (batch norm) or
  normalised elements (layer norm), TraceLens's count; 4 N for batch norm in eval (the running
  statistics: centre, normalise, scale, shift; TraceLens counts eval as training); RMS norm 4 N
  (5 N with vLLM's residual add); bytes the input and
  the output (4 tensors for the fused add: input and residual, read and written) and the
  parameters. Backward passes have no model.

Bytes count each tensor once (an ideal cache): the floor a kernel can reach, not what it moved.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

BYTES_OF_TYPE = {
    "double": 8, "long int": 8, "long": 8, "float": 4, "int": 4, "unsigned int": 4,
    "c10::Half": 2, "c10::BFloat16": 2, "short int": 2, "short": 2, "unsigned char": 1,
    "signed char": 1, "bool": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
}  # fmt: skip
PRECISION_OF_TYPE = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
}  # fmt: skip


@dataclass(frozen=True)
class Work:
    """One call's FLOPs and bytes, whether it runs on the matrix units, and its precision."""

    flops: float
    bytes: float
    matrix: bool
    precision: str  # bf16, fp16, fp8, fp32, fp64, or "" where the types do not say


def op_work(name: str, dims: Any, types: Any, concrete: Any) -> Work | None:
    """The work of one call of `name` with these recorded arguments (parsed JSON), None where
    no model covers it or its arguments are not what the model reads."""
    model = _MODELS.get(name)
    if model is None or not isinstance(dims, list) or not isinstance(types, list):
        return None
    try:
        return model(name, dims, types, concrete if isinstance(concrete, list) else [])
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None  # arguments not as the model reads them (a dtype it does not know, ...)


def _bpe(types: list[Any], i: int) -> int:
    return BYTES_OF_TYPE[types[i]]


def _n(shape: list[int]) -> int:
    return math.prod(int(d) for d in shape)


def _gemm(name: str, dims: list, types: list, concrete: list) -> Work:
    if name == "aten::mm":
        a, b, bias = dims[0], dims[1], None
        ta = 0
    elif name == "aten::addmm":
        bias, a, b = dims[0], dims[1], dims[2]
        ta = 1
    else:  # aten::_scaled_mm(self, mat2, scale_a, scale_b, bias?, ...)
        a, b = dims[0], dims[1]
        bias = dims[4] if len(dims) > 4 and dims[4] else None
        ta = 0
    (m, k), (k2, n) = (int(x) for x in a), (int(x) for x in b)
    if k != k2:
        raise ValueError("inner dimensions differ")
    bpe = _bpe(types, ta)
    out_bpe = 2 if bpe == 1 else bpe  # fp8 GEMMs write 16-bit results
    flops = 2.0 * m * n * k + (m * n if bias else 0)
    moved = (m * k + k * n) * bpe + m * n * out_bpe + (_n(bias) * out_bpe if bias else 0)
    return Work(flops, moved, True, PRECISION_OF_TYPE.get(types[ta], ""))


def _bmm(name: str, dims: list, types: list, concrete: list) -> Work:
    if name == "aten::bmm":
        a, b, bias, ta = dims[0], dims[1], None, 0
    else:  # aten::baddbmm(self, batch1, batch2, beta, alpha)
        bias, a, b, ta = dims[0], dims[1], dims[2], 1
    (batch, m, k), (batch2, k2, n) = (int(x) for x in a), (int(x) for x in b)
    if k != k2 or batch != batch2:
        raise ValueError("shapes do not multiply")
    bpe = _bpe(types, ta)
    flops = batch * (2.0 * m * n * k + (m * n if bias else 0))
    moved = batch * (m * k + k * n + m * n) * bpe + (_n(bias) * bpe if bias else 0)
    return Work(flops, moved, True, PRECISION_OF_TYPE.get(types[ta], ""))


# attention launchers: (layout of q/k/v, their positions, where is_causal is, backward?)
# BNHD: (batch, seq, heads, dim); BHND: (batch, heads, seq, dim)
_ATTENTION = {
    "aten::_flash_attention_forward": ("BNHD", (0, 1, 2), 8, False),
    "aten::_flash_attention_backward": ("BNHD", (1, 2, 3), 11, True),
    "aten::_efficient_attention_forward": ("BNHD", (0, 1, 2), -9, False),
    "aten::_efficient_attention_backward": ("BNHD", (1, 2, 3), -14, True),
    "aten::_scaled_dot_product_flash_attention": ("BHND", (0, 1, 2), 4, False),
    "aten::_scaled_dot_product_flash_attention_backward": ("BHND", (1, 2, 3), 11, True),
    "aten::_scaled_dot_product_efficient_attention": ("BHND", (0, 1, 2), 6, False),
    "aten::_scaled_dot_product_efficient_attention_backward": ("BHND", (1, 2, 3), 11, True),
}  # a negative position: xformers' custom_mask_type there (0: none, 1 and 2: causal)


def _attention(name: str, dims: list, types: list, concrete: list) -> Work:
    layout, (iq, ik, iv), causal_at, backward = _ATTENTION[name]
    if name == "aten::_scaled_dot_product_efficient_attention" and len(dims) == 5:
        causal_at = 4  # PyTorch 2.0: (query, key, value, compute_log_sumexp, is_causal)
    q, k, v = dims[iq], dims[ik], dims[iv]
    if layout == "BNHD":  # grouped-query attention: K and V have their own heads
        (b, nq, h, d), (_, nkv, hkv, _), (_, _, _, dv) = q, k, v
    else:
        (b, h, nq, d), (_, hkv, nkv, _), (_, _, _, dv) = q, k, v
    b, h, nq, nkv, d, dv, hkv = (int(x) for x in (b, h, nq, nkv, d, dv, hkv))
    flag = str(concrete[abs(causal_at)]) if abs(causal_at) < len(concrete) else ""
    causal = flag in ("1", "2") if causal_at < 0 else flag == "True"
    # forward: Q K^T and P V; backward: the scores again, dV, dP, dQ and dK
    flops = b * h * nq * nkv * (2.0 * (3 * d + 2 * dv) if backward else 2.0 * (d + dv))
    if causal and nq == nkv:
        flops /= 2
    bpe = _bpe(types, iq)
    q_n, k_n, v_n, o_n = b * h * nq * d, b * hkv * nkv * d, b * hkv * nkv * dv, b * h * nq * dv
    moved = (q_n + k_n + v_n + o_n) * bpe
    if backward:  # read Q, K, V, dO; write dQ, dK, dV
        moved = (q_n + k_n + v_n + o_n + q_n + k_n + v_n) * bpe
    return Work(flops, moved, True, PRECISION_OF_TYPE.get(types[iq], ""))


# convolution launchers: positions of (stride, padding, dilation, transposed, groups) in
# Concrete Inputs (-1: not an argument), and of the bias among the tensors (-1: none)
_CONV = {
    "aten::convolution": ((3, 4, 5, 6, 8), 2),
    "aten::_convolution": ((3, 4, 5, 6, 8), 2),
    "aten::cudnn_convolution": ((3, 2, 4, -1, 5), -1),
    "aten::miopen_convolution": ((4, 3, 5, -1, 6), 2),
}


def _ints(text: Any) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", str(text))]


def _conv(name: str, dims: list, types: list, concrete: list) -> Work:
    (si, pi, di, ti, gi), bias_at = _CONV[name]
    x, w = [int(v) for v in dims[0]], [int(v) for v in dims[1]]
    if ti >= 0 and str(concrete[ti]) == "True":
        raise ValueError("transposed convolutions are not modelled")
    spatial = len(x) - 2
    stride, padding, dilation = (_ints(concrete[i]) for i in (si, pi, di))
    stride, padding, dilation = (
        [v] * spatial if len(v) == 1 else v for v in (stride, padding, dilation)
    )
    groups = int(str(concrete[gi]) or 1)
    out_spatial = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
        for i in range(spatial)
    ]
    out = x[0] * w[0] * math.prod(out_spatial)
    if w[1] * groups != x[1]:
        raise ValueError("channels do not match")
    has_bias = bias_at >= 0 and len(dims) > bias_at and bool(dims[bias_at])
    flops = 2.0 * out * _n(w[1:]) + (out if has_bias else 0)
    bpe = _bpe(types, 0)
    moved = (_n(x) + _n(w) + (w[0] if has_bias else 0) + out) * bpe
    precision = PRECISION_OF_TYPE.get(types[0], "")
    if name == "aten::cudnn_convolution" and precision == "fp32" and _tf32(concrete):
        precision = "tf32"  # cuDNN may run it on the tensor cores (allow_tf32, the default)
    return Work(flops, moved, True, precision)


def _tf32(concrete: list) -> bool:
    """cudnn_convolution's last argument, allow_tf32."""
    return len(concrete) > 8 and str(concrete[8]) == "True"


_UNARY = ("aten::copy_", "aten::sigmoid", "aten::rsqrt", "aten::silu", "aten::neg",
          "aten::gelu", "aten::relu", "aten::exp", "aten::tanh", "aten::clamp_min",
          "aten::clamp_min_")  # fmt: skip
_BINARY = ("aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::div", "aten::div_",
           "aten::sub", "aten::sub_", "aten::pow", "aten::sigmoid_backward",
           "aten::threshold_backward")  # fmt: skip


def _elementwise(name: str, dims: list, types: list, concrete: list) -> Work:
    tensors = [(i, d) for i, d in enumerate(dims[:2]) if isinstance(d, list) and d]
    if name == "aten::copy_":  # copy_(self, src): read src, write self
        (_, dst), (_, src) = tensors[0], tensors[1]
        out = _n(dst)
        moved = _n(src) * _bpe(types, 1) + out * _bpe(types, 0)
        return Work(float(out), float(moved), False, PRECISION_OF_TYPE.get(types[0], ""))
    if name in _UNARY or len(tensors) == 1:
        i, shape = tensors[0]
        out = _n(shape)
        return Work(
            float(out), 2.0 * out * _bpe(types, i), False, PRECISION_OF_TYPE.get(types[i], "")
        )
    (i, a), (j, b) = tensors[0], tensors[1]
    out_shape = _broadcast(a, b)
    out = _n(out_shape)
    out_bpe = max(_bpe(types, i), _bpe(types, j))
    moved = _n(a) * _bpe(types, i) + _n(b) * _bpe(types, j) + out * out_bpe
    return Work(float(out), float(moved), False, PRECISION_OF_TYPE.get(types[i], ""))


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    a, b = [int(v) for v in a], [int(v) for v in b]
    width = max(len(a), len(b))
    a, b = [1] * (width - len(a)) + a, [1] * (width - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not broadcast")
        out.append(max(x, y))
    return out


_REDUCTIONS = ("aten::sum", "aten::mean", "aten::amax", "aten::amin")


def _reduction(name: str, dims: list, types: list, concrete: list) -> Work:
    """sum/mean/amax/amin(self, dim, keepdim, ...): one FLOP per input element; bytes the input
    and the output."""
    shape = [int(d) for d in dims[0]]
    n_in = _n(shape)
    axes: list[int] = []
    if len(dims) >= 3:  # the dim overload (self, dim, keepdim, ...); (self, dtype): every dim
        # "" is dim=None, or a trace that records no int lists at all: not known which
        if len(concrete) < 2 or not str(concrete[1]).startswith("["):
            raise ValueError("the reduced dims are not recorded (no Concrete Inputs)")
        axes = _ints(concrete[1])
    if axes:
        kept = [d for i, d in enumerate(shape) if i not in {a % len(shape) for a in axes}]
        n_out = _n(kept)
    else:  # every dimension
        n_out = 1
    flops = n_in
    moved = (n_in + n_out) * _bpe(types, 0)
    return Work(float(flops), float(moved), False, PRECISION_OF_TYPE.get(types[0], ""))


_SOFTMAX = ("aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax")


def _softmax(name: str, dims: list, types: list, concrete: list) -> Work:
    """5 FLOPs per element (the max, a subtraction, exp, the sum, a divide or log); bytes the
    input read and the output written."""
    n = _n(dims[0])
    return Work(5.0 * n, 2.0 * n * _bpe(types, 0), False, PRECISION_OF_TYPE.get(types[0], ""))


# norm → (the input's position, the positions of its parameter tensors, FLOPs per element,
# tensors of the input's size read and written); layer and batch norm add 6 per channel
_NORMS = {
    # native_layer_norm(input, normalized_shape, weight, bias, eps): mean, centre, square and
    # sum, normalise, scale and shift
    "aten::native_layer_norm": (0, (2, 3), 5, 2),
    # native_batch_norm(input, weight, bias, running_mean, running_var, training, ...)
    "aten::native_batch_norm": (0, (1, 2, 3, 4), 5, 2),
    # rms_norm(input, normalized_shape, weight, eps): square and sum, scale by the rms, weight
    "aten::rms_norm": (0, (2,), 4, 2),
    "aten::_fused_rms_norm": (0, (2,), 4, 2),
    # vLLM: rms_norm(out, input, weight, eps); fused_add_rms_norm(input, residual, weight, eps)
    # adds the residual first and writes both in place
    "_C::rms_norm": (1, (2,), 4, 2),
    "_C::fused_add_rms_norm": (0, (2,), 5, 4),
}


def _norm(name: str, dims: list, types: list, concrete: list) -> Work:
    at, params, per_element, passes = _NORMS[name]
    n = _n(dims[at])
    flops = float(per_element * n) + 6.0 * _channels(name, dims, concrete)
    if name == "aten::native_batch_norm" and len(concrete) > 5 and str(concrete[5]) == "False":
        flops = 4.0 * n  # eval: the running statistics, so centre, normalise, scale, shift
    weights = sum(_n(dims[i]) * _bpe(types, i) for i in params if i < len(dims) and dims[i])
    moved = passes * n * _bpe(types, at) + weights
    return Work(flops, float(moved), False, PRECISION_OF_TYPE.get(types[at], ""))


def _channels(name: str, dims: list, concrete: list) -> int:
    """Layer norm's normalised elements (its weight's, else `normalized_shape` as recorded) and
    batch norm's channels; 0 for the RMS norms (no per-channel term)."""
    if name == "aten::native_batch_norm":
        return int(dims[0][1]) if len(dims[0]) > 1 else 1
    if name != "aten::native_layer_norm":
        return 0
    if len(dims) > 2 and dims[2]:
        return _n(dims[2])
    if len(concrete) > 1 and str(concrete[1]).startswith("["):
        return math.prod(_ints(concrete[1]))
    return int(dims[0][-1]) if dims[0] else 1  # unrecorded: the usual normalized_shape


_MODELS = {
    **dict.fromkeys(("aten::mm", "aten::addmm", "aten::_scaled_mm"), _gemm),
    **dict.fromkeys(("aten::bmm", "aten::baddbmm"), _bmm),
    **dict.fromkeys(_ATTENTION, _attention),
    **dict.fromkeys(_CONV, _conv),
    **dict.fromkeys((*_UNARY, *_BINARY), _elementwise),
    **dict.fromkeys(_REDUCTIONS, _reduction),
    **dict.fromkeys(_SOFTMAX, _softmax),
    **dict.fromkeys(_NORMS, _norm),
}
