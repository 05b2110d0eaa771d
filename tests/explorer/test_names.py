"""Names shortened by structure: within the width, told apart, the distinguishing part kept."""

from __future__ import annotations

import gzip
import json

import pytest

from tracegraph.explorer.names import shorten_all

from ..conftest import TRACES, needs_traces

ABS = ("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, "
       "at::detail::Array<char*, 2> >(int, at::native::AbsFunctor<float>, "
       "at::detail::Array<char*, 2>)")  # fmt: skip
ADD = ABS.replace("AbsFunctor", "CUDAFunctor_add").replace("2>", "3>")


def test_structure_goes_before_anything_is_cut() -> None:
    adam = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<x>(int, float*)"
    assert shorten_all([adam], 60) == ["multi_tensor_apply_kernel<x>(…)"]
    nccl = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    assert shorten_all([nccl], 60) == ["ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(…)"]
    assert shorten_all(["aten::linear", "Memcpy HtoD (Pinned -> Device)"], 60) == [
        "aten::linear", "Memcpy HtoD (Pinned -> Device)"
    ]  # fmt: skip
    guarded = "std::enable_if<(((8)>(0)))&&vllm::x<c10::BFloat16>::exists, void>::type f<8>(int)"
    assert shorten_all([guarded], 30) == ["enable_if<…>::type f<…>(…)"]


def test_names_that_differ_only_in_template_arguments_keep_them() -> None:
    short = shorten_all([ABS, ADD], 100)
    assert short == [
        "vectorized_elementwise_kernel<4, AbsFunctor<float>, Array<char*, 2> >(…)",
        "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Array<char*, 3> >(…)",
    ]
    cut = shorten_all([ABS, ADD], 50)
    assert all(len(s) <= 50 for s in cut) and cut[0] != cut[1]
    assert "AbsFunctor" in cut[0] and "CUDAFunctor_add" in cut[1]  # where they differ shows


@needs_traces
@pytest.mark.parametrize("width", [24, 40, 60])
def test_real_kernel_names_stay_apart_within_the_width(width: int) -> None:
    path = TRACES / "tracelens" / "traces" / "b200" / "eager_trace.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    names = sorted({e["name"] for e in events if e.get("cat") == "kernel"})
    short = shorten_all(names, width)
    assert all(len(s) <= width for s in short)
    assert len(set(short)) >= len(names) - 2  # nearly all told apart, even at 24 characters
    if width >= 40:
        assert len(set(short)) == len(names)
