"""Operator performance (`perf_model`, `op_perf`, `gpu_specs`): FLOPs and bytes by hand for each
model, on shapes taken from the shared traces; on real GPU traces every modelled row stays at or
under its GPU's roofline (a model that over-counts would claim more than the silicon can do),
and its throughput is its FLOPs over the kernels' busy time read from the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tracegraph
from tracegraph.queries.report.gpu_specs import SPECS, spec_for
from tracegraph.queries.report.perf_model import op_work

from ..conftest import TRACES

BF16, F32 = "c10::BFloat16", "float"


def test_gemms() -> None:
    m, k, n = 8944, 1024, 2816  # an H100 Qwen step's MLP up-projection
    w = op_work("aten::mm", [[m, k], [k, n]], [BF16, BF16], ["", ""])
    assert w is not None and (w.flops, w.bytes, w.matrix, w.precision) == (
        2 * m * n * k,
        (m * k + k * n + m * n) * 2,
        True,
        "bf16",
    )
    w = op_work("aten::addmm", [[1024], [m, k], [k, 1024], [], []], [BF16] * 3 + ["Scalar"] * 2,
                ["", "", "", "1", "1"])  # fmt: skip
    assert w is not None
    assert (w.flops, w.bytes) == (
        2 * m * 1024 * k + m * 1024,
        (m * k + k * 1024 + m * 1024 + 1024) * 2,
    )
    w = op_work("aten::bmm", [[8, 32, 64], [8, 64, 16]], [F32, F32], ["", ""])
    assert w is not None and (w.flops, w.bytes, w.precision) == (
        8 * 2 * 32 * 16 * 64,
        8 * (32 * 64 + 64 * 16 + 32 * 16) * 4,
        "fp32",
    )
    w = op_work("aten::baddbmm", [[8, 32, 16], [8, 32, 64], [8, 64, 16], [], []],
                [F32] * 3 + ["Scalar"] * 2, [])  # fmt: skip
    assert w is not None and w.flops == 8 * (2 * 32 * 16 * 64 + 32 * 16)
    fp8 = "c10::Float8_e4m3fn"
    w = op_work("aten::_scaled_mm", [[64, 128], [128, 256], [], []], [fp8, fp8, F32, F32], [])
    assert w is not None and (w.bytes, w.precision) == (64 * 128 + 128 * 256 + 64 * 256 * 2, "fp8")
    assert op_work("aten::mm", [[4, 5], [6, 7]], [F32, F32], []) is None  # do not multiply


def test_grouped_query_attention_reads_fewer_keys_and_values() -> None:
    q, kv = [2, 1024, 32, 128], [2, 1024, 8, 128]  # BNHD: 32 query heads, 8 key/value heads
    w = op_work("aten::_flash_attention_forward", [q, kv, kv], [BF16] * 3,
                ["", "", "", "", "", "1024", "1024", "0.", "False"])  # fmt: skip
    assert w is not None and w.flops == 2 * 32 * 1024 * 1024 * 4 * 128
    assert w.bytes == (2 * 32 * 1024 * 128 * 2 + 2 * 8 * 1024 * 128 * 2) * 2  # Q, O; K, V


def test_attention() -> None:
    b, nq, h, d = 16, 559, 16, 64  # the H100 trace's causal flash attention (BNHD)
    concrete = ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125"]
    w = op_work("aten::_flash_attention_forward", [[b, nq, h, d]] * 3, [BF16] * 3, concrete)
    assert w is not None and w.flops == b * h * nq * nq * 4 * d / 2  # causal: half
    assert w.bytes == 4 * b * h * nq * d * 2
    not_causal = [*concrete[:8], "False"]
    w2 = op_work("aten::_flash_attention_forward", [[b, nq, h, d]] * 3, [BF16] * 3, not_causal)
    assert w2 is not None and w2.flops == 2 * w.flops
    grads = [[b, nq, h, d]] * 5
    back = op_work("aten::_flash_attention_backward", grads, [BF16] * 5,
                   ["", "", "", "", "", "", "", "", "559", "559", "0.", "True"])  # fmt: skip
    assert back is not None and back.flops == 2.5 * w.flops  # d_qk = d_v: 10 d against 4 d
    # DeepSeek's MLA heads: d_qk 192, d_v 128; 2 (3 x 192 + 2 x 128) per score, as TraceLens
    mla = op_work("aten::_flash_attention_backward", [[1, 64, 8, 128], [1, 64, 8, 192],
                  [1, 64, 8, 192], [1, 64, 8, 128], [1, 64, 8, 128]], [BF16] * 5,
                  ["", "", "", "", "", "", "", "", "64", "64", "0.", "False"])  # fmt: skip
    assert mla is not None and mla.flops == 1 * 8 * 64 * 64 * 2 * (3 * 192 + 2 * 128)
    # BHND, efficient, no mask
    w3 = op_work("aten::_scaled_dot_product_efficient_attention", [[2, 8, 128, 64]] * 3 + [[]],
                 [BF16] * 3 + [""], ["", "", "", "", "True", "0.", "False"])  # fmt: skip
    assert w3 is not None and w3.flops == 2 * 8 * 128 * 128 * 4 * 64


def test_convolution() -> None:
    x, wt = [32, 3, 224, 224], [64, 3, 7, 7]  # ResNet's stem: stride 2, padding 3
    concrete = ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"]
    w = op_work("aten::convolution", [x, wt, []], ["float", "float", ""], concrete)
    out = 32 * 64 * 112 * 112
    assert w is not None and w.flops == 2 * out * 3 * 49
    assert w.bytes == (32 * 3 * 224 * 224 + 64 * 3 * 49 + out) * 4
    cudnn_args = ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]
    cudnn = op_work("aten::cudnn_convolution", [x, wt], ["float", "float"], cudnn_args)
    assert cudnn is not None and (cudnn.flops, cudnn.bytes) == (w.flops, w.bytes)
    assert (w.precision, cudnn.precision) == ("fp32", "tf32")  # cuDNN's allow_tf32 (default)
    strict = op_work(
        "aten::cudnn_convolution", [x, wt], ["float", "float"], [*cudnn_args[:8], "False"]
    )
    assert strict is not None and strict.precision == "fp32"
    depthwise = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "32"]
    grouped = op_work("aten::convolution", [[8, 32, 56, 56], [32, 1, 3, 3], []], [F32, F32, ""],
                      depthwise)  # fmt: skip
    assert grouped is not None and grouped.flops == 2 * 8 * 32 * 56 * 56 * 9  # depthwise


def test_elementwise() -> None:
    w = op_work("aten::add", [[16, 1, 8], [4, 8], []], [F32, F32, "Scalar"], [])
    assert w is not None and (w.flops, w.bytes, w.matrix) == (
        16 * 4 * 8,
        (128 + 32 + 512) * 4,
        False,
    )
    w = op_work("aten::copy_", [[10, 10], [10, 10], []], [BF16, F32, "Scalar"], [])
    assert w is not None and w.bytes == 100 * 4 + 100 * 2
    assert op_work("aten::add", [[3, 4], [5, 4]], [F32, F32], []) is None  # no broadcast


def test_reductions_softmax_and_norms() -> None:
    # the H100 Qwen step's RMS statistics: mean over the last dim of 16 x 559 x 1024 floats
    shape = [16, 559, 1024]
    n, rows = 16 * 559 * 1024, 16 * 559
    w = op_work("aten::mean", [shape, [], [], []], [F32, "ScalarList", "Scalar", ""],
                ["", "[-1]", "True", ""])  # fmt: skip
    assert w is not None and (w.flops, w.bytes, w.matrix) == (n, (n + rows) * 4, False)
    # the MI300 ResNet's loss: sum over dim 0 of 10 x 1000 bf16
    w = op_work("aten::sum", [[10, 1000], [], [], []], [BF16, "ScalarList", "Scalar", ""],
                ["", "[0]", "True", ""])  # fmt: skip
    assert w is not None and (w.flops, w.bytes) == (10_000, (10_000 + 1000) * 2)
    w = op_work("aten::amax", [[4, 6], [], []], [F32, "ScalarList", "Scalar"], ["", "[]", ""])
    assert w is not None and (w.flops, w.bytes) == (24, (24 + 1) * 4)  # every dim: a scalar
    # sum(self, *, dtype): the recorded dtype (6) is no dim: every element into one
    w = op_work("aten::sum", [[8, 1024], []], [BF16, "Scalar"], ["", "6"])
    assert w is not None and (w.flops, w.bytes) == (8192, (8192 + 1) * 2)
    # "" may be dim=None or a trace that records no int lists (the MTIA trace's): no model
    assert op_work("aten::sum", [[8, 1024], [], [], []], [BF16, "", "Scalar", ""],
                   ["", "", "False", ""]) is None  # fmt: skip
    # the dim overload without Concrete Inputs: which dims is not known, so no model
    assert op_work("aten::sum", [[8, 1024], [], [], []], [BF16, "ScalarList", "Scalar", ""],
                   []) is None  # fmt: skip
    w = op_work("aten::_softmax", [[2, 8, 128, 128], [], []], [BF16, "Scalar", "Scalar"], [])
    assert w is not None and (w.flops, w.bytes) == (5 * 262_144, 2 * 262_144 * 2)
    # the MI300 ResNet's batch norm, training: 10 x 512 x 7 x 7 bf16, four 512-vectors
    x, c = [10, 512, 7, 7], [512]
    w = op_work("aten::native_batch_norm", [x, c, c, c, c, [], [], []], [BF16] * 5 + [""] * 3,
                ["", "", "", "", "", "True", "0.1", "1e-05"])  # fmt: skip
    # TraceLens's count: 5 per element and 6 per channel
    assert w is not None and (w.flops, w.bytes) == (5 * 250_880 + 6 * 512,
                                                    2 * 250_880 * 2 + 4 * 512 * 2)  # fmt: skip
    in_eval = ["", "", "", "", "", "False", "0.1", "1e-05"]
    evaluating = op_work(
        "aten::native_batch_norm", [x, c, c, c, c, [], [], []], [BF16] * 5 + [""] * 3, in_eval
    )
    assert evaluating is not None and evaluating.flops == 4 * 250_880
    # without affine weights and normalized_shape unrecorded: the last dim
    bare = op_work("aten::native_layer_norm", [[8, 128, 768], [], [], [], []],
                   [BF16, "", "", "", "Scalar"], ["", "", "", "", "1e-05"])  # fmt: skip
    assert bare is not None and bare.flops == 5 * 786_432 + 6 * 768
    w = op_work("aten::native_layer_norm", [[8, 128, 768], [], [768], [768], []],
                [BF16, "ScalarList", BF16, BF16, "Scalar"], [])  # fmt: skip
    assert w is not None and (w.flops, w.bytes) == (5 * 786_432 + 6 * 768,
                                                    2 * 786_432 * 2 + 2 * 768 * 2)  # fmt: skip
    # the B200 GPT-OSS run's vLLM norms: 888 tokens x 2880, bf16
    t = [888, 2880]
    n = 888 * 2880
    w = op_work("_C::rms_norm", [t, t, [2880], []], [BF16] * 3 + ["Scalar"], [])
    assert w is not None and (w.flops, w.bytes) == (4 * n, 2 * n * 2 + 2880 * 2)
    w = op_work("_C::fused_add_rms_norm", [t, t, [2880], []], [BF16] * 3 + ["Scalar"], [])
    assert w is not None and (w.flops, w.bytes) == (5 * n, 4 * n * 2 + 2880 * 2)


def test_device_names_pick_specs() -> None:
    assert spec_for("NVIDIA H100 80GB HBM3") is SPECS["H100 SXM"]
    assert spec_for("NVIDIA H100 PCIe") is SPECS["H100 PCIe"]
    assert spec_for("NVIDIA A100-SXM4-80GB") is SPECS["A100 80GB SXM"]
    assert spec_for("NVIDIA A100 80GB PCIe") is SPECS["A100 80GB PCIe"]
    assert spec_for("NVIDIA A100-PG509-200") is SPECS["A100 40GB"]  # HTA's traces: 40 GB
    assert spec_for("NVIDIA GH200 480GB") is SPECS["GH200"]
    assert spec_for("NVIDIA H100 NVL") is SPECS["H100 NVL"]
    assert spec_for("AMD Instinct MI300X") is SPECS["MI300X"]
    assert spec_for("Tesla V100-SXM2-16GB") is SPECS["V100"]
    assert spec_for("mi250x") is SPECS["MI250X"]
    assert spec_for("AMD Radeon Graphics") is None and spec_for(None) is None


ROOFLINE_TRACES = {
    "tracelens/traces/mi300/resnet_act_checkpoint.json.gz": None,  # names MI300X itself
    "tracelens/traces/b200/eager_trace.json.gz": None,  # NVIDIA B200
    "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": "H100",  # no name
}


@pytest.mark.parametrize("relative", sorted(ROOFLINE_TRACES))
def test_no_row_beats_its_roofline(relative: str, tmp_path: Path) -> None:
    path = TRACES / relative
    if not path.is_file():
        pytest.skip(f"real traces not at {TRACES}")
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(path, run="r")
    report = tracegraph.open(db).report(top=10_000, gpu=ROOFLINE_TRACES[relative])
    rows = report.tables["op_perf"].to_pylist()
    assert any(r["category"] == "GEMM" for r in rows)
    shapes = {_key(r): r for r in report.tables["op_shapes"].to_pylist()}
    for r in rows:
        assert r["gpu"], r  # every rank's GPU known (named by the trace or --gpu)
        assert r["roofline_pct"] is None or r["roofline_pct"] <= 100.5, r
        assert r["tflops"] <= r["peak_tflops"] * 1.005 if r["peak_tflops"] else True
        assert r["tbps"] <= r["peak_tbps"] * 1.005
        shape = shapes[_key(r)]
        work = op_work(r["name"], json.loads(r["input_dims"]), json.loads(r["input_types"]),
                       json.loads(shape["concrete_inputs"] or "null"))  # fmt: skip
        assert work is not None
        assert r["tflops"] == pytest.approx(work.flops / shape["gpu_mean_ns"] / 1e3)
        assert shape["gpu_mean_ns"] == pytest.approx(shape["gpu_total_ns"] / shape["count"])


def _key(row: dict) -> tuple:
    return tuple(row[k] for k in ("name", "input_dims", "input_types", "input_strides",
                                  "concrete_inputs"))  # fmt: skip


def test_the_device_name_comes_from_the_trace(tmp_path: Path) -> None:
    path = TRACES / "tracelens/traces/mi300/resnet_act_checkpoint.json.gz"
    if not path.is_file():
        pytest.skip(f"real traces not at {TRACES}")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    named = {p["name"] for p in doc["deviceProperties"]}
    db = tmp_path / "run.kuzu"
    tracegraph.open(db).ingest(path, run="r")
    gpus = tracegraph.open(db).query("MATCH (r:Rank) RETURN r.gpu AS gpu")["gpu"].to_pylist()
    assert gpus == sorted(named) == ["AMD Instinct MI300X"]
    rows = tracegraph.open(db).report().tables["op_perf"].to_pylist()
    assert rows and {r["gpu"] for r in rows} == {"MI300X"}
