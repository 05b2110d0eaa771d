"""The simulated model and its framework, as the trace names them: op names, python frames and
GPU kernel specs (names JSON-quoted, ready to write), and the ops of a layer's forward and
backward."""

from __future__ import annotations

import json
from dataclasses import dataclass


def quote(text: str) -> str:
    """JSON string literal of `text`."""
    return json.dumps(text)


HIDDEN = 1024
PARAMS_PER_LAYER = HIDDEN * HIDDEN + 3 * HIDDEN  # linear weight + bias, layer-norm weight + bias
PROFILER_STEP_FRAME = quote("torch/profiler/profiler.py(790): step")
TRAIN_STEP_FRAME = quote("train.py(120): train_step")
CALL_IMPL_FRAME = quote("torch/nn/modules/module.py(1747): _call_impl")
SLEEP_FRAME = quote("<built-in function sleep>")
GC_FRAME = quote("<built-in function collect>")
ENTER_FRAME = quote("torch/autograd/profiler.py(760): __enter__")
DATALOADER = quote("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
NCCL_KERNEL_NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@dataclass(frozen=True)
class Kernel:
    """A GPU kernel: JSON-quoted name, mean duration (ns) and the static tail of its args."""

    name: str
    mean_ns: int
    static: str


def _kernel(name: str, mean_ns: int, grid: int, block: int, regs: int, smem: int) -> Kernel:
    """Kernel spec with occupancy args derived from an H100 (132 SMs)."""
    blocks_per_sm = grid / 132
    warps_per_sm = blocks_per_sm * block / 32
    occupancy = min(100, int(100 * min(warps_per_sm, 64) / 64))
    static = (
        f'"registers per thread": {regs}, "shared memory": {smem}, '
        f'"blocks per SM": {blocks_per_sm:.6f}, "warps per SM": {warps_per_sm:.6f}, '
        f'"grid": [{grid}, 1, 1], "block": [{block}, 1, 1], '
        f'"est. achieved occupancy %": {occupancy}'
    )
    return Kernel(quote(name), mean_ns, static)


_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_{}_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"  # noqa: E501
_CLAMP = "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}"  # noqa: E501
_THRESH = "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}"  # noqa: E501
_MSE_BWD = "at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float, float, float)#1}"  # noqa: E501
_MEAN_OP = "at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>"  # noqa: E501
_ADAM_META = "at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>"
_ADAM_FN = "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>"  # noqa: E501
_ADAM_ARGS = "double*, double, double, double, double, double, bool, float const*, float const*"


def _elementwise(functor: str, arity: int) -> str:
    """Name of an at::native vectorized elementwise kernel."""
    array = f"at::detail::Array<char*, {arity}>"
    return f"void at::native::vectorized_elementwise_kernel<4, {functor}, {array} >(int, {functor}, {array})"  # noqa: E501


K_GEMM_FWD = _kernel(_GEMM.format("tn"), 30_000, 256, 128, 168, 98_304)
K_GEMM_DGRAD = _kernel(_GEMM.format("nn"), 30_000, 256, 128, 168, 98_304)
K_GEMM_WGRAD = _kernel(_GEMM.format("nt"), 33_000, 256, 128, 168, 98_304)
GEMMS = (K_GEMM_FWD, K_GEMM_DGRAD, K_GEMM_WGRAD)  # slow_kernel_rank's slow kernels
K_CLAMP = _kernel(_elementwise(_CLAMP, 2), 6_000, 8192, 128, 26, 0)
K_THRESHOLD_BWD = _kernel(_elementwise(_THRESH, 3), 8_000, 8192, 128, 28, 0)
K_LAYER_NORM = _kernel(
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)",
    9_000,
    8192,
    256,
    40,
    0,
)
K_LAYER_NORM_BWD = _kernel(
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float>"
    "(float const*, float const*, float const*, float const*, float const*, float*, int)",
    14_000,
    8192,
    128,
    48,
    1_024,
)
K_MSE = _kernel(
    f"void at::native::reduce_kernel<512, 1, {_MEAN_OP} >({_MEAN_OP})", 5_000, 264, 512, 32, 16
)
K_MSE_BWD = _kernel(_elementwise(_MSE_BWD, 4), 4_000, 8192, 128, 30, 0)
K_CAST = _kernel("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda"
                 "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>", 3_000, 8192, 128,
                 24, 0)  # fmt: skip
K_TINY = _kernel(_elementwise(_CLAMP, 2), 1_500, 64, 128, 16, 0)
K_ADAMW = _kernel(
    f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{_ADAM_META}, {_ADAM_FN}, "
    f"{_ADAM_ARGS}>({_ADAM_META}, {_ADAM_FN}, {_ADAM_ARGS})",
    40_000,
    320,
    512,
    64,
    0,
)
K_NCCL = _kernel(NCCL_KERNEL_NAME, 0, 24, 640, 96, 87_568)

# Forward per layer: (parent op, leaf op, kernel, autograd node, Sequence number on the leaf?)
FORWARD_LAYER: tuple[tuple[str, str, Kernel, bool], ...] = (
    (quote("aten::linear"), quote("aten::addmm"), K_GEMM_FWD, True),
    (quote("aten::relu"), quote("aten::clamp_min"), K_CLAMP, False),
    (quote("aten::layer_norm"), quote("aten::native_layer_norm"), K_LAYER_NORM, True),
)
Leaves = tuple[tuple[str, Kernel], ...]


def _node(node: str, *leaves: tuple[str, Kernel]) -> tuple[str, str, Leaves]:
    """(evaluate_function op name, autograd node name, leaf ops with their kernels), quoted."""
    quoted = tuple((quote(leaf), kernel) for leaf, kernel in leaves)
    return quote(f"autograd::engine::evaluate_function: {node}"), quote(node), quoted


# Backward per layer, in execution order.
BACKWARD_LAYER = (
    _node("NativeLayerNormBackward0", ("aten::native_layer_norm_backward", K_LAYER_NORM_BWD)),
    _node("ReluBackward0", ("aten::threshold_backward", K_THRESHOLD_BWD)),
    _node("AddmmBackward0", ("aten::mm", K_GEMM_DGRAD), ("aten::mm", K_GEMM_WGRAD)),
)
MSE_BACKWARD = _node("MseLossBackward0", ("aten::mse_loss_backward", K_MSE_BWD))
